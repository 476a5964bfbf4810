"""Technique rules over single tokens: pragmas, intrinsics, vector types, runtime calls and attributes.

These are the token-level parts of the ``openmp``, ``simd``, ``register_blocking`` (unroll pragmas, ``optimize``
attributes) and ``cache_blocking`` (``#pragma omp tile``) rules of the ``hpcrl_core.bench.techniques`` package
docstring; the loop-structure rules are in ``loop_rules``.

Test: ``python3 -m pytest tests/bench/test_techniques.py -q``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hpcrl_core.bench.ctokens import Token
from hpcrl_core.bench.techniques.technique import Technique

_OMP_THREADING = frozenset({"parallel", "for", "do", "loop", "task", "taskloop", "sections", "section", "single",
                            "teams", "distribute"})
_SIMD_IDENT_RE = re.compile(
    r"^(?:_mm(?:256|512)?_\w+"
    r"|__m(?:64|128|256|512)(?:d|i|h|bh)?|__mmask(?:8|16|32|64)"
    r"|__builtin_ia32_\w+|__builtin_shufflevector|__builtin_convertvector"
    r"|(?:__)?vector_size(?:__)?|(?:__)?ext_vector_type(?:__)?"
    r"|(?:float|int|uint|poly|bfloat)(?:8|16|32|64)x\d+(?:x\d+)?_t|sv(?:float|int|uint|bfloat)(?:8|16|32|64)_t)$")
_NOT_SIMD_IDENTS = frozenset({"_mm_malloc", "_mm_free", "_mm_prefetch", "_mm_sfence", "_mm_lfence", "_mm_mfence",
                              "_mm_pause", "_mm_clflush", "_mm_clflushopt", "_mm_getcsr", "_mm_setcsr"})
_THREAD_CALLS = frozenset({"omp_set_num_threads"})


def _words_before_paren(text: str) -> list[str]:
    """The lower-cased words of a pragma's text up to its first ``(`` (the directive name, before clauses)."""
    head = text.split("(", 1)[0]
    return re.findall(r"[a-z_][a-z0-9_]*", head.lower())


def _int_in(text: str) -> int | None:
    m = re.search(r"\d+", text)
    return int(m.group()) if m else None


def _pragma_techniques(text: str) -> set[Technique]:
    """Techniques a single pragma (text after ``#pragma``) implies."""
    found: set[Technique] = set()
    low = text.lower()
    words = _words_before_paren(text)
    if not words:
        return found
    head = words[0]
    if head == "omp":
        directive = set(words[1:])
        if directive & _OMP_THREADING:
            found.add(Technique.OPENMP)
        if "simd" in directive:
            found.add(Technique.SIMD)
        if "unroll" in directive and not re.search(r"partial\s*\(\s*1\s*\)", low):
            found.add(Technique.REGISTER_BLOCKING)
        if "tile" in directive:
            found.add(Technique.CACHE_BLOCKING)
    elif head == "gcc" and len(words) >= 2:
        if words[1] == "unroll":
            n = _int_in(low[low.index("unroll") + 6:])
            if n is None or n >= 2:
                found.add(Technique.REGISTER_BLOCKING)
        elif words[1] == "optimize" and "unroll" in low:
            found.add(Technique.REGISTER_BLOCKING)
    elif head == "unroll":
        n = _int_in(low[6:])
        if n is None or n >= 2:
            found.add(Technique.REGISTER_BLOCKING)
    elif head in ("simd", "vector"):
        found.add(Technique.SIMD)
    elif head == "clang" and len(words) >= 2 and words[1] == "loop":
        for name, arg in re.findall(r"([a-z_]+)\s*\(\s*([a-z_0-9]+)\s*\)", low):
            count = int(arg) if arg.isdigit() else 0
            if (name == "unroll" and arg in ("enable", "full")) or (name == "unroll_count" and count >= 2):
                found.add(Technique.REGISTER_BLOCKING)
            if (name == "vectorize" and arg in ("enable", "assume_safety")) or (
                    name == "vectorize_width" and count >= 2):
                found.add(Technique.SIMD)
    return found


def _token_reasons(tokens: Sequence[Token], reasons: dict[Technique, list[str]]) -> None:
    """Techniques visible from single tokens: pragmas, intrinsics, vector types, runtime calls, attributes. Each
    identifier is reported at its first use only."""
    n = len(tokens)
    seen: set[str] = set()
    for i, tok in enumerate(tokens):
        if tok.kind == "pragma":
            for tech in _pragma_techniques(tok.text):
                reasons.setdefault(tech, []).append(f"line {tok.line}: #pragma {tok.text}")
        elif tok.kind != "ident":
            continue
        elif tok.text in ("optimize", "__optimize__") and i + 1 < n and tokens[i + 1].text == "(":
            j = i + 2
            while j < n and j < i + 12 and tokens[j].text != ")":
                if tokens[j].kind == "string" and "unroll" in tokens[j].text.lower():
                    reasons.setdefault(Technique.REGISTER_BLOCKING, []).append(
                        f"line {tok.line}: optimize({tokens[j].text})")
                j += 1
        elif tok.text not in seen:
            name = tok.text
            seen.add(name)
            if name in _THREAD_CALLS:
                reasons.setdefault(Technique.OPENMP, []).append(f"line {tok.line}: {name}")
            elif _SIMD_IDENT_RE.match(name) and name not in _NOT_SIMD_IDENTS:
                reasons.setdefault(Technique.SIMD, []).append(f"line {tok.line}: {name}")
