"""The dependence check of the ``grammar`` race pattern: loop nests as data, and their data-race label computed.

A nest (``Nest``) is one parallel loop, a sequential loop around a parallel one, or two worksharing loops of one
region; statements (``Stmt``) read and write arrays through subscripts (``Index``) and scalars. ``label`` enumerates
every iteration at the nest's real bounds (numpy), codes every shared location each iteration reads or writes, and
returns the first two accesses of one location from different iterations of a parallel loop, one writing, not both
under one guard (``Conflict``), or None. The OpenMP rules it applies are in ``grammar``'s docstring.

Not an entry point: ``grammar`` draws, mutates and renders nests and asks this module for their label.
Test: ``pytest tests/data/race/test_grammar.py`` (hand-worked nests, and an exhaustive plain-Python reading).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Index:
    """One subscript over loop variable ``var``: ``form`` is aff (mul * var + add), rev (the mirror element), half
    (var / 2), mod (var % m), via (an index array's element at var) or const (the element ``add``)."""

    form: str
    var: str = ""
    mul: int = 1
    add: int = 0
    m: int = 0
    via: str = ""


@dataclass(frozen=True)
class Ref:
    """An array element (``idx`` one subscript per dimension) or, with no subscript, a scalar."""

    name: str
    idx: tuple[Index, ...] = ()


@dataclass
class Stmt:
    """``target = terms`` (``update``: ``target = target + terms``), under ``guard`` (None, atomic or critical)."""

    target: Ref
    terms: list[Ref | str]
    update: bool = False
    guard: str | None = None


@dataclass
class Loop:
    """A loop over ``var`` whose iterations run in parallel (``par``) or in order; ``body`` holds statements or, for
    a nest, the inner loop. ``lo`` / ``hi`` are the first and last values (inclusive) once bounds are fixed."""

    var: str
    body: list[Stmt | Loop]
    par: bool = False
    lo: int = 0
    hi: int = -1
    lo_text: str = ""
    hi_text: str = ""


@dataclass
class Nest:
    """The kernel: ``loops`` (two only for the two-loop region, whose first ends in ``nowait`` or not), the scalars
    the clauses make private or reduce, and the index arrays' contents."""

    loops: list[Loop]
    private: set[str] = field(default_factory=set)
    reduced: set[str] = field(default_factory=set)
    firstprivate: set[str] = field(default_factory=set)
    nowait: bool = False
    tables: dict[str, list[int]] = field(default_factory=dict)
    schedule: str = ""


@dataclass(frozen=True)
class Access:
    """One access of a conflict: its location code, whether it writes, its guard, the reference as written, the
    parallel iteration that makes it and the loop (0 or 1) it is in."""

    loc: int
    write: bool
    guard: str | None
    text: Ref
    it: int
    phase: int


@dataclass(frozen=True)
class Conflict:
    """Two accesses of one location from different iterations (``a`` writes)."""

    a: Access
    b: Access


class Redraw(Exception):
    """The nest cannot be labelled as drawn (an index out of bounds, a schedule-dependent verdict)."""


_GUARDS: tuple[str | None, ...] = (None, "atomic", "critical")


def value(ix: Index, env: dict[str, int], base: int, n: int, tables: dict[str, list[int]]) -> int:
    """The subscript ``ix`` takes when the loop variables have the values ``env``."""
    return int(values(ix, {k: np.array([x]) for k, x in env.items()}, base, n, tables, 1)[0])


def values(ix: Index, env: dict[str, np.ndarray], base: int, n: int, tables: dict[str, list[int]],
           length: int) -> np.ndarray:
    """The subscript ``ix`` for every point of an iteration space (``env``: each loop variable's value per point)."""
    v = env.get(ix.var, np.zeros(length, dtype=np.int64))
    if ix.form == "aff":
        return ix.mul * v + ix.add
    if ix.form == "rev":
        return n - 1 - v + 2 * base
    if ix.form == "half":
        return (v + base) // 2
    if ix.form == "mod":
        return v % ix.m + base
    if ix.form == "via":
        table = np.asarray(tables[ix.via], dtype=np.int64)
        if v.min() < base or v.max() - base >= len(table):
            raise Redraw(f"{ix.via} read outside its {len(table)} entries")
        return table[v - base]
    return np.full(length, ix.add, dtype=np.int64)


@dataclass
class _Events:
    """Every shared access of one loop, as arrays: location code, parallel iteration, write flag, guard (index into
    ``_GUARDS``) and which reference (index into ``refs``) made it."""

    loc: np.ndarray
    it: np.ndarray
    write: np.ndarray
    guard: np.ndarray
    ref: np.ndarray
    refs: list[Ref]
    phase: int

    def access(self, k: int) -> Access:
        return Access(int(self.loc[k]), bool(self.write[k]), _GUARDS[int(self.guard[k])], self.refs[int(self.ref[k])],
                      int(self.it[k]), self.phase)


def _space(loop: Loop) -> list[tuple[dict[str, np.ndarray], list[Stmt]]]:
    """The iteration points of each group of statements under ``loop`` (directly, or one inner loop deep)."""
    outer = np.arange(loop.lo, loop.hi + 1, dtype=np.int64)
    groups: list[tuple[dict[str, np.ndarray], list[Stmt]]] = []
    direct = [s for s in loop.body if isinstance(s, Stmt)]
    if direct:
        groups.append(({loop.var: outer}, direct))
    for inner in (s for s in loop.body if isinstance(s, Loop)):
        if any(isinstance(x, Loop) for x in inner.body):
            raise ValueError("grammar nests are at most two loops deep")
        a, b = np.meshgrid(outer, np.arange(inner.lo, inner.hi + 1, dtype=np.int64), indexing="ij")
        groups.append(({loop.var: a.ravel(), inner.var: b.ravel()}, [s for s in inner.body if isinstance(s, Stmt)]))
    return groups


def accesses(nest: Nest, loop: Loop, phase: int, base: int, n: int, shared_inner: str | None,
             names: dict[str, int]) -> _Events:
    """Every shared access of ``loop`` (a parallel loop, or a sequential one holding a parallel loop), tagged with
    the parallel iteration that makes it. Out-of-bounds subscripts raise ``Redraw``.

    A location is coded as one integer from the variable, the iteration of a sequential outer loop (which orders its
    iterations, so locations conflict only within one) and the subscripts; ``names`` numbers the variables, shared
    by the loops of one region so that their codes compare."""
    par_var = loop.var if loop.par else next(s.var for s in loop.body if isinstance(s, Loop))
    private = nest.private | nest.reduced | nest.firstprivate
    refs: list[Ref] = []
    parts: list[tuple[np.ndarray, ...]] = []
    span = n + 2
    for env, stmts in _space(loop):
        length = len(env[loop.var])
        it = env[par_var]
        outer = np.zeros(length, dtype=np.int64) if loop.par else env[loop.var] - loop.lo + 1
        for s in stmts:
            todo: list[tuple[Ref, bool]] = [(t, False) for t in s.terms if isinstance(t, Ref)]
            todo += [(s.target, False)] * s.update + [(s.target, True)]
            if shared_inner:
                todo.append((Ref(shared_inner), True))
            for ref, write in todo:
                if not ref.idx and ref.name in private:
                    continue
                subs = [values(ix, env, base, n, nest.tables, length) for ix in ref.idx]
                for x in subs:
                    if x.min() < base or x.max() > n - 1 + base:
                        raise Redraw(f"{ref.name} subscript out of bounds")
                code = names.setdefault(ref.name, len(names)) * (n + 2) + outer
                for k in range(2):
                    code = code * span + (subs[k] - base + 1 if k < len(subs) else 0)
                guard = _GUARDS.index(s.guard if ref is s.target or s.guard == "critical" else None)
                if ref.name == shared_inner and not ref.idx:
                    guard = 0
                refs.append(ref)
                parts.append((code, it, np.full(length, write), np.full(length, guard),
                              np.full(length, len(refs) - 1)))
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return _Events(empty, empty, empty.astype(bool), empty, empty, refs, phase)
    cols = [np.concatenate([p[k] for p in parts]) for k in range(5)]
    return _Events(cols[0], cols[1], cols[2], cols[3], cols[4], refs, phase)


def _pair(w: _Events, wsel: np.ndarray, r: _Events, rsel: np.ndarray) -> tuple[Conflict | None, bool]:
    """A conflict between the writes ``wsel`` of ``w`` and the accesses ``rsel`` of ``r`` in different iterations,
    and whether they share a location at all (then only within one iteration when no conflict comes back)."""
    wl, rl = w.loc[wsel], r.loc[rsel]
    common = np.intersect1d(wl, rl)
    if not len(common):
        return None, False
    wk, rk = np.flatnonzero(wsel)[np.isin(wl, common)], np.flatnonzero(rsel)[np.isin(rl, common)]
    span = int(max(w.it.max(), r.it.max())) + 2        # iterations are >= 0: one integer per (location, iteration)
    keys = np.unique(np.concatenate([w.loc[wk], r.loc[rk]]) * span + np.concatenate([w.it[wk], r.it[rk]]) + 1)
    locs, counts = np.unique(keys // span, return_counts=True)
    hit = locs[counts >= 2]
    if not len(hit):
        return None, True
    loc = hit[0]
    ws, rs = wk[w.loc[wk] == loc], rk[r.loc[rk] == loc]
    a = ws[0]
    other = rs[r.it[rs] != w.it[a]]
    if len(other):
        return Conflict(w.access(int(a)), r.access(int(other[0]))), True
    b = rs[0]
    a2 = ws[w.it[ws] != r.it[b]][0]
    return Conflict(w.access(int(a2)), r.access(int(b))), True


def _conflict(w: _Events, r: _Events) -> tuple[Conflict | None, bool]:
    """A write of ``w`` and an access of ``r`` to one location, in different iterations, not both under one
    guard; and whether some such pair exists only within one iteration."""
    same = False
    for g in range(len(_GUARDS)):
        wsel = w.write & (w.guard == g)
        if not wsel.any():
            continue
        rsel = np.ones(len(r.loc), dtype=bool) if g == 0 else r.guard != g
        found, touched = _pair(w, wsel, r, rsel)
        if found:
            return found, True
        same |= touched
    return None, same


def label(nest: Nest, base: int, n: int, shared_inner: str | None) -> Conflict | None:
    """The first conflict of the nest, or None when it is race-free. Raises ``Redraw`` when the verdict would depend
    on the schedule (two loops with ``nowait`` that conflict only on the same iteration)."""
    names: dict[str, int] = {}
    phases = [accesses(nest, lp, k, base, n, shared_inner, names) for k, lp in enumerate(nest.loops)]
    for events in phases:
        found, _ = _conflict(events, events)
        if found:
            return found
    if len(phases) == 2 and nest.nowait:
        first, second = phases
        found, same = _conflict(first, second)
        if not found:
            found, same2 = _conflict(second, first)
            same |= same2
        if found:
            return found
        if same:
            raise Redraw("the two loops conflict only within one iteration: the verdict depends on the schedule")
    return None
