"""Step 1: extract C code from a model completion.

A completion may hold a fenced code block (```c, ```C, ```cpp, or a bare fence) or raw code. When it holds several
blocks the one that defines ``dgemm`` wins; otherwise the longest. Binary data, an empty answer or an oversized one
is a format violation with a reason, never an exception.

Test: ``pytest tests/bench/test_extract.py``.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+#-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_C_LANGS = {"", "c", "c99", "c11", "h", "cpp", "c++", "cc", "cxx"}
_DEFINES_DGEMM = re.compile(r"\bdgemm\s*\(")


@dataclass(frozen=True)
class Extraction:
    """Either ``code`` (usable C text) or ``error`` (why nothing usable was found)."""

    code: str | None
    error: str | None = None


def _is_text(s: str) -> bool:
    # Control characters other than tab/newline/CR/formfeed mean binary data, not source code.
    bad = sum(1 for ch in s if (ord(ch) < 32 and ch not in "\t\n\r\f") or ch == "\ufffd")
    return bad == 0


def extract_code(completion: str | bytes, max_bytes: int) -> Extraction:
    """Find the kernel source in a completion.

    Args:
        completion: the model's text (bytes are decoded as UTF-8; undecodable bytes are a violation).
        max_bytes: size limit of the completion, in UTF-8 bytes.

    Returns:
        An ``Extraction`` with the code or the reason there is none.
    """
    if isinstance(completion, bytes):
        if len(completion) > max_bytes:
            return Extraction(None, f"completion is {len(completion)} bytes; the limit is {max_bytes}")
        try:
            completion = completion.decode("utf-8")
        except UnicodeDecodeError as err:
            return Extraction(None, f"completion is not UTF-8 text ({err.reason} at byte {err.start})")
    if not isinstance(completion, str):
        return Extraction(None, f"completion must be text, got {type(completion).__name__}")
    size = len(completion.encode("utf-8", errors="replace"))
    if size > max_bytes:
        return Extraction(None, f"completion is {size} bytes; the limit is {max_bytes}")
    if not completion.strip():
        return Extraction(None, "completion is empty")
    if not _is_text(completion):
        return Extraction(None, "completion contains binary data (control characters)")

    blocks = [body for lang, body in _FENCE.findall(completion) if lang.lower() in _C_LANGS and body.strip()]
    if blocks:
        with_dgemm = [b for b in blocks if _DEFINES_DGEMM.search(b)]
        code = max(with_dgemm or blocks, key=len)
    else:
        code = completion
    if not _DEFINES_DGEMM.search(code):
        return Extraction(None, "no function named dgemm found in the completion")
    return Extraction(code.strip() + "\n")


_COMMENT_OR_STRING = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL)


def normalise_code(code: str) -> str:
    """Code without comments and with whitespace collapsed: equal for kernels that differ only in layout.

    Used for cache keys; string and character literals are kept as they are.
    """
    def _keep_literals(m: re.Match[str]) -> str:
        return m.group(0) if m.group(0)[0] in "\"'" else " "

    text = _COMMENT_OR_STRING.sub(_keep_literals, code)
    out: list[str] = []
    newline_next = True  # directives and line splices keep their line structure; other breaks are spaces
    for raw in text.splitlines():
        line = " ".join(raw.split())
        if not line:
            continue
        directive = line.startswith("#")
        out.append("\n" if (newline_next or directive) and out else (" " if out else ""))
        out.append(line)
        newline_next = directive or line.endswith("\\")
    return "".join(out)


def kernel_identity(completion: str) -> str:
    """What makes two completions the same kernel: the normalised extracted code (``normalise_code``), or the
    normalised whole text when no kernel can be extracted. Distinct-kernel counts and the reward's duplicate
    sharing compare completions by this."""
    code = extract_code(completion, sys.maxsize).code
    return normalise_code(code if code is not None else completion)
