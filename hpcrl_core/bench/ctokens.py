"""A small, linear-time tokenizer for C kernel sources (preprocessed or raw).

It turns C text into a flat list of ``Token`` objects for the static screen and the technique detector
(``hpcrl_core.bench.techniques``). It is not a full C front end; it knows exactly what those two need:

- identifiers, numbers (any C "pp-number": ``42``, ``64u``, ``1e-3``, ``0x1p3``, ``.5f``, ``1'000``), string
  literals with escapes and the ``L``/``u``/``U``/``u8`` prefixes, character literals, and punctuators (longest
  match: ``<<=``, ``...``, ``->``, ``##`` ...). Digraphs are returned with the spelling they stand for
  (``<:`` -> ``[``, ``%>`` -> ``}``, ``%:`` -> ``#`` ...), so code cannot hide a bracket behind a digraph;
- ``//`` and ``/* */`` comments are dropped, backslash-newline splices are removed (line numbers still refer to
  the input);
- preprocessor lines: ``#pragma X`` (also ``# pragma``, ``%:pragma`` and one continued by splices) becomes one
  token of kind ``"pragma"`` whose text is ``X`` with whitespace normalised and comments removed; every other
  line whose first non-blank character is ``#`` (``#include``, ``#define``, linemarkers such as ``# 12 "k.c"``,
  the null directive ...) is skipped whole, continuation lines included;
- ``_Pragma("omp simd")`` in raw source becomes a pragma token ``omp simd`` as well (the preprocessor would
  have turned it into a ``#pragma`` line).

An unterminated comment, string or character literal raises ``ValueError`` (a ``CTokenizeError``) naming the
line where it starts. The tokenizer is a single left-to-right scan driven by one compiled regular expression.

Test: ``python3 -m pytest tests/bench/test_ctokens.py -q``.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["CTokenizeError", "Token", "identifiers", "tokenize"]

TOKEN_KINDS: tuple[str, ...] = ("ident", "number", "string", "char", "punct", "pragma")


@dataclass(frozen=True, slots=True)
class Token:
    """One C token.

    Attributes:
        kind: ``"ident"``, ``"number"``, ``"string"``, ``"char"``, ``"punct"`` or ``"pragma"``.
        text: the token's spelling; for a string or char literal the whole literal with prefix and quotes; for a
            ``"pragma"`` the text after ``#pragma``, whitespace-normalised (e.g. ``"omp parallel for simd"``).
        line: the 1-based line of the input where the token starts.
    """

    kind: str
    text: str
    line: int


_new_object = object.__new__
_set_kind = Token.__dict__["kind"].__set__  # the slot descriptors (slots=True)
_set_text = Token.__dict__["text"].__set__
_set_line = Token.__dict__["line"].__set__


def _make_token(kind: str, text: str, line: int) -> Token:
    """Build a ``Token`` about twice as fast as ``Token(...)``.

    The frozen dataclass ``__init__`` routes every field through ``object.__setattr__``; setting the slots
    directly is equivalent and matters for the 50 ms budget on a 64 KB kernel.
    """
    tok = _new_object(Token)
    _set_kind(tok, kind)
    _set_text(tok, text)
    _set_line(tok, line)
    return tok


class CTokenizeError(ValueError):
    """The input cannot be tokenized (unterminated comment or literal).

    Attributes:
        line: the 1-based input line where the offending construct starts.
    """

    def __init__(self, message: str, line: int) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


_DIGRAPHS: dict[str, str] = {"<:": "[", ":>": "]", "<%": "{", "%>": "}", "%:": "#", "%:%:": "##"}

_IDENT = r"[A-Za-z_$][A-Za-z0-9_$]*"
_NUMBER = r"\.?[0-9](?:[eEpP][+-]|'[0-9A-Za-z_]|[0-9A-Za-z_.])*"
_PUNCT = (r"\.\.\.|%:%:|<<=|>>=|->|\+\+|--|<<|>>|&&|\|\||\#\#|<:|:>|<%|%>|%:|::|[-+*/%<>=!&^|]="
          r"|\.(?![0-9])|[][(){}&*+\-~!/%<>^|?:;=,\#]")
# A "run" is a stretch of one line made only of identifiers, numbers and punctuators that cannot start a
# comment, a literal, a directive or a digraph (no / % : # or quotes, no < before : or %). Runs are split with
# findall, which is much faster than one regex match per token; everything else goes through the alternatives
# that follow.
_RUN_PUNCT = (r"\.\.\.|<<=|>>=|->|\+\+|--|<<|>>|&&|\|\||[-+*<>=!&^|]=|\.(?![0-9])|<(?![:%])"
              r"|[][(){}&*+\-~!>^|?;=,]")
_RUN_ITEM_RE = re.compile(_IDENT + "|" + _NUMBER + "|" + _RUN_PUNCT)
# Leading blanks (not newlines) are consumed before each item. Order matters: runs first (the common case),
# comments before '/', complete literals before the unterminated forms. A literal's prefix (L, u, U, u8) is
# matched as an identifier and merged with the literal afterwards.
_RUN_ITEM = "(?:" + _IDENT + "|" + _NUMBER + "|" + _RUN_PUNCT + ")"
_ALTERNATIVES: tuple[tuple[str, str], ...] = (
    ("nl", r"\n(?:[ \t\f\v\r]*\n)*"),
    ("lc", r"//[^\n]*"),
    ("bc", r"/\*(?s:.*?)\*/"),
    ("badbc", r"/\*"),
    ("punct", _PUNCT),
    ("string", r'"(?:[^"\\\n]|\\.)*"'),
    ("char", r"'(?:[^'\\\n]|\\.)*'"),
    ("badstring", '"'),
    ("badchar", "'"),
    ("other", r"[^ \t\f\v\r\n]"),
)


def _main_re(first: tuple[tuple[str, str], ...]) -> re.Pattern[str]:
    return re.compile(r"[ \t\f\v\r]*(?:" + "|".join(f"(?P<{name}>{rx})" for name, rx in first + _ALTERNATIVES) + ")")


_MAIN_RE = _main_re((("run", _RUN_ITEM + r"(?:[ \t\f\v\r]*" + _RUN_ITEM + ")*"),))
# Without runs, for the (rare) input with backslash-newline splices, where the tokens of one line of the spliced
# text may come from several input lines.
_SLOW_RE = _main_re((("id", _IDENT), ("num", _NUMBER)))
_KIND_OF_FIRST: dict[str, str] = {c: "ident" for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_$"}
_KIND_OF_FIRST.update({c: "number" for c in "0123456789"})
_LITERAL_PREFIXES = frozenset({"L", "u", "U", "u8"})
_STRING_BODY_RE = re.compile(r'(?:[^"\\\n]|\\.)*"')
_CHAR_BODY_RE = re.compile(r"(?:[^'\\\n]|\\.)*'")
_SPLICE_RE = re.compile(r"\\[ \t]*\n")
_DIRECTIVE_STOP_RE = re.compile(r"\n|/\*|//|\"|'")
_DIRECTIVE_NAME_RE = re.compile(r"[ \t\f\v\r]*([A-Za-z_]\w*)?")


def _splice(src: str) -> tuple[str, list[int]]:
    """Remove backslash-newline splices.

    Returns:
        The spliced text and, in increasing order, the positions in it where a splice was removed.
    """
    if "\\" not in src:
        return src, []
    pieces: list[str] = []
    positions: list[int] = []
    last = 0
    length = 0
    for m in _SPLICE_RE.finditer(src):
        piece = src[last:m.start()]
        pieces.append(piece)
        length += len(piece)
        positions.append(length)
        last = m.end()
    pieces.append(src[last:])
    return "".join(pieces), positions


class _Lines:
    """Maps a position in the spliced text back to its 1-based line in the input."""

    def __init__(self, text: str, splices: list[int]) -> None:
        self._text = text
        self._newlines: list[int] | None = None  # computed on first use: only directives and errors need it
        self._splices = splices

    def __call__(self, pos: int) -> int:
        if self._newlines is None:
            self._newlines = [m.start() for m in re.finditer("\n", self._text)]
        line = 1 + bisect.bisect_left(self._newlines, pos)
        if self._splices:
            line += bisect.bisect_right(self._splices, pos)
        return line


def _destringize(literal: str) -> str:
    """The content of a string literal as ``_Pragma`` sees it (prefix and quotes gone, ``\\"``/``\\\\`` undone)."""
    body = literal[literal.index('"') + 1:-1]
    return re.sub(r'\\(["\\])', r"\1", body)


def _scan_directive(text: str, pos: int, lines: _Lines) -> tuple[str, int]:
    """Scan a preprocessor line starting just after its ``#``.

    Args:
        text: the spliced input.
        pos: position just after the ``#``.
        lines: position-to-line map (for error messages).

    Returns:
        The directive's text with comments replaced by a space, and the position of the newline that ends it
        (or the end of the text).

    Raises:
        CTokenizeError: a block comment inside the directive is not terminated.
    """
    parts: list[str] = []
    i = pos
    n = len(text)
    while True:
        m = _DIRECTIVE_STOP_RE.search(text, i)
        if m is None:
            parts.append(text[i:])
            return "".join(parts), n
        s = m.start()
        what = m.group()
        if what == "\n":
            parts.append(text[i:s])
            return "".join(parts), s
        if what == "//":
            parts.append(text[i:s])
            end = text.find("\n", s)
            return "".join(parts), n if end < 0 else end
        if what == "/*":
            parts.append(text[i:s])
            parts.append(" ")
            end = text.find("*/", s + 2)
            if end < 0:
                raise CTokenizeError("unterminated comment", lines(s))
            i = end + 2
            continue
        # A quote: keep a well-formed literal whole (it may contain '//' or '/*'); a lone apostrophe, as in
        # "#error don't", is just text in a directive that is skipped anyway.
        body = (_STRING_BODY_RE if what == '"' else _CHAR_BODY_RE).match(text, s + 1)
        end = body.end() if body else s + 1
        parts.append(text[i:end])
        i = end


def tokenize(src: str) -> list[Token]:
    """Split C source into tokens.

    Args:
        src: C source text, preprocessed (``gcc -E -P``) or raw.

    Returns:
        The tokens in order. Comments, whitespace and preprocessor lines other than ``#pragma`` are dropped.

    Raises:
        CTokenizeError: (a ``ValueError``) an unterminated block comment, string or character literal; the
            message and the ``line`` attribute give the line where it starts.
    """
    text, splices = _splice(src.replace("\r\n", "\n"))
    lines = _Lines(text, splices)
    tokens: list[Token] = []
    append = tokens.append
    extend = tokens.extend
    make = _make_token
    kind_of_first = _KIND_OF_FIRST
    split_run = _RUN_ITEM_RE.findall
    digraphs = _DIGRAPHS
    line = 1  # newlines seen so far in the spliced text, plus one
    last_token_line = 0  # line of the last token (not comment) appended
    pos: int | None = 0
    while pos is not None:
        restart = None
        for m in (_SLOW_RE if splices else _MAIN_RE).finditer(text, pos):
            kind = m.lastgroup or "other"  # always set: every alternative is a named group
            spelling = m.group(kind)
            if kind == "run":
                extend([make(kind_of_first.get(s[0]) or ("number" if s[1:2].isdigit() else "punct"), s, line)
                        for s in split_run(spelling)])
                last_token_line = line
                continue
            if kind == "nl":
                line += spelling.count("\n")
                continue
            tline = line + bisect.bisect_right(splices, m.start(kind)) if splices else line
            if kind == "id":
                append(make("ident", spelling, tline))
            elif kind == "num":
                append(make("number", spelling, tline))
            elif kind == "punct":
                if spelling in digraphs:
                    spelling = digraphs[spelling]
                if spelling == "#" and last_token_line < tline:
                    directive, restart = _scan_directive(text, m.end(), lines)
                    name = _DIRECTIVE_NAME_RE.match(directive)
                    if name is not None and name.group(1) == "pragma":
                        append(make("pragma", " ".join(directive[name.end():].split()), tline))
                        last_token_line = tline
                    line = lines(restart) - (bisect.bisect_right(splices, restart) if splices else 0)
                    break
                append(make("punct", spelling, tline))
            elif kind == "lc":
                continue
            elif kind == "bc":
                line += spelling.count("\n")
                continue
            elif kind == "string" or kind == "char":
                start = m.start(kind)
                prev = tokens[-1] if tokens else None
                if (prev is not None and prev.kind == "ident" and prev.text in _LITERAL_PREFIXES
                        and text[start - len(prev.text):start] == prev.text):
                    tokens.pop()
                    spelling = prev.text + spelling
                    tline = prev.line
                append(make(kind, spelling, tline))
            elif kind == "other":
                append(make("punct", spelling, tline))
            elif kind == "badbc":
                raise CTokenizeError("unterminated comment", tline)
            else:
                raise CTokenizeError(f"unterminated {kind[3:]} literal", tline)
            last_token_line = tline
        pos = restart
    return _fold_pragma_operators(tokens) if "_Pragma" in text else tokens


def _fold_pragma_operators(tokens: list[Token]) -> list[Token]:
    """Replace each ``_Pragma ( "string" )`` by the pragma token the preprocessor would produce."""
    out: list[Token] = []
    i = 0
    n = len(tokens)
    while i < n:
        tok = tokens[i]
        if (tok.kind == "ident" and tok.text == "_Pragma" and i + 3 < n and tokens[i + 1].text == "("
                and tokens[i + 2].kind == "string" and tokens[i + 3].text == ")"):
            out.append(Token("pragma", " ".join(_destringize(tokens[i + 2].text).split()), tok.line))
            i += 4
            continue
        out.append(tok)
        i += 1
    return out


def identifiers(tokens: Iterable[Token]) -> set[str]:
    """The texts of the identifier tokens.

    Args:
        tokens: tokens from ``tokenize``.

    Returns:
        The set of identifier spellings.
    """
    return {t.text for t in tokens if t.kind == "ident"}
