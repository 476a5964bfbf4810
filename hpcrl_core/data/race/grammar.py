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

Drawing a nest is in ``nests``, its text and reason in ``nest_text``; this module mutates a drawn nest until its
label is the one asked for.

Not an entry point: ``generator.KERNELS["grammar"]`` is ``grammar_kernel``; ``generator.generate_race_items`` draws
it.
Test: ``pytest tests/data/race/test_grammar.py`` (the labeller on hand-written nests, TSan on generated programs).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable

from hpcrl_core.data.race.dependence import Conflict, Index, Loop, Nest, Redraw, Ref, label
from hpcrl_core.data.race.nest_text import reason, render
from hpcrl_core.data.race.nests import DRAWERS, Draw, fix_bounds, shared_inner, statements
from hpcrl_core.data.race.programs import Program


def _replace(nest: Nest, old: Ref, new: Ref) -> None:
    for s in statements(nest):
        s.terms = [new if t == old else t for t in s.terms]
        if s.target == old:
            s.target = new


def _fix(nest: Nest, c: Conflict, d: Draw) -> None:
    """Remove the conflict ``c`` (another may remain; the caller labels again)."""
    r, name = d.r, c.a.text.name
    if not c.a.text.idx:
        role = d.roles.get(name, "inner")
        if role == "acc":
            how = r.choice(("reduction", "reduction", "atomic", "critical"))
            if how == "reduction":
                nest.reduced.add(name)
            else:
                for s in statements(nest):
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


def _break(nest: Nest, d: Draw) -> None:
    """One random change that may make the race-free nest racy (the caller labels again)."""
    r = d.r
    moves: list[Callable[[], None]] = []
    if len(nest.loops) == 2 and not nest.nowait:
        moves += [lambda: setattr(nest, "nowait", True)] * 3
    if nest.private:
        moves.append(lambda: nest.private.discard(r.choice(sorted(nest.private))))
    if nest.reduced:
        moves.append(lambda: nest.reduced.discard(r.choice(sorted(nest.reduced))))
    guarded = [s for s in statements(nest) if s.guard]
    if guarded:
        moves.append(lambda: setattr(r.choice(guarded), "guard", None))
    reads = [t for s in statements(nest) for t in s.terms if isinstance(t, Ref) and t.idx]
    if reads:
        def shift() -> None:
            t = r.choice(reads)
            idx = list(t.idx)
            k = r.randrange(len(idx))
            idx[k] = Index("aff", idx[k].var or d.p.i, add=r.choice((1, -1)))
            target = next((s.target for s in statements(nest) if s.target.idx), None)
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
        d = Draw(p)
        shape = d.r.choice(("flat", "flat", "flat", "2d", "2d", "two"))
        try:
            nest = DRAWERS[shape](d)
            if d.via:
                nest.tables[d.via] = d.table
            d.r = random.Random(p.rng.random())
            layout = random.Random(p.rng.random())
            found = _settle(nest, d, race)
        except Redraw:
            _restore(p, snapshot)
            continue
        if found is not None or not race:
            used = {t.name for st in statements(nest) for t in (st.target, *st.terms) if isinstance(t, Ref)}
            p.summed += [a for a in p.arrays if a not in used and a not in p.summed]  # printed, so none is unused
            if d.via and not any(ix.via == d.via for st in statements(nest)
                                 for t in (st.target, *st.terms) if isinstance(t, Ref) for ix in t.idx):
                p.shown.append(p.ref(d.via, p.first()))
            main, p.rng = p.rng, layout
            try:
                return render(nest, d), reason(nest, found, d)
            finally:
                p.rng = main
        _restore(p, snapshot)
    raise Redraw("no nest with the asked label in 50 draws")  # pragma: no cover


def _settle(nest: Nest, d: Draw, race: bool) -> Conflict | None:
    """Mutate ``nest`` until its label is ``race``; the conflict found (None when race-free)."""
    for _ in range(12):
        fix_bounds(nest, d)
        found = label(nest, d.base, d.p.n_val, shared_inner(nest, d))
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
