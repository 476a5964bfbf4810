"""Integer constant evaluation over tokens, and the known constants of a translation unit.

Known constants are ``enum`` members, variables assigned one constant value and never changed (``_constants``)
and raw-source ``#define`` constants (``constants_from_defines``); ``_eval`` evaluates constant expressions over
them.

Test: ``python3 -m pytest tests/bench/test_techniques.py -q``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from hpcrl_core.bench.ctokens import Token, tokenize
from hpcrl_core.bench.techniques.exprs import (
    _ASSIGN_OPS,
    _NOT_VARIABLES,
    _QUALIFIERS,
    _TYPE_WORDS,
    _split_top,
    _unary_operand,
)
from hpcrl_core.bench.techniques.parser import _Function

_SIZEOF: dict[str, int] = {"char": 1, "short": 2, "int": 4, "float": 4, "long": 8, "double": 8, "size_t": 8,
                           "__m128d": 16, "__m128": 16, "__m128i": 16, "__m256d": 32, "__m256": 32, "__m256i": 32,
                           "__m512d": 64, "__m512": 64, "__m512i": 64}


def _parse_int(text: str) -> int | None:
    """The value of a C integer literal, or None (floats and malformed numbers)."""
    body = text.replace("'", "").rstrip("uUlLzZ")
    try:
        low = body.lower()
        if low.startswith(("0x", "0b")):
            return int(body, 0)
        if len(body) > 1 and body.startswith("0") and body.isdigit():
            return int(body, 8)
        if body.isdigit():
            return int(body)
    except ValueError:
        return None
    return None


class _Eval:
    """Evaluates an integer constant expression over tokens (literals, known constants, + - * / % << >> & | ^ ~,
    parentheses, casts to arithmetic types, ``sizeof(type)``); any other token makes the result None."""

    _BINARY: dict[str, int] = {"|": 1, "^": 2, "&": 3, "<<": 4, ">>": 4, "+": 5, "-": 5, "*": 6, "/": 6, "%": 6}

    def __init__(self, tokens: Sequence[Token], consts: Mapping[str, int]) -> None:
        self.toks = tokens
        self.consts = consts
        self.i = 0
        self.depth = 0

    def run(self) -> int | None:
        if not self.toks:
            return None
        try:
            value = self.expr(0)
        except _NotConstant:
            return None
        return value if self.i == len(self.toks) else None

    def peek(self) -> Token | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def enter(self) -> None:
        """Bound the recursion (``((((1))))``, ``- - - 1``): deeper expressions are not constants here."""
        self.depth += 1
        if self.depth > 60:
            raise _NotConstant

    def expr(self, min_prec: int) -> int:
        self.enter()
        left = self.unary()
        while True:
            tok = self.peek()
            if tok is None or tok.kind != "punct" or tok.text not in self._BINARY:
                break
            prec = self._BINARY[tok.text]
            if prec < min_prec:
                break
            self.i += 1
            right = self.expr(prec + 1)
            left = self.apply(tok.text, left, right)
        self.depth -= 1
        return left

    @staticmethod
    def apply(op: str, a: int, b: int) -> int:
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op in ("/", "%"):
            if b == 0:
                raise _NotConstant
            q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
            return q if op == "/" else a - q * b
        if op in ("<<", ">>"):
            if not 0 <= b <= 64:
                raise _NotConstant
            return a << b if op == "<<" else a >> b
        if op == "&":
            return a & b
        if op == "|":
            return a | b
        return a ^ b

    def unary(self) -> int:
        self.enter()
        value = self.operand()
        self.depth -= 1
        return value

    def operand(self) -> int:
        tok = self.peek()
        if tok is None:
            raise _NotConstant
        if tok.kind == "punct" and tok.text in ("-", "+", "~"):
            self.i += 1
            value = self.unary()
            return -value if tok.text == "-" else (value if tok.text == "+" else ~value)
        if tok.kind == "punct" and tok.text == "(":
            j = self.i + 1
            k = j
            while k < len(self.toks) and self.toks[k].kind == "ident" and (
                    self.toks[k].text in _TYPE_WORDS or self.toks[k].text in _QUALIFIERS):
                k += 1
            if k > j and k < len(self.toks) and self.toks[k].text == ")":  # a cast
                self.i = k + 1
                return self.unary()
            self.i += 1
            value = self.expr(0)
            close = self.peek()
            if close is None or close.text != ")":
                raise _NotConstant
            self.i += 1
            return value
        if tok.kind == "number":
            literal = _parse_int(tok.text)
            if literal is None:
                raise _NotConstant
            self.i += 1
            return literal
        if tok.kind == "ident":
            if tok.text == "sizeof":
                return self.sizeof()
            if tok.text in self.consts:
                self.i += 1
                return self.consts[tok.text]
        raise _NotConstant

    def sizeof(self) -> int:
        toks = self.toks
        i = self.i + 1
        if i + 2 < len(toks) and toks[i].text == "(" and toks[i + 2].text == ")" and toks[i + 1].text in _SIZEOF:
            self.i = i + 3
            return _SIZEOF[toks[i + 1].text]
        raise _NotConstant


class _NotConstant(Exception):
    """Raised inside ``_Eval`` when an expression is not an integer constant."""


def _eval(tokens: Sequence[Token], consts: Mapping[str, int]) -> int | None:
    """The value of an integer constant expression, or None."""
    if len(tokens) == 1:
        tok = tokens[0]
        if tok.kind == "number":
            return _parse_int(tok.text)
        if tok.kind == "ident":
            return consts.get(tok.text)
        return None
    return _Eval(tokens, consts).run()

_DEFINE_RE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+([^\n]*?)[ \t]*$", re.MULTILINE)


def constants_from_defines(src: str) -> dict[str, int]:
    """Integer constants of object-like ``#define NAME <constant expression>`` lines of raw source.

    Args:
        src: C source before preprocessing.

    Returns:
        Name to value for each define whose body is an integer constant expression (over earlier defines).
    """
    consts: dict[str, int] = {}
    for m in _DEFINE_RE.finditer(src.replace("\\\n", " ")):
        try:
            body = tokenize(m.group(2))
        except ValueError:
            continue
        value = _eval(body, consts)
        if value is not None:
            consts[m.group(1)] = value
    return consts


def _enum_constants(tokens: Sequence[Token]) -> dict[str, int]:
    """The values of the members of every ``enum { ... }`` in the tokens (a member whose initialiser is not a
    constant ends its enum's list)."""
    n = len(tokens)
    consts: dict[str, int] = {}
    i = 0
    while i < n:
        if tokens[i].text == "enum":
            j = i + 1
            while j < n and tokens[j].kind == "ident":
                j += 1
            if j < n and tokens[j].text == "{":
                close = j
                while close < n and tokens[close].text != "}":
                    close += 1
                member = 0
                for entry in _split_top(tokens[j + 1:close], ","):
                    if not entry or entry[0].kind != "ident":
                        continue
                    if len(entry) >= 3 and entry[1].text == "=":
                        value = _eval(entry[2:], consts)
                        if value is None:
                            break
                        member = value
                    consts[entry[0].text] = member
                    member += 1
                i = close
        i += 1
    return consts


def _initializer_end(tokens: Sequence[Token], j: int) -> int:
    """The index of the ``,``/``;`` (or unmatched closer, or the end) that ends the expression starting at ``j``."""
    n = len(tokens)
    depth = 0
    while j < n:
        t = tokens[j].text
        if t in ("(", "[", "{"):
            depth += 1
        elif t in (")", "]", "}"):
            if depth == 0:
                break
            depth -= 1
        elif t in (",", ";") and depth == 0:
            break
        j += 1
    return j


def _constants(tokens: Sequence[Token], functions: Sequence[_Function]) -> dict[str, int]:
    """Names with one known integer value in the whole source: enum members, and variables whose only
    assignments (declarations included) set the same constant and that are never stepped, taken by address,
    declared or dereferenced as a pointer, or used as a parameter name. A name after a binary ``*``/``&``
    (``blk * BS``, ``n & MASK``) is an operand, not a pointer (``exprs._unary_operand``)."""
    values: dict[str, set[int | None]] = {}
    n = len(tokens)
    consts = _enum_constants(tokens)  # enums first: later initialisers may use them
    bad: set[str] = {p for fn in functions for p in fn.params}
    for i, tok in enumerate(tokens):
        if tok.kind != "ident" or tok.text in _NOT_VARIABLES:
            continue
        prev = tokens[i - 1].text if i > 0 else ""
        nxt = tokens[i + 1].text if i + 1 < n else ""
        if prev in ("++", "--") or nxt in ("++", "--") or _unary_operand(tokens, i):
            bad.add(tok.text)  # stepped, taken by address, or a pointer (declarator or dereference)
        elif nxt in _ASSIGN_OPS and prev not in (".", "->"):
            if nxt != "=":
                bad.add(tok.text)
                continue
            j = _initializer_end(tokens, i + 2)
            values.setdefault(tok.text, set()).add(_eval(tokens[i + 2:j], consts))
    for name, vals in values.items():
        value = next(iter(vals))
        if name not in bad and len(vals) == 1 and value is not None and name not in consts:
            consts[name] = value
    return consts
