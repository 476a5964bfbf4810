"""Statement parser of the technique detector: tokens -> functions of statements.

Parses ``{}`` blocks, ``for``, ``while``, ``do``/``while``, ``if``/``else``, ``switch`` and other statements up to
``;``; a pragma attaches to the statement after it. Unbalanced or partial code is tolerated: the parser never
raises and always advances.

Test: ``python3 -m pytest tests/bench/test_techniques.py -q``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from hpcrl_core.bench.ctokens import Token
from hpcrl_core.bench.techniques.exprs import _CLOSE, _NOT_VARIABLES, _OPEN, _STATEMENT_KEYWORDS, _split_top

_MAX_NEST = 100  # statement nesting depth the parser descends into; deeper code is read flat
_ATTRIBUTE_WORDS = frozenset({"__attribute__", "__attribute", "__declspec", "__asm__", "asm", "__asm",
                              "_Alignas", "alignas"})


@dataclass(eq=False)
class _Stmt:
    """A parsed statement. ``tokens``: a simple statement without its ``;``, or the condition of an
    ``if``/``while``/``do``/``switch``. ``body``: sub-statements (a block's statements; a loop's body; then/else)."""

    kind: str  # block | for | while | do | if | switch | simple | empty
    line: int
    tokens: list[Token] = field(default_factory=list)
    init: list[Token] = field(default_factory=list)
    incr: list[Token] = field(default_factory=list)
    body: list[_Stmt] = field(default_factory=list)
    pragmas: list[str] = field(default_factory=list)


@dataclass(eq=False)
class _Function:
    name: str
    params: list[str]
    body: _Stmt
    line: int


class _Parser:
    """Recursive-descent statement parser that tolerates broken code (it never raises and always advances)."""

    def __init__(self, tokens: Sequence[Token]) -> None:
        self.t = tokens
        self.n = len(tokens)

    def punct(self, i: int, text: str) -> bool:
        return i < self.n and self.t[i].kind == "punct" and self.t[i].text == text

    def word(self, i: int, text: str) -> bool:
        return i < self.n and self.t[i].kind == "ident" and self.t[i].text == text

    # -- top level ---------------------------------------------------------------------------------------------

    def unit(self) -> tuple[list[_Function], list[_Stmt]]:
        """Parse a translation unit. Returns function definitions and stray top-level control statements."""
        functions: list[_Function] = []
        stray: list[_Stmt] = []
        i = 0
        while i < self.n:
            tok = self.t[i]
            if tok.kind == "punct" and tok.text == "{":
                head = self.function_head(i)
                if head is not None:
                    name, params = head
                    body, i = self.block(i, 0)
                    functions.append(_Function(name, params, body, tok.line))
                elif self.initializer_brace(i, 0) or self.type_brace(i):
                    i = self.skip_braces(i)
                else:
                    i += 1  # extern "C" { ... } or garbage: keep reading inside
            elif tok.kind == "ident" and tok.text in ("for", "while", "do", "if", "switch"):
                stmt, i = self.statement(i, 0)
                if stmt is not None:
                    stray.append(stmt)
            else:
                i += 1
        return functions, stray

    def function_head(self, brace: int) -> tuple[str, list[str]] | None:
        """If the ``{`` at ``brace`` opens a function body, its name and parameter names."""
        j = brace - 1
        while j >= 0 and self.t[j].kind == "punct" and self.t[j].text == ")":
            k = self.open_paren_before(j)
            if k <= 0:
                return None
            name = self.t[k - 1]
            if name.kind != "ident":
                return None
            if name.text in _ATTRIBUTE_WORDS:
                j = k - 2
                continue
            if name.text in _STATEMENT_KEYWORDS:
                return None
            return name.text, self.param_names(self.t[k + 1:j])
        return None

    def open_paren_before(self, close: int) -> int:
        depth = 0
        for k in range(close, -1, -1):
            tok = self.t[k]
            if tok.kind != "punct":
                continue
            if tok.text == ")":
                depth += 1
            elif tok.text == "(":
                depth -= 1
                if depth == 0:
                    return k
            elif tok.text in (";", "{", "}"):
                return -1
        return -1

    @staticmethod
    def param_names(tokens: Sequence[Token]) -> list[str]:
        names: list[str] = []
        for part in _split_top(tokens, ","):
            depth = 0
            name = None
            for tok in part:
                if tok.text in ("[", "("):
                    depth += 1
                elif tok.text in ("]", ")"):
                    depth -= 1
                elif depth == 0 and tok.kind == "ident" and tok.text not in _NOT_VARIABLES:
                    name = tok.text
            if name is not None:
                names.append(name)
        return names

    def initializer_brace(self, i: int, start: int) -> bool:
        """Whether the ``{`` at ``i`` belongs to an initializer or a struct/union/enum specifier."""
        if i <= start:
            return False
        prev = self.t[i - 1]
        if prev.kind == "punct" and prev.text in ("=", ","):
            return True
        return self.type_brace(i)

    def type_brace(self, i: int) -> bool:
        for back in (1, 2):
            if i - back >= 0 and self.t[i - back].kind == "ident" and self.t[i - back].text in (
                    "struct", "union", "enum"):
                return back == 1 or self.t[i - 1].kind == "ident"
        return False

    def skip_braces(self, i: int) -> int:
        depth = 0
        while i < self.n:
            tok = self.t[i]
            if tok.kind == "punct":
                if tok.text == "{":
                    depth += 1
                elif tok.text == "}":
                    depth -= 1
                    if depth <= 0:
                        return i + 1
            i += 1
        return i

    # -- statements --------------------------------------------------------------------------------------------

    def block(self, i: int, depth: int) -> tuple[_Stmt, int]:
        """Parse ``{ ... }`` starting at the ``{``; a missing ``}`` ends the block at the end of input."""
        stmt = _Stmt("block", self.t[i].line)
        i += 1
        while i < self.n:
            if self.punct(i, "}"):
                return stmt, i + 1
            sub, i = self.statement(i, depth + 1)
            if sub is not None:
                stmt.body.append(sub)
        return stmt, i

    def sub_statement(self, i: int, depth: int) -> tuple[_Stmt, int]:
        """The body of a control statement; an empty statement where there is none (``}`` or end of input)."""
        line = self.t[min(i, self.n - 1)].line if self.n else 0
        if i >= self.n or self.punct(i, "}"):
            return _Stmt("empty", line), i
        stmt, j = self.statement(i, depth + 1)
        return (stmt if stmt is not None else _Stmt("empty", line)), j

    def paren_group(self, i: int) -> tuple[list[Token], int]:
        """Tokens inside the parentheses starting at ``i`` and the index after them. A brace, pragma or the end of
        input inside the parentheses closes them (broken code)."""
        if not self.punct(i, "("):
            return [], i
        depth = 0
        j = i
        while j < self.n:
            tok = self.t[j]
            if tok.kind == "pragma":
                return list(self.t[i + 1:j]), j
            if tok.kind == "punct":
                if tok.text == "(":
                    depth += 1
                elif tok.text == ")":
                    depth -= 1
                    if depth == 0:
                        return list(self.t[i + 1:j]), j + 1
                elif tok.text in ("{", "}"):
                    return list(self.t[i + 1:j]), j
            j += 1
        return list(self.t[i + 1:]), self.n

    def statement(self, i: int, depth: int) -> tuple[_Stmt | None, int]:
        """Parse one statement at ``i``. Returns None (and skips a token) for a stray ``}``."""
        tok = self.t[i]
        if tok.kind == "pragma":
            pragmas, i = self.pragma_run(i)
            if i >= self.n or self.punct(i, "}"):
                return _Stmt("empty", tok.line, pragmas=pragmas), i
            stmt, i = self.statement(i, depth)
            if stmt is None:
                stmt = _Stmt("empty", tok.line)
            stmt.pragmas = pragmas + stmt.pragmas
            return stmt, i
        if depth > _MAX_NEST:
            return self.flat(i)
        if tok.kind == "punct":
            if tok.text == "{":
                return self.block(i, depth)
            if tok.text == ";":
                return _Stmt("empty", tok.line), i + 1
            if tok.text == "}":
                return None, i + 1
        elif tok.kind == "ident":
            word = tok.text
            if word == "for":
                init, cond, incr, j = self.for_header(i + 1)
                body, j = self.sub_statement(j, depth)
                return _Stmt("for", tok.line, tokens=cond, init=init, incr=incr, body=[body]), j
            if word in ("while", "switch"):
                cond, j = self.paren_group(i + 1)
                body, j = self.sub_statement(j, depth)
                return _Stmt(word, tok.line, tokens=cond, body=[body]), j
            if word == "do":
                body, j = self.sub_statement(i + 1, depth)
                until, j = self.do_until(j)
                return _Stmt("do", tok.line, tokens=until, body=[body]), j
            if word == "if":
                cond, j = self.paren_group(i + 1)
                then, j = self.sub_statement(j, depth)
                branches = [then]
                if self.word(j, "else"):
                    other, j = self.sub_statement(j + 1, depth)
                    branches.append(other)
                return _Stmt("if", tok.line, tokens=cond, body=branches), j
            if word == "else":
                return _Stmt("empty", tok.line), i + 1
            if word in ("case", "default"):
                return _Stmt("empty", tok.line), self.label_end(i + 1)
            if self.punct(i + 1, ":") and word not in _NOT_VARIABLES:  # a label
                return _Stmt("empty", tok.line), i + 2
        return self.simple(i)

    # Non-recursive pieces of ``statement`` (kept out of the recursion so the parse needs no extra stack frames).

    def pragma_run(self, i: int) -> tuple[list[str], int]:
        """The texts of the consecutive pragmas starting at ``i`` and the index after them."""
        pragmas: list[str] = []
        while i < self.n and self.t[i].kind == "pragma":
            pragmas.append(self.t[i].text)
            i += 1
        return pragmas, i

    def for_header(self, i: int) -> tuple[list[Token], list[Token], list[Token], int]:
        """The init, condition and increment tokens of the ``for (...)`` header at ``i`` and the index after it;
        missing clauses are empty, extra ``;``-separated parts join the increment."""
        header, j = self.paren_group(i)
        parts = _split_top(header, ";")
        while len(parts) < 3:
            parts.append([])
        return parts[0], parts[1], [t for p in parts[2:] for t in p], j

    def do_until(self, j: int) -> tuple[list[Token], int]:
        """The condition of the ``while (...);`` ending a ``do`` statement at ``j`` (empty when there is none) and
        the index after it."""
        until: list[Token] = []
        if self.word(j, "while"):
            until, j = self.paren_group(j + 1)
            if self.punct(j, ";"):
                j += 1
        return until, j

    def label_end(self, j: int) -> int:
        """The index after a ``case``/``default`` label whose expression starts at ``j`` (after its ``:``)."""
        while j < self.n and not (self.t[j].kind == "punct" and self.t[j].text in (":", ";", "{", "}")):
            j += 1
        if self.punct(j, ":"):
            j += 1
        return j

    def simple(self, i: int) -> tuple[_Stmt, int]:
        """An expression statement or declaration, up to ``;`` outside braces (consumed). It also ends, unconsumed,
        at a ``}`` closing an outer block, at a pragma, at a ``{`` that opens a block, and (broken code) at a
        statement keyword outside brackets."""
        start = i
        paren = 0
        brace = 0
        j = i
        while j < self.n:
            tok = self.t[j]
            if tok.kind == "pragma":
                break
            if tok.kind == "punct":
                text = tok.text
                if text in ("(", "["):
                    paren += 1
                elif text in (")", "]"):
                    paren = max(0, paren - 1)
                elif text == "{":
                    if brace > 0 or paren > 0 or self.initializer_brace(j, start):
                        brace += 1
                    else:
                        break
                elif text == "}":
                    if brace == 0:
                        break
                    brace -= 1
                elif text == ";" and brace == 0:
                    return _Stmt("simple", self.t[start].line, tokens=list(self.t[start:j])), j + 1
            elif (tok.kind == "ident" and j > start and paren == 0 and brace == 0
                  and tok.text in _STATEMENT_KEYWORDS):
                break
            j += 1
        if j == start:
            j += 1
        return _Stmt("simple", self.t[start].line, tokens=list(self.t[start:j])), j

    def flat(self, i: int) -> tuple[_Stmt, int]:
        """Beyond the nesting limit: read a balanced group of tokens as one simple statement, without recursion."""
        start = i
        depth = 0
        while i < self.n:
            text = self.t[i].text if self.t[i].kind == "punct" else ""
            if text in _OPEN:
                depth += 1
            elif text in _CLOSE:
                if depth == 0:
                    break
                depth -= 1
                if depth == 0 and text == "}":
                    i += 1
                    break
            elif text == ";" and depth == 0:
                i += 1
                break
            i += 1
        if i == start:
            i += 1
        return _Stmt("simple", self.t[start].line, tokens=list(self.t[start:i])), i
