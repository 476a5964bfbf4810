"""Loaders that bring real data-race corpora into the ``race_c`` / ``race_fortran`` families.

- DataRaceBench (LLNL): ``micro-benchmarks/*.c|*.cpp`` and ``micro-benchmarks-fortran/*.f90|*.f95|*.F90|*.F95``
  (or the files directly under the root given), label from the file name: ``DRB001-antidep1-orig-yes.c`` -> yes.
- HPC-GPT's Alpaca-style race files (instruction / input / output), label read from the output.

Both loaders take an optional quarantine list: a record they cannot read or label is set aside there instead of
stopping the load (``hpcrl_core.data.quarantine``; the prepare stage fails only past ``prepare.max_quarantine_share``).

Records look like the synthetic ones (``generator``): same question wording for DataRaceBench, same metadata keys.

Label leaks are stripped from every program (``strip_label_leaks``). DataRaceBench states the answer in its comments
in many ways ("Data race pair: a[i+1]@64:10:W vs. ...", "No data race pairs", "simulate the missing taskwait
mistake") and in names (``program DRB001_antidep1_orig_yes``), so every comment goes (OpenMP sentinels ``!$omp`` and
``!$`` lines are kept) and every ``DRBnnn...`` token becomes ``kernel1``, ``kernel2``... consistently, so the
program still compiles. The dropped comments include DataRaceBench's BSD licence header, so whoever passes the
records on must pass that notice on with them: ``dataracebench_notice`` returns it verbatim, and the prepare stage
writes it next to the family's data (``data/race_<language>/NOTICE-DataRaceBench.txt``) and names it in the data card.

Test: ``pytest tests/data/race/test_loaders.py``.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from hpcrl_core.data.qa.alpaca import load_alpaca
from hpcrl_core.data.quarantine import Quarantined
from hpcrl_core.data.race.generator import FAMILIES, SYSTEM, race_metadata, race_question
from hpcrl_core.data.schema import Record, assistant, messages
from hpcrl_core.errors import DataError

DRB_DIRS = {"c": "micro-benchmarks", "fortran": "micro-benchmarks-fortran"}
DRB_SUFFIXES = {"c": (".c", ".cpp"), "fortran": (".f90", ".f95", ".F90", ".F95")}
_DRB_NAME = re.compile(r"^(?:DRB\d+[a-z]?[-_])?(?P<pattern>.+?)(?:[-_](?:orig|var))?[-_](?P<label>yes|no)$", re.I)
_DRB_TOKEN = re.compile(r"\bDRB\d+[\w.-]*", re.I)
_RACE_PAIR = re.compile(r"([^\s@:,]+)@\d+:\d+(?::[RW])?\s+vs\.?\s+([^\s@:,]+)@\d+:\d+")
_C_TOKENS = re.compile(r"\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'|//[^\n]*|/\*.*?(?:\*/|\Z)", re.S)
_FENCED = re.compile(r"(```[^\n]*\n)(.*?)(```)", re.S)
NOTICE_FILE = "NOTICE-DataRaceBench.txt"
_LICENCE_FILES = ("LICENSE*", "COPYRIGHT*", "NOTICE*")
_OPENING_COMMENT = {"c": re.compile(r"\A\s*(/\*.*?\*/)", re.S),
                    "fortran": re.compile(r"\A\s*((?:[ \t]*!(?!\$).*\n)+)")}
_FIRST_WORD = re.compile(r"^\W*(yes|no)\b", re.I)
_RACE = r"data[- ]races?"
_NEGATIVE = re.compile(
    rf"\b(?:no|not\s+any|free\s+(?:of|from))\s+(?:\w+\s+)?{_RACE}\b"
    rf"|\b(?:does|do|did|will|can)\s*(?:not|n't)\s+(?:\w+\s+)?(?:contain|have|exhibit|include|cause)\s+(?:a\s+|any\s+)?"
    rf"(?:\w+\s+)?{_RACE}\b|\b(?:data[- ])?race[- ]free\b", re.I)
_POSITIVE = re.compile(
    rf"\b(?:contains?|has|have|exhibits?|there\s+(?:is|are|exists?))\s+(?:a\s+|an\s+|one\s+or\s+more\s+)?"
    rf"(?:potential\s+|possible\s+)?{_RACE}\b|\b{_RACE}\s+(?:exists?|occurs?|is\s+present|can\s+occur|will\s+occur)",
    re.I)


def load_dataracebench(root: Path, language: str, skip_unlabelled: bool = False,
                       quarantine: list[Quarantined] | None = None) -> list[Record]:
    """DataRaceBench micro-benchmarks of one language, labelled from their file names.

    Args:
        root: a DataRaceBench checkout (with ``micro-benchmarks[-fortran]/``) or a folder holding the files directly;
            sub-folders (e.g. ``utilities/``) are not read.
        language: "c" (``.c``, ``.cpp``) or "fortran" (``.f90``, ``.f95``, ``.F90``, ``.F95``).
        skip_unlabelled: skip files whose name carries no yes/no label (some releases ship e.g. ``-dd`` files)
            instead of failing.
        quarantine: when given, a file without a label (unless skipped) or that cannot be read is appended to it
            (source ``dataracebench:<root>``, its path under the root, the reason) instead of raising.

    Raises:
        DataError: unknown language, missing folder, no files, or (without ``quarantine``) a file name without a
            label or an unreadable file, naming the file.
    """
    _check_language(language)
    if not root.is_dir():
        raise DataError(f"{root}: no such DataRaceBench folder (expected {DRB_DIRS[language]}/ in it, or the files)")
    files = _drb_files(root, language)
    if not files:
        folder = root / DRB_DIRS[language] if (root / DRB_DIRS[language]).is_dir() else root
        raise DataError(f"{folder}: no {language} files ({', '.join(DRB_SUFFIXES[language])}) found")
    out = []
    for path in files:
        m = _DRB_NAME.match(path.stem)
        if m is None and skip_unlabelled:
            continue
        try:
            if m is None:
                raise DataError(f"{path}: cannot read a yes/no label from the file name; DataRaceBench names end in "
                                "-yes or -no before the extension (e.g. DRB001-antidep1-orig-yes.c); rename the file, "
                                "remove it, or pass skip_unlabelled=True")
            out.append(_drb_record(path, root, language, m.group("pattern"), m.group("label").lower()))
        except (DataError, OSError) as err:
            if quarantine is None:
                raise
            reason = str(err).removeprefix(f"{path}: ") if isinstance(err, DataError) else f"cannot be read ({err})"
            quarantine.append(Quarantined(source=f"dataracebench:{root}", record=str(path.relative_to(root)),
                                          reason=reason))
    return out


def dataracebench_notice(roots: Sequence[Path], language: str) -> str:
    """The text of ``NOTICE-DataRaceBench.txt`` for records ``load_dataracebench`` made from ``roots``.

    Per root, verbatim: the checkout's licence files (``LICENSE*``, ``COPYRIGHT*``, ``NOTICE*`` in the root, or in
    the folder above when the root is a ``micro-benchmarks`` folder itself), else the opening comment of its first
    program, where DataRaceBench puts its BSD notice.

    Raises:
        DataError: a root with neither licence files nor an opening comment (naming the root).
    """
    _check_language(language)
    parts = [textwrap.fill(f"The {FAMILIES[language]} records whose provenance source starts with "
                           "\"dataracebench:\" are programs of DataRaceBench (Lawrence Livermore National Laboratory) "
                           "with their comments removed. The notice below, which those comments carried, applies to "
                           "them: pass it on with any copy of them.", 100)]
    for root in roots:
        folders = [root, root.parent] if root.name in DRB_DIRS.values() else [root]
        found = [f for folder in folders for pattern in _LICENCE_FILES for f in sorted(folder.glob(pattern))]
        texts = [(f.name, f.read_text(encoding="utf-8", errors="replace")) for f in found if f.is_file()]
        first = _drb_files(root, language)[:1] if not texts else []
        if first and (m := _OPENING_COMMENT[language].match(first[0].read_text(encoding="utf-8", errors="replace"))):
            texts = [(f"opening comment of {first[0].name}", m.group(1))]
        if not texts:
            raise DataError(f"{root}: no DataRaceBench licence notice found (no LICENSE*, COPYRIGHT* or NOTICE* file, "
                            "and the first program opens with no comment); its records may only be passed on with "
                            "that notice: copy the checkout's licence file into this folder")
        parts += [f"--- dataracebench:{root}: {name} ---\n{text.strip()}" for name, text in texts]
    return "\n\n".join(parts) + "\n"


def _drb_files(root: Path, language: str) -> list[Path]:
    folder = root / DRB_DIRS[language] if (root / DRB_DIRS[language]).is_dir() else root
    return sorted(f for f in folder.iterdir() if f.is_file() and f.suffix in DRB_SUFFIXES[language])


def _drb_record(path: Path, root: Path, language: str, pattern: str, label: str) -> Record:
    raw = path.read_text(encoding="utf-8", errors="replace")
    fence = "fortran" if language == "fortran" else "cpp" if path.suffix == ".cpp" else "c"
    return Record(family=FAMILIES[language], answer=label,
                  prompt=messages(SYSTEM, race_question(strip_label_leaks(raw, language), fence)),
                  completion=assistant(_drb_reason(raw, label)),
                  metadata=race_metadata(language, pattern, label, path.name),
                  provenance={"source": f"dataracebench:{root}", "path": str(path.relative_to(root))})


def _drb_reason(raw: str, label: str) -> str:
    """The label, with the first race pair DataRaceBench documents (``x@line:col:W vs. y@line:col:R``) if any."""
    m = _RACE_PAIR.search(raw) if label == "yes" else None
    if m is None:
        return label
    x, y = m.groups()
    who = f"`{x}` is" if x == y else f"`{x}` and `{y}` are"
    return f"yes: {who} accessed concurrently without synchronization, and at least one access is a write."


def load_hpcgpt_race(path: Path, language: str, quarantine: list[Quarantined] | None = None) -> list[Record]:
    """HPC-GPT race records (Alpaca JSON) of one language, labelled from their outputs.

    The output's first word ("yes"/"no"), or else a phrase ("contains a data race", "no data race", "does not contain
    a data race", "race-free"), gives the label. Leaks are stripped from the code (inside fenced blocks when the
    question has them, else from the whole question).

    Args:
        path: the Alpaca JSON file (e.g. HPC-GPT's ``task2_c_c++.json``).
        language: "c" or "fortran".
        quarantine: when given, records that cannot be read or labelled go there instead of raising
            (``load_alpaca``).

    Raises:
        DataError: unknown language, missing or malformed file, or (without ``quarantine``) a record that cannot be
            read or an output with no readable label, naming the file, the record and the field.
    """
    _check_language(language)
    out = []
    for r in load_alpaca(path, FAMILIES[language], system=SYSTEM, answer_map=race_label, quarantine=quarantine):
        user = _strip_question(r.question, language)
        out.append(replace(r, prompt=[*r.prompt[:-1], {"role": "user", "content": user}], id="",
                           metadata=race_metadata(language, None, r.answer)))
    return out


def race_label(output: str, path: Path, i: int) -> str:
    """"yes" or "no" from a free-text answer (an ``answer_map`` for ``load_alpaca``).

    Raises:
        DataError: neither a leading yes/no nor exactly one kind of race phrase.
    """
    m = _FIRST_WORD.match(output)
    if m:
        return m.group(1).lower()
    negative = bool(_NEGATIVE.search(output))
    positive = bool(_POSITIVE.search(_NEGATIVE.sub(" ", output)))  # "does not contain a data race" is no "contains"
    if negative != positive:
        return "no" if negative else "yes"
    raise DataError(f"{path}: record {i}: field 'output': cannot read a yes/no race label from {output[:60]!r}")


def strip_label_leaks(code: str, language: str = "c") -> str:
    """``code`` without comments and with DataRaceBench names replaced, so that nothing in it gives the label away.

    C/C++: ``/* */`` and ``//`` comments (string and character literals are respected). Fortran: ``!`` comments
    outside strings; ``!$omp`` directives and ``!$`` conditional lines stay (their trailing comments go).
    ``DRB001-antidep1-orig-yes`` / ``DRB001_antidep1_orig_yes`` / ``DRB068`` become ``kernel1``, ``kernel2``...
    (the same token always the same name, case-insensitively as Fortran requires). Blank-line runs shrink to one.
    """
    if language == "fortran":
        text = "\n".join(_without_fortran_comment(line) for line in code.splitlines())
    else:
        text = _C_TOKENS.sub(lambda m: m.group() if m.group()[0] in "\"'" else
                             " " if m.group().startswith("/*") else "", code)
    names: dict[str, str] = {}
    text = _DRB_TOKEN.sub(lambda m: names.setdefault(m.group().lower(), f"kernel{len(names) + 1}"), text)
    out: list[str] = []
    for line in text.splitlines():
        line = line.rstrip()
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip("\n") + "\n"


def _without_fortran_comment(line: str) -> str:
    stripped = line.lstrip()
    start = len(line) - len(stripped) + 2 if stripped.startswith("!$") else 0
    quote = ""
    for k in range(start, len(line)):
        ch = line[k]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "!":
            return line[:k]
    return line


def _strip_question(text: str, language: str) -> str:
    if _FENCED.search(text):
        return _FENCED.sub(lambda m: m.group(1) + strip_label_leaks(m.group(2), language) + m.group(3), text)
    return strip_label_leaks(text, language).rstrip("\n")


def _check_language(language: str) -> None:
    if language not in FAMILIES:
        raise DataError(f"race loader: language {language!r} is not supported; allowed: {', '.join(FAMILIES)}")
