"""Race programs drawn from a small grammar of loops and labelled by an exact dependence check, not by template.

The fourteen pattern kernels of ``kernels`` each write one shape of program, and a policy trained on them learns the
shapes (docs/experiments.md, race detection). Here a kernel is a random loop nest instead: one to three statements
over arrays and scalars, index expressions drawn from the forms real code uses (``i``, ``i + 1``, ``2 * i + 1``,
``n - 1 - i``, ``i / 2``, ``i % 16``, ``idx[i]`` through an index array, a constant), clauses (``private``,
``reduction``, ``firstprivate``), ``atomic`` / ``critical`` guards, 2-D nests parallel in the outer or the inner loop
(transposed reads included), and two worksharing loops in one region with or without ``nowait``.

The label is computed, not chosen: ``label`` enumerates every iteration of the parallel loop(s) at the program's
real sizes and bounds, lists each memory location every iteration reads and writes, and finds two iterations that
touch one location, at least one writing, not both under the same guard. Private and reduction variables are not
shared locations; the index of a sequential inner loop is shared in C when it is declared outside the parallel loop
and is not private (Fortran makes it private). Two loops separated by ``nowait`` conflict when one writes what the
other touches in another iteration; a draw whose only cross-loop conflicts fall on the same iteration (a race or not
depending on the schedule) is redrawn. The reason names the location and the two accesses that conflict.

Minimal pairs as for every pattern: both halves draw the same nest from one stream; the half whose label differs from
the one asked for is then mutated (fix the conflict found, or break a guard, clause, index or barrier) and labelled
again until it matches.

Not an entry point: ``generator.KERNELS["grammar"]`` is ``grammar_kernel``; ``generator.generate_race_items`` draws
it.
Test: ``pytest tests/data/race/test_grammar.py`` (the labeller on hand-written nests, TSan on generated programs).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable

from hpcrl_core.data.race.dependence import Conflict, Index, Loop, Nest, Redraw, Ref, Stmt, label, value
from hpcrl_core.data.race.programs import Program

# ---------------------------------------------------------------------------------------------------------------
# Drawing a nest


_WRITE_FORMS = ("aff",) * 8 + ("aff2", "rev", "half", "mod", "const", "via")
_READ_FORMS = ("aff",) * 6 + ("off",) * 5 + ("aff2", "rev", "half", "mod", "const", "via")


class _Draw:
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


def _ops(r: random.Random, k: int) -> list[str]:
    return [r.choice(("+", "+", "-", "*")) for _ in range(max(0, k - 1))]


def _draw_flat(d: _Draw) -> Nest:
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


def _draw_2d(d: _Draw) -> Nest:
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


def _draw_two(d: _Draw) -> Nest:
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


def _fix_bounds(nest: Nest, d: _Draw) -> None:
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


# ---------------------------------------------------------------------------------------------------------------
# Rendering


def _index_text(p: Program, ix: Index) -> str:
    v, sp = ix.var, p.sp
    if ix.form == "aff":
        head = v if ix.mul == 1 else f"{ix.mul} * {v}"
        return head if ix.add == 0 else f"{head}{sp}{'+' if ix.add > 0 else '-'}{sp}{abs(ix.add)}"
    if ix.form == "rev":
        return f"{p.size} - 1 - {v}" if p.c else f"{p.size} + 1 - {v}"
    if ix.form == "half":
        return f"{v} / 2" if p.c else f"({v} + 1) / 2"
    if ix.form == "mod":
        return f"{v} % {ix.m}" if p.c else f"mod({v}, {ix.m}) + 1"
    if ix.form == "via":
        return p.ref(ix.via, v)
    return str(ix.add)


def ref_text(p: Program, ref: Ref) -> str:
    if not ref.idx:
        return ref.name
    if len(ref.idx) == 2:
        return p.ref2(ref.name, _index_text(p, ref.idx[0]), _index_text(p, ref.idx[1]))
    return p.ref(ref.name, _index_text(p, ref.idx[0]))


def _stmt_lines(p: Program, s: Stmt, ops: list[str]) -> list[str]:
    parts = [ref_text(p, t) if isinstance(t, Ref) else t for t in s.terms]
    expr = parts[0]
    for op, x in zip(ops, parts[1:], strict=False):
        expr = f"{expr} {op} {x}"
    target = ref_text(p, s.target)
    if s.update:
        grouped = f"({expr})" if len(parts) > 1 else expr
        text = f"{target} += {expr}" if p.c and (s.guard == "atomic" or p.rng.random() < 0.5) else \
            f"{target} = {target} + {grouped}"
    else:
        text = f"{target} = {expr}"
    line = p.st(text)
    if s.guard == "atomic":
        return [p.omp(p.rng.choice(("atomic", "atomic update"))), line]
    if s.guard == "critical":
        return p.block("critical", [line])
    return [line]


def _body_lines(p: Program, body: list[Stmt | Loop], lp_render: Callable[[Loop], list[str]]) -> list[str]:
    out: list[str] = []
    for s in body:
        out += lp_render(s) if isinstance(s, Loop) else _stmt_lines(p, s, _ops(p.rng, len(s.terms)))
    return out


def _clauses(nest: Nest, d: _Draw) -> str:
    r = d.r
    parts = []
    if nest.private:
        parts.append(f"private({', '.join(sorted(nest.private))})")
    if nest.firstprivate:
        parts.append(f"firstprivate({', '.join(sorted(nest.firstprivate))})")
    parts += [f"reduction(+:{s})" for s in sorted(nest.reduced)]
    if nest.schedule:
        parts.append(nest.schedule)
    r.shuffle(parts)
    return "".join(f" {x}" for x in parts)


def render(nest: Nest, d: _Draw) -> list[str]:
    p = d.p

    def loop(lp: Loop, declare: bool | None = None) -> list[str]:
        inner = _body_lines(p, lp.body, loop)
        lines = p.loop(inner, lo=lp.lo_text, hi=lp.hi_text, var=lp.var, declare=declare)
        return p.par_for(_clauses(nest, d), lines) if lp.par and len(nest.loops) == 1 else lines

    prelude = list(d.prelude)
    if len(nest.loops) == 1:  # a parallel loop, or a sequential one around a parallel inner loop
        return [*prelude, *loop(nest.loops[0])]
    first, second = (p.loop(_body_lines(p, lp.body, loop), lo=lp.lo_text, hi=lp.hi_text, var=lp.var)
                     for lp in nest.loops)
    return [*prelude, *p.region([*p.workshare(first, nowait=nest.nowait), *p.workshare(second)])]


# ---------------------------------------------------------------------------------------------------------------
# Labelling, mutating to the asked label, and the reason


def _shared_inner(nest: Nest, d: _Draw) -> str | None:
    return d.p.j if d.shared_j and d.p.j not in nest.private else None


def _stmts(nest: Nest) -> list[Stmt]:
    out: list[Stmt] = []

    def walk(body: list[Stmt | Loop]) -> None:
        for s in body:
            walk(s.body) if isinstance(s, Loop) else out.append(s)

    for lp in nest.loops:
        walk(lp.body)
    return out


def _replace(nest: Nest, old: Ref, new: Ref) -> None:
    for s in _stmts(nest):
        s.terms = [new if t == old else t for t in s.terms]
        if s.target == old:
            s.target = new


def _fix(nest: Nest, c: Conflict, d: _Draw) -> None:
    """Remove the conflict ``c`` (another may remain; the caller labels again)."""
    r, name = d.r, c.a.text.name
    if not c.a.text.idx:
        role = d.roles.get(name, "inner")
        if role == "acc":
            how = r.choice(("reduction", "reduction", "atomic", "critical"))
            if how == "reduction":
                nest.reduced.add(name)
            else:
                for s in _stmts(nest):
                    if s.target.name == name:
                        s.guard = how
        else:
            nest.private.add(name)
        return
    if len(nest.loops) == 2 and c.a.phase != c.b.phase:
        read = c.b if not c.b.write else c.a if not c.a.write else None
        if read is not None and d.read and r.random() < 0.7:  # keep nowait; read what the other loop leaves alone
            _replace(nest, read.text, Ref(r.choice(d.read), read.text.idx))
        else:
            nest.nowait = False
        return
    if c.a.text == c.b.text or c.b.write:
        # one subscript reaches an element from two iterations: write each iteration's own element instead
        own = Ref(name, tuple(Index("aff", v) for v in ((d.p.i,) if len(c.a.text.idx) == 1 else (d.p.i, d.p.j))))
        _replace(nest, c.a.text if c.a.text != own else c.b.text, own)
        return
    if d.read and r.random() < 0.5:   # read another array instead (labelled again: it may be written too)
        _replace(nest, c.b.text, Ref(r.choice(d.read), c.b.text.idx))
    else:                             # read the element this iteration writes
        _replace(nest, c.b.text, c.a.text)


def _break(nest: Nest, d: _Draw) -> None:
    """One random change that may make the race-free nest racy (the caller labels again)."""
    r = d.r
    moves: list[Callable[[], None]] = []
    if len(nest.loops) == 2 and not nest.nowait:
        moves += [lambda: setattr(nest, "nowait", True)] * 3
    if nest.private:
        moves.append(lambda: nest.private.discard(r.choice(sorted(nest.private))))
    if nest.reduced:
        moves.append(lambda: nest.reduced.discard(r.choice(sorted(nest.reduced))))
    guarded = [s for s in _stmts(nest) if s.guard]
    if guarded:
        moves.append(lambda: setattr(r.choice(guarded), "guard", None))
    reads = [t for s in _stmts(nest) for t in s.terms if isinstance(t, Ref) and t.idx]
    if reads:
        def shift() -> None:
            t = r.choice(reads)
            idx = list(t.idx)
            k = r.randrange(len(idx))
            idx[k] = Index("aff", idx[k].var or d.p.i, add=r.choice((1, -1)))
            target = next((s.target for s in _stmts(nest) if s.target.idx), None)
            name = target.name if target and r.random() < 0.7 else t.name
            _replace(nest, t, Ref(name, tuple(idx)))
        moves += [shift] * 4  # more often than a clause goes: racy halves keep their clauses as fixed ones do
    if len(nest.loops) == 1 and any(isinstance(s, Loop) for s in nest.loops[0].body):
        def swap() -> None:
            top = nest.loops[0]
            inner = next(s for s in top.body if isinstance(s, Loop))
            top.par, inner.par = inner.par, top.par
            d.shared_j = d.p.c and top.par and not d.p.in_for
        moves.append(swap)
    r.choice(moves)()


def _reason(nest: Nest, c: Conflict | None, d: _Draw) -> str:
    p = d.p
    par = next(lp for top in nest.loops for lp in (top, *(s for s in top.body if isinstance(s, Loop))) if lp.par)
    v = par.var
    if c is None:
        said = [f"no element that one iteration of the parallel loop over `{v}` writes is read or written by "
                "another iteration"]
        if not nest.loops[0].par:
            said[0] += f", and the loop over `{nest.loops[0].var}` runs in order"
        said += [f"`{t}` is private" for t in sorted(nest.private)]
        said += [f"`{s}` is combined through a reduction clause" for s in sorted(nest.reduced)]
        said += [f"every update of `{s.target.name}` is {s.guard}" for s in _stmts(nest) if s.guard]
        if len(nest.loops) == 2:
            said.append("the barrier at the end of the first loop orders its writes before the second loop"
                        if not nest.nowait else "the two loops share no element that either of them writes, so "
                        "nowait is safe")
        return "; ".join(said)
    a, b = c.a, c.b
    if not a.text.idx:
        role = d.roles.get(a.text.name, "inner")
        if role == "tmp":
            return (f"`{a.text.name}` is shared, so one thread can overwrite it between another thread's write and "
                    "its read")
        if role == "acc":
            return (f"every iteration updates the shared `{a.text.name}` without a reduction clause or atomic "
                    "protection, so concurrent updates are lost")
        return (f"the inner loop index `{a.text.name}` is declared outside the parallel loop and not private, so all "
                "threads update the same variable")
    ta, tb = ref_text(p, a.text), ref_text(p, b.text)
    how = "written" if b.write else "read"
    if a.phase != b.phase:
        return (f"`{a.text.name}` is written as `{ta}` in one loop and {how} as `{tb}` by another iteration in the "
                "other loop, and nowait lets a thread start the second loop before the first is done")
    return (f"`{a.text.name}` is written as `{ta}` in iteration {v} = {a.it} and {how} as `{tb}` in iteration "
            f"{v} = {b.it}, which can run at the same time on another thread")


def grammar_kernel(p: Program, race: bool) -> tuple[list[str], str]:
    """The ``grammar`` pattern: a drawn nest, mutated until its computed label is ``race``.

    The mutations and the kernel's rendering draw from streams of their own, seeded from the program's stream at the
    same point in both halves of a pair, so the rest of the program (init, report, layout) comes out the same."""
    state = p.rng.getstate()
    for _ in range(50):
        # attempt k starts where attempt k - 1 started, one draw on: a fresh nest each time, the same in both halves
        p.rng.setstate(state)
        p.rng.random()
        state = p.rng.getstate()
        snapshot = _program_state(p)
        p.ty = _FLOATING.get(p.ty, p.ty)
        d = _Draw(p)
        shape = d.r.choice(("flat", "flat", "flat", "2d", "2d", "two"))
        try:
            nest = {"flat": _draw_flat, "2d": _draw_2d, "two": _draw_two}[shape](d)
            if d.via:
                nest.tables[d.via] = d.table
            d.r = random.Random(p.rng.random())
            layout = random.Random(p.rng.random())
            found = _settle(nest, d, race)
        except Redraw:
            _restore(p, snapshot)
            continue
        if found is not None or not race:
            used = {t.name for st in _stmts(nest) for t in (st.target, *st.terms) if isinstance(t, Ref)}
            p.summed += [a for a in p.arrays if a not in used and a not in p.summed]  # printed, so none is unused
            if d.via and not any(ix.via == d.via for st in _stmts(nest)
                                 for t in (st.target, *st.terms) if isinstance(t, Ref) for ix in t.idx):
                p.shown.append(p.ref(d.via, p.first()))
            main, p.rng = p.rng, layout
            try:
                return render(nest, d), _reason(nest, found, d)
            finally:
                p.rng = main
        _restore(p, snapshot)
    raise Redraw("no nest with the asked label in 50 draws")  # pragma: no cover


def _settle(nest: Nest, d: _Draw, race: bool) -> Conflict | None:
    """Mutate ``nest`` until its label is ``race``; the conflict found (None when race-free)."""
    for _ in range(12):
        _fix_bounds(nest, d)
        found = label(nest, d.base, d.p.n_val, _shared_inner(nest, d))
        if (found is not None) == race:
            return found
        if race:
            _break(nest, d)
        else:
            assert found is not None
            _fix(nest, found, d)
    raise Redraw("the label did not settle")


# integer elements become floating point: a drawn recurrence may double every iteration, and signed overflow is
# undefined behaviour; a floating-point one only reaches infinity
_FLOATING = {"int": "double", "long": "double", "integer": "real"}
_STATE = ("ty", "used", "arrays", "scalars", "int_arrays", "shown", "summed", "mats", "j", "n_val", "top_ints")


def _program_state(p: Program) -> dict[str, object]:
    """What a draw changes on the program, to undo a draw that is thrown away."""
    return {k: copy.copy(getattr(p, k)) for k in _STATE}


def _restore(p: Program, state: dict[str, object]) -> None:
    for k, v in state.items():
        setattr(p, k, copy.copy(v))
