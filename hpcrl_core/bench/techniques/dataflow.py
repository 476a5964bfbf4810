"""Data flow of the technique detector: how statements update variables, loop steps and trip counts, variables
derived from a loop's variable, and the constant offsets a statement applies.

Test: ``python3 -m pytest tests/bench/test_techniques.py -q``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hpcrl_core.bench.ctokens import Token
from hpcrl_core.bench.techniques.consteval import _eval
from hpcrl_core.bench.techniques.exprs import (
    _ASSIGN_OPS,
    _NOT_VARIABLES,
    _QUALIFIERS,
    _RELATIONAL,
    _TYPE_WORDS,
    _find_top,
    _split_top,
    _strip_parens,
)
from hpcrl_core.bench.techniques.looptree import ForLoop, Step, _Item


@dataclass
class _Update:
    """How an expression updates a variable: ``delta`` is +-1 for ++/--, ``expr`` the added/subtracted/assigned
    tokens (``how`` is "add", "sub", "set" or "other")."""

    name: str
    how: str
    expr: list[Token] = field(default_factory=list)


def _updates(part: Sequence[Token]) -> list[_Update]:
    """Variables an expression updates (``i++``, ``--i``, ``i += e``, ``i = e``)."""
    toks = _strip_parens(list(part))
    pos = _find_top(toks, _ASSIGN_OPS)
    out: list[_Update] = []
    if pos > 0:
        lhs = _strip_parens(toks[:pos])
        if len(lhs) == 1 and lhs[0].kind == "ident":
            op = toks[pos].text
            how = {"+=": "add", "-=": "sub", "=": "set"}.get(op, "other")
            out.append(_Update(lhs[0].text, how, toks[pos + 1:]))
        return out
    for i, tok in enumerate(toks):
        if tok.kind == "punct" and tok.text in ("++", "--"):
            name = None
            if i > 0 and toks[i - 1].kind == "ident":
                name = toks[i - 1].text
            elif i + 1 < len(toks) and toks[i + 1].kind == "ident":
                name = toks[i + 1].text
            if name is not None and name not in _NOT_VARIABLES:
                out.append(_Update(name, "add" if tok.text == "++" else "sub", [Token("number", "1", tok.line)]))
    return out


def _step_of(update: _Update, consts: Mapping[str, int]) -> tuple[Step, int]:
    """The step (as in ``ForLoop.step``) and its sign (+1/-1, 0 when unknown) of an update."""
    if update.how in ("add", "sub"):
        value = _eval(update.expr, consts)
        if value is None:
            return "symbolic", 0
        if value == 0:
            return None, 0
        sign = 1 if (value > 0) == (update.how == "add") else -1
        return abs(value), sign
    if update.how == "set":
        at0 = _eval(update.expr, {**consts, update.name: 0})
        at1 = _eval(update.expr, {**consts, update.name: 1})
        if at0 is None or at1 is None or at1 - at0 != 1:
            return "symbolic", 0
        if at0 == 0:
            return None, 0
        return abs(at0), (1 if at0 > 0 else -1)
    return "symbolic", 0


def _trip_count(var: str, start: int | None, cond: Sequence[Token], step: Step, sign: int,
                consts: Mapping[str, int]) -> int | None:
    """Iterations of ``for (var = start; cond; var += sign*step)`` when everything is constant."""
    if start is None or not isinstance(step, int) or sign == 0:
        return None
    best: int | None = None
    for conj in _split_top(cond, "&&"):
        conj = _strip_parens(conj)
        pos = _find_top(conj, _RELATIONAL)
        if pos <= 0:
            continue
        op = conj[pos].text
        left, right = _strip_parens(conj[:pos]), _strip_parens(conj[pos + 1:])
        if len(left) == 1 and left[0].text == var:
            bound = _eval(right, consts)
        elif len(right) == 1 and right[0].text == var:
            bound = _eval(left, consts)
            op = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "!=": "!="}[op]
        else:
            continue
        if bound is None:
            continue
        if sign > 0 and op in ("<", "!="):
            trips = -(-(bound - start) // step)
        elif sign > 0 and op == "<=":
            trips = (bound - start) // step + 1
        elif sign < 0 and op in (">", "!="):
            trips = -(-(start - bound) // step)
        elif sign < 0 and op == ">=":
            trips = (start - bound) // step + 1
        else:
            continue
        trips = max(0, trips)
        best = trips if best is None else min(best, trips)
    return best


def _is_declaration(tokens: Sequence[Token]) -> bool:
    """Whether a statement declares variables: it starts with a type/qualifier word, or with ``T x``/``T *x``."""
    if not tokens or tokens[0].kind != "ident":
        return False
    first = tokens[0].text
    if first in _TYPE_WORDS or first in _QUALIFIERS or first in ("typedef", "__extension__"):
        return True
    if first in _NOT_VARIABLES or len(tokens) < 2:
        return False
    second = tokens[1]
    if second.kind == "ident":
        return second.text not in _NOT_VARIABLES or second.text in _QUALIFIERS
    return second.text == "*" and len(tokens) > 2 and tokens[2].kind == "ident"

def _derived(loop: ForLoop) -> set[str]:
    """Symbols derived from the loop's variable within the loop (see the package docstring)."""
    inner_vars: set[str] = set()
    for sub in loop.descendants():
        inner_vars |= sub._var_syms
    inner_vars -= loop._var_syms
    derived = set(loop._var_syms)
    items = list(loop.all_items())
    for _ in range(4):
        before = len(derived)
        for it in items:
            new: set[str] = set(it.stepped)
            if it.target is not None and (
                    (it.op in ("+=", "-=") and not it.declared) or (it.op is not None and it.rhs_syms & derived)):
                new |= it.lhs_syms
            derived |= new - inner_vars
        if len(derived) == before:
            break
    return derived


def _offsets(it: _Item) -> list[tuple[frozenset[str], int]]:
    """The constant offsets a statement applies to variables: ``x + c``, ``x - c``, ``c + x``, ``x[c]``, as
    (symbols of x, c) with c >= 1. Computed once per statement."""
    if it.offsets is not None:
        return it.offsets
    out: list[tuple[frozenset[str], int]] = []
    toks = it.tokens
    consts = it.inst.consts
    n = len(toks)
    for i, tok in enumerate(toks):
        if tok.kind != "ident" or tok.text in _NOT_VARIABLES:
            continue
        prev = toks[i - 1].text if i > 0 else ""
        values: list[int | None] = []
        if i + 2 < n and toks[i + 1].text in ("+", "-") and prev not in ("*", "/", "%", ".", "->"):
            after = toks[i + 3].text if i + 3 < n else ""
            if after not in ("*", "/", "%", "[", "(", ".", "->"):
                values.append(_eval([toks[i + 2]], consts))  # x + c, x - c
        if i >= 2 and prev == "+":
            before = toks[i - 3].text if i >= 3 else ""
            after = toks[i + 1].text if i + 1 < n else ""
            if before not in ("*", "/", "%", "-") and after not in ("*", "/", "%", "[", "("):
                values.append(_eval([toks[i - 2]], consts))  # c + x
        if i + 3 < n and toks[i + 1].text == "[" and toks[i + 3].text == "]":
            values.append(_eval([toks[i + 2]], consts))  # x[c]
        syms = it.inst.syms(tok.text)
        out.extend((syms, v) for v in values if v is not None and v >= 1)
    it.offsets = out
    return out
