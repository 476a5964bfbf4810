"""One doc section per script: a script's figures live between its own HTML-comment markers in a markdown file,
and rerunning it replaces only that section (the other scripts' sections stay as they are).

Used by bench_throughput.py, bench_rl_step.py and experiments_dgemm.py.
"""

from __future__ import annotations

from pathlib import Path


def write_section(doc: Path, name: str, section: str, heading: str, title: str) -> None:
    """Put ``section`` between ``<!-- name:begin -->`` and ``<!-- name:end -->`` in ``doc``.

    Args:
        doc: the markdown file; created with ``title`` as its first line when missing.
        name: the marker name (one per script).
        section: the markdown to write.
        heading: a markdown heading put before the markers when the section is new.
        title: the file's first line when the file is new.
    """
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    body = f"{begin}\n{section}\n{end}"
    old = doc.read_text() if doc.exists() else f"{title}\n"
    if begin in old and end in old:
        new = old[: old.index(begin)] + body + old[old.index(end) + len(end):]
    else:
        new = old.rstrip() + f"\n\n{heading}\n\n{body}\n"
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(new)
