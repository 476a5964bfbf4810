"""Drawing the loop nests of the ``grammar`` race pattern: arrays, scalars and subscripts for one program, three nest
shapes (``DRAWERS``), loop bounds that keep every subscript inside its array, and walks over a nest.

The nest data model and the exact dependence check are in ``dependence``; the C / Fortran text of a nest and its
reason in ``nest_text``; mutating a nest to the asked label in ``grammar``.

Not an entry point. Test: ``pytest tests/data/race/test_grammar.py``.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from hpcrl_core.data.race.dependence import Index, Loop, Nest, Redraw, Ref, Stmt, value
from hpcrl_core.data.race.programs import Program

_WRITE_FORMS = ("aff",) * 8 + ("aff2", "rev", "half", "mod", "const", "via")
_READ_FORMS = ("aff",) * 6 + ("off",) * 5 + ("aff2", "rev", "half", "mod", "const", "via")


class Draw:
    """The nest under construction for program ``p``: names, roles of the scalars and the index array."""

    def __init__(self, p: Program) -> None:
        self.p, self.r = p, p.rng
        self.base = 0 if p.c else 1
        self.roles: dict[str, str] = {}       # scalar name -> tmp, acc or coef
        self.via = ""                         # the index array, once drawn
        self.written: list[str] = []
        self.read: list[str] = []
        self.shared_j = False                 # C: a nest whose inner index is declared outside the parallel loop
        self.coef_ok = False                  # a read-only scalar may appear in expressions
        self.coef = ""                        # its name, declared at its first use
        self.table: list[int] = []
        self.prelude: list[str] = []

    def index(self, var: str, form: str) -> Index:
        r, p = self.r, self.p
        if form == "aff":
            return Index("aff", var)
        if form == "off":
            return Index("aff", var, add=r.choice((1, -1, 1, 2, -2, 3)))
        if form == "aff2":
            return Index("aff", var, mul=2, add=r.choice((0, 1)))
        if form == "half" and not p.c:  # gfortran -Wall warns when (i + 1) / 2 truncates a constant bound
            form = "mod"
        if form in ("rev", "half"):
            return Index(form, var)
        if form == "mod":
            return Index("mod", var, m=r.choice((4, 8, 16, 32)))
        if form == "const":
            return Index("const", add=self.base + r.choice((0, 0, 1, 2)))
        if not self.via:
            self._index_array()
        return Index("via", var, via=self.via)

    def _index_array(self) -> None:
        """An index array over the whole size: a permutation or one with repeated entries, filled by a loop."""
        from hpcrl_core.data.race.kernels import _IDX_FORMS

        p, r = self.p, self.r
        self.via = p.name("idx")
        dup = r.random() < 0.5
        text, fn = r.choice(_IDX_FORMS[(p.c, dup)])
        s = r.choice((3, 5, 7, 9, 11))
        m = p.n_val
        p.int_arrays.append((self.via, 0, None))
        self.table = [fn(k, m, s) for k in range(self.base, m + self.base)]
        self.prelude = p.loop([p.st(f"{p.ref(self.via, p.i)} = {text.format(i=p.i, n=p.size, s=s)}")])

    def scalar(self, role: str) -> str:
        name = self.p.scalar({"tmp": "tmp", "acc": "acc", "coef": "bar"}[role])
        self.roles[name] = role
        if role == "acc":
            self.p.shown.append(name)
        return name

    def terms(self, var: str, arrays: list[str], k: int) -> list[Ref | str]:
        r = self.r
        out: list[Ref | str] = []
        for _ in range(k):
            out.append(Ref(r.choice(arrays), (self.index(var, r.choice(_READ_FORMS)),)))
        if r.random() < 0.3:
            out.append(str(r.randint(1, 9)))
        if self.coef_ok and r.random() < 0.4:
            self.coef = self.coef or self.scalar("coef")
            out.append(Ref(self.coef))
        return out


def _draw_flat(d: Draw) -> Nest:
    """One parallel loop over 1-D arrays: one to three statements, maybe a temporary and an accumulator."""
    p, r, i = d.p, d.r, d.p.i
    if r.random() < 0.25:
        p.n_val = r.choice((64, 128, 256, 512, 1024))      # power of two: odd multipliers permute
        d.index(i, "via")
    d.written = [p.arr() for _ in range(r.choice((1, 1, 2)))]
    d.read = [p.arr() for _ in range(r.choice((1, 1, 2)))]
    p.summed.extend(d.written)
    d.coef_ok = r.random() < 0.3
    body: list[Stmt | Loop] = []
    for _ in range(r.choice((1, 2, 2, 3))):
        kind = r.choice(("arr", "arr", "arr", "tmp", "acc"))
        if kind == "tmp":
            t = d.scalar("tmp")
            body.append(Stmt(Ref(t), d.terms(i, d.read + d.written, r.choice((1, 2)))))
            target = Ref(r.choice(d.written), (d.index(i, r.choice(_WRITE_FORMS)),))
            body.append(Stmt(target, [Ref(t), *d.terms(i, d.read, r.choice((0, 1)))]))
        elif kind == "acc":
            body.append(Stmt(Ref(d.scalar("acc")), d.terms(i, d.read + d.written, r.choice((1, 2))), update=True))
        else:
            target = Ref(r.choice(d.written), (d.index(i, r.choice(_WRITE_FORMS)),))
            body.append(Stmt(target, d.terms(i, d.read + d.written, r.choice((1, 2))), update=r.random() < 0.3))
    nest = Nest([Loop(i, body, par=True)], schedule=_schedule(r))
    if d.coef and r.random() < 0.3:
        nest.firstprivate.add(d.coef)
    # clauses and guards in the drawn nest too, so that a racy half may carry them as well (a race elsewhere, or one
    # the mutation breaks): their presence alone must not tell the label
    for name, role in d.roles.items():
        if role == "tmp" and r.random() < 0.7:
            nest.private.add(name)
        elif role == "acc" and r.random() < 0.7:
            how = r.choice(("reduction", "reduction", "atomic", "critical"))
            if how == "reduction":
                nest.reduced.add(name)
            for st in body:
                if isinstance(st, Stmt) and st.target.name == name and how != "reduction":
                    st.guard = how
    return nest


def _schedule(r: random.Random) -> str:
    return r.choice(("",) * 5 + ("schedule(static)", "schedule(dynamic)", "schedule(static, 4)", "schedule(guided)"))


def _draw_2d(d: Draw) -> Nest:
    """A 2-D nest over n x n matrices, parallel in the outer or the inner loop, with shifted or transposed reads."""
    p, r = d.p, d.r
    p.n_val = r.choice((16, 32, 50, 64, 100, 128))
    d.written = [p.mat()]
    d.read = [p.mat() for _ in range(r.choice((1, 2)))]
    row, col = p.i, p.j

    def sub(var: str, shift: bool) -> Index:
        return Index("aff", var, add=r.choice((1, -1, -1, 2)) if shift else 0)

    def ref(name: str) -> Ref:
        shape = r.choice(("same", "same", "row", "col", "both", "swap"))
        if shape == "swap":
            return Ref(name, (Index("aff", col), Index("aff", row)))
        return Ref(name, (sub(row, shape in ("row", "both")), sub(col, shape in ("col", "both"))))

    body: list[Stmt | Loop] = []
    for _ in range(r.choice((1, 1, 2))):
        target = Ref(d.written[0], (Index("aff", row), Index("aff", col)))
        terms: list[Ref | str] = [ref(r.choice(d.written + d.read)) for _ in range(r.choice((1, 2)))]
        body.append(Stmt(target, terms, update=r.random() < 0.2))
    outer, inner = (row, col) if p.c else (col, row)
    par_outer = r.random() < 0.6
    nest = Nest([Loop(outer, [Loop(inner, body, par=not par_outer)], par=par_outer)], schedule=_schedule(r))
    d.shared_j = p.c and par_outer and not p.in_for
    if d.shared_j and r.random() < 0.7:
        nest.private.add(col)
    return nest


def _draw_two(d: Draw) -> Nest:
    """Two worksharing loops in one parallel region; the first ends with or without ``nowait``."""
    p, r, i = d.p, d.r, d.p.i
    d.written = [p.arr(), p.arr()]
    d.read = [p.arr()]
    p.summed.extend(d.written)
    a, b = d.written
    first = Stmt(Ref(a, (Index("aff", i),)), d.terms(i, d.read, 1))
    second = Stmt(Ref(b, (Index("aff", i),)), [Ref(a, (d.index(i, r.choice(("off", "rev", "aff2", "aff", "off"))),)),
                                                *d.terms(i, d.read, r.choice((0, 1)))])
    if r.random() < 0.4:  # the second loop reads only what the first did not write
        second.terms[0] = Ref(d.read[0], (d.index(i, "off"),))
    return Nest([Loop(i, [first], par=True), Loop(i, [second], par=True)], nowait=r.random() < 0.5)


DRAWERS: dict[str, Callable[[Draw], Nest]] = {"flat": _draw_flat, "2d": _draw_2d, "two": _draw_two}


# ---------------------------------------------------------------------------------------------------------------
# Bounds: every subscript inside the array for every iteration


def _indices(loop: Loop) -> list[Index]:
    out = []
    for s in loop.body:
        if isinstance(s, Loop):
            out += _indices(s)
        else:
            for ref in [s.target, *(t for t in s.terms if isinstance(t, Ref))]:
                out += list(ref.idx)
    return out


def fix_bounds(nest: Nest, d: Draw) -> None:
    """First and last value of every loop so that no subscript leaves the array, and their text (``n - 2``,
    ``n / 2``, ...). ``Redraw`` when no such text is short."""
    p, base, n = d.p, d.base, d.p.n_val
    loops = [lp for top in nest.loops for lp in (top, *(s for s in top.body if isinstance(s, Loop)))]
    for lp in loops:
        ixs = [ix for top in nest.loops for ix in _indices(top) if ix.var == lp.var]

        def ok(v: int, ixs: list[Index] = ixs, var: str = lp.var) -> bool:
            return all(base <= value(ix, {var: v}, base, n, nest.tables) <= n - 1 + base for ix in ixs)

        lo = next((v for v in range(base, base + 4) if ok(v)), None)
        hi = next((v for v in range(n - 1 + base, n // 2 - 6, -1) if ok(v)), None)
        if lo is None or hi is None or hi < lo + 2:
            raise Redraw(f"no bounds for {lp.var}")
        mul = max((ix.mul for ix in ixs if ix.form == "aff"), default=1)
        last = hi + 1 - base                       # C's exclusive bound; Fortran's inclusive one
        slack = n // mul - last
        if slack < 0 or slack > 4 or mul > 2:
            raise Redraw(f"no short bound text for {lp.var}")
        size = f"{p.size} / 2" if mul == 2 else p.size
        lp.lo, lp.hi = lo, (n // mul - slack) - 1 + base
        lp.lo_text = str(lo)
        lp.hi_text = size if slack == 0 else f"{size} - {slack}"


def shared_inner(nest: Nest, d: Draw) -> str | None:
    return d.p.j if d.shared_j and d.p.j not in nest.private else None


def statements(nest: Nest) -> list[Stmt]:
    out: list[Stmt] = []

    def walk(body: list[Stmt | Loop]) -> None:
        for s in body:
            walk(s.body) if isinstance(s, Loop) else out.append(s)

    for lp in nest.loops:
        walk(lp.body)
    return out
