"""The C / Fortran text of a ``grammar`` race nest (statements, clauses, the parallel loop or region) and the
reason its label gives: the conflicting accesses with their iterations, or what keeps the nest race-free.

Not an entry point: ``grammar.grammar_kernel`` renders through ``render`` and ``reason``.
Test: ``pytest tests/data/race/test_grammar.py``.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from hpcrl_core.data.race.dependence import Conflict, Index, Loop, Nest, Ref, Stmt
from hpcrl_core.data.race.nests import Draw, statements
from hpcrl_core.data.race.programs import Program


def _ops(r: random.Random, k: int) -> list[str]:
    return [r.choice(("+", "+", "-", "*")) for _ in range(max(0, k - 1))]


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


def _clauses(nest: Nest, d: Draw) -> str:
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


def render(nest: Nest, d: Draw) -> list[str]:
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


def reason(nest: Nest, c: Conflict | None, d: Draw) -> str:
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
        said += [f"every update of `{s.target.name}` is {s.guard}" for s in statements(nest) if s.guard]
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
