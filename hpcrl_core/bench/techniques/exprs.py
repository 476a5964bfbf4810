"""Helpers on token lists: C word classes, bracket-aware splitting and search, and expression classification.

Used by the parser, the loop-tree builder and the rules of the technique detector; nothing here knows about
techniques.

Test: ``python3 -m pytest tests/bench/test_techniques.py -q``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from hpcrl_core.bench.ctokens import Token

_OPEN = frozenset({"(", "[", "{"})
_CLOSE = frozenset({")", "]", "}"})
_ASSIGN_OPS = frozenset({"=", "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "^=", "|="})
_RELATIONAL = frozenset({"<", "<=", ">", ">=", "!="})
_QUALIFIERS = frozenset({"const", "volatile", "restrict", "__restrict", "__restrict__", "static", "register",
                         "extern", "auto", "inline", "__inline", "__inline__", "_Alignas", "alignas"})
_TYPE_WORDS = frozenset({
    "void", "char", "short", "int", "long", "float", "double", "signed", "unsigned", "_Bool", "bool", "size_t",
    "ssize_t", "ptrdiff_t", "intptr_t", "uintptr_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t",
    "uint16_t", "uint32_t", "uint64_t", "struct", "union", "enum", "__int128", "_Complex",
})
_STATEMENT_KEYWORDS = frozenset({"for", "while", "do", "if", "else", "switch", "return", "case", "default", "goto",
                                 "break", "continue"})
_NOT_VARIABLES = _QUALIFIERS | _TYPE_WORDS | _STATEMENT_KEYWORDS | {"sizeof", "_Alignof", "__attribute__",
                                                                    "__attribute", "typedef", "__typeof__",
                                                                    "typeof", "__extension__"}
_STORE_RE = re.compile(r"^(?:_mm\d*_\w*(?:store|stream)\w*|__builtin_ia32_\w*store\w*|vst\d\w*|sv(?:st|stnt)\d\w*"
                       r"|memcpy|__builtin_memcpy|memmove|__builtin_memmove)$")
_PRODUCT_RE = re.compile(r"fn?m(?:add|sub)|_mul_|^vfm|^vml|^vmul|^svml|^svmad|^svmul|^svfm|^fmaf?l?$|__builtin_fma")
_ADD_RE = re.compile(r"_add_|^vadd|^svadd|fn?m(?:add|sub)|^vfm|^vml|^svml|^svmad|^svfm|__builtin_fma|^fmaf?l?$")


def _split_top(tokens: Sequence[Token], sep: str) -> list[list[Token]]:
    """Split at punctuator ``sep`` outside any brackets (unbalanced closers are ignored)."""
    parts: list[list[Token]] = [[]]
    depth = 0
    for tok in tokens:
        if tok.kind == "punct":
            if tok.text in _OPEN:
                depth += 1
            elif tok.text in _CLOSE:
                depth = max(0, depth - 1)
            elif tok.text == sep and depth == 0:
                parts.append([])
                continue
        parts[-1].append(tok)
    return parts


def _find_top(tokens: Sequence[Token], texts: frozenset[str]) -> int:
    """Index of the first punctuator in ``texts`` outside brackets, or -1."""
    depth = 0
    for i, tok in enumerate(tokens):
        if tok.kind != "punct":
            continue
        if tok.text in _OPEN:
            depth += 1
        elif tok.text in _CLOSE:
            depth = max(0, depth - 1)
        elif depth == 0 and tok.text in texts:
            return i
    return -1


def _strip_parens(tokens: list[Token]) -> list[Token]:
    """Remove redundant outer parentheses: ``((x))`` -> ``x`` (up to 8 layers, keeping this linear)."""
    for _ in range(8):
        if len(tokens) < 2 or tokens[0].text != "(" or tokens[-1].text != ")":
            break
        depth = 0
        for i, tok in enumerate(tokens):
            if tok.text == "(":
                depth += 1
            elif tok.text == ")":
                depth -= 1
                if depth == 0 and i != len(tokens) - 1:
                    return tokens
        tokens = tokens[1:-1]
    return tokens


def _variables(tokens: Iterable[Token]) -> set[str]:
    """Identifiers that can name variables (keywords and type words left out)."""
    return {t.text for t in tokens if t.kind == "ident" and t.text not in _NOT_VARIABLES}


_POINTER_QUALIFIERS = frozenset({"const", "volatile", "restrict", "__restrict", "__restrict__"})


def _closes_cast(tokens: Sequence[Token], close: int) -> bool:
    """Whether the ``)`` at ``tokens[close]`` ends a cast to a built-in type (``(double)``, ``(const int *)``), not
    ``sizeof(double)`` or a call/group."""
    j = close - 1
    while j >= 0 and (tokens[j].text == "*" or (tokens[j].kind == "ident" and (
            tokens[j].text in _TYPE_WORDS or tokens[j].text in _QUALIFIERS))):
        j -= 1
    if j < 0 or j == close - 1 or tokens[j].text != "(":
        return False
    return j == 0 or tokens[j - 1].text not in ("sizeof", "_Alignof", "alignof", "__alignof__")


def _is_binary_star(tokens: Sequence[Token], i: int) -> bool:
    """Whether ``tokens[i]`` (a ``*``) is a multiplication, not a pointer declarator, cast or dereference."""
    if i == 0 or i + 1 >= len(tokens):
        return False
    prev, nxt = tokens[i - 1], tokens[i + 1]
    if prev.kind == "number" or prev.text in (")", "]"):
        return nxt.text not in (")", ",") and not (prev.text == ")" and _closes_cast(tokens, i - 1))
    if prev.kind != "ident" or prev.text in _NOT_VARIABLES:
        return False
    return nxt.text not in (")", ",") and nxt.text not in _POINTER_QUALIFIERS


def _follows_operand(tokens: Sequence[Token], i: int) -> bool:
    """Whether the ``*``/``&`` at ``tokens[i]`` (a statement, function or translation unit, so that index 0
    starts a statement) is binary, a multiplication or bitwise and: it follows an operand, a number, ``)``, ``]``
    or a variable-like identifier that is not the type name starting a declaration (``T *p`` at a statement's
    start or a ``for`` init, after a qualifier or ``struct``). Otherwise it is a declarator, a dereference or an
    address-of (after ``=``, ``(``, ``,``, an operator, a keyword or a type word)."""
    if i == 0:
        return False
    prev = tokens[i - 1]
    if prev.kind == "number" or prev.text == "]":
        return True
    if prev.text == ")":
        return not _closes_cast(tokens, i - 1)
    if prev.kind != "ident" or prev.text in _NOT_VARIABLES:
        return False
    before = tokens[i - 2] if i >= 2 else None
    if before is None or before.kind == "pragma" or before.text in (";", "{", "}"):
        return False  # ``T *p`` starting a statement
    if before.kind == "ident" and (before.text in _QUALIFIERS or before.text in _TYPE_WORDS):
        return False  # ``const T *p``, ``struct S *p``
    return not (before.text == "(" and i >= 3 and tokens[i - 3].text == "for")


def _unary_operand(tokens: Sequence[Token], i: int) -> bool:
    """Whether the identifier at ``tokens[i]`` follows a unary ``*`` or ``&``: a pointer declarator (``int *p``,
    ``int *const p``, ``T *p``), a dereference (``*p``, ``x = *p``) or an address-of (``&x``); ``x * N`` and
    ``x & N`` (a multiplication, a bitwise and) are not."""
    j = i - 1
    qualified = False
    while j >= 0 and tokens[j].kind == "ident" and tokens[j].text in _POINTER_QUALIFIERS:
        j -= 1
        qualified = True
    if j < 0 or tokens[j].kind != "punct" or tokens[j].text not in ("*", "&"):
        return False
    return qualified or not _follows_operand(tokens, j)


_ADDRESS_CALL_RE = re.compile(r"load|broadcast|gather|prefetch|memcpy|memmove|store|stream|scatter|^vld|^svld")
_OPERATOR_BEFORE_UNARY = frozenset({"(", "[", ",", "=", "+", "-", "*", "/", "%", "?", ":", "return", "&&", "||",
                                    "<", ">", "<=", ">=", "==", "!="} | _ASSIGN_OPS)


def _value_tokens(tokens: Sequence[Token]) -> list[Token]:
    """The tokens of an expression that compute values, not addresses: subscripts ``[...]``, the group after a
    unary ``*``/``&`` and the arguments of load/store/broadcast calls are left out (their ``i*n`` is indexing)."""
    out: list[Token] = []
    i = 0
    n = len(tokens)
    while i < n:
        tok = tokens[i]
        skip_group = False
        if tok.kind == "punct" and tok.text == "[":
            skip_group = True
        elif tok.kind == "punct" and tok.text in ("*", "&") and i + 1 < n and tokens[i + 1].text == "(" and (
                i == 0 or tokens[i - 1].text in _OPERATOR_BEFORE_UNARY):
            out.append(Token("ident", "__operand__", tok.line))  # ``*(p + i*n)`` is one operand
            i += 1
            skip_group = True
        elif (tok.kind == "ident" and i + 1 < n and tokens[i + 1].text == "("
              and _ADDRESS_CALL_RE.search(tok.text)):
            out.append(tok)  # the call is one operand
            i += 1
            skip_group = True
        if not skip_group:
            out.append(tok)
            i += 1
            continue
        opener = tokens[i].text
        closer = "]" if opener == "[" else ")"
        depth = 0
        while i < n:
            if tokens[i].text == opener:
                depth += 1
            elif tokens[i].text == closer:
                depth -= 1
                if depth == 0:
                    i += 1
                    break
            i += 1
    return out


def _has_product(tokens: Sequence[Token]) -> bool:
    """Whether an expression multiplies values: a binary ``*`` outside address computations, or an FMA/multiply
    intrinsic."""
    values = _value_tokens(tokens)
    for i, tok in enumerate(values):
        if tok.kind == "punct" and tok.text == "*" and _is_binary_star(values, i):
            return True
        if tok.kind == "ident" and _PRODUCT_RE.search(tok.text):
            return True
    return False


def _contains_seq(haystack: Sequence[Token], needle: Sequence[Token]) -> bool:
    """Whether the token texts of ``needle`` (at most 64 tokens: an assignment target) occur contiguously in
    ``haystack``."""
    n = len(needle)
    if n == 0 or n > len(haystack) or n > 64:
        return False
    first = needle[0].text
    texts = [t.text for t in needle]
    return any(haystack[i].text == first and [t.text for t in haystack[i:i + n]] == texts
               for i in range(len(haystack) - n + 1))

