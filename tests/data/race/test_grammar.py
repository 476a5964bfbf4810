"""Tests of the grammar race kernels: the dependence check on nests written by hand (each verdict worked out here),
and on generated programs the verdicts of independent judges (gcc/gfortran with bounds checks; ThreadSanitizer).

Run: pytest tests/data/race/test_grammar.py (the integration tests need gcc, gfortran, clang with TSan).
"""

from __future__ import annotations

import re
import shutil
from collections import Counter, defaultdict
from typing import Any

import pytest

from hpcrl_core.data.race.dependence import Index, Loop, Nest, Redraw, Ref, Stmt, label
from hpcrl_core.data.race.generator import GRAMMAR, generate_race_items
from hpcrl_core.data.race.tsan import check_with_tsan, tsan_available

N = 64


def i_(add: int = 0, mul: int = 1, var: str = "i") -> Index:
    return Index("aff", var, mul=mul, add=add)


def flat(*body: Stmt, lo: int = 0, hi: int = N - 1, **nest: object) -> Nest:
    return Nest([Loop("i", list(body), par=True, lo=lo, hi=hi)], **nest)  # type: ignore[arg-type]


def a(ix: Index, name: str = "a") -> Ref:
    return Ref(name, (ix,))


def verdict(nest: Nest, shared_inner: str | None = None) -> bool:
    return label(nest, 0, N, shared_inner) is not None


def test_loop_carried_dependences_race_and_reads_of_unwritten_arrays_do_not() -> None:
    assert verdict(flat(Stmt(a(i_()), [a(i_(1))]), hi=N - 2))                 # a[i] = a[i + 1]
    assert verdict(flat(Stmt(a(i_()), [a(i_(-1))]), lo=1))                    # a[i] = a[i - 1]
    assert not verdict(flat(Stmt(a(i_()), [a(i_(1), "b")]), hi=N - 2))        # a[i] = b[i + 1]
    assert not verdict(flat(Stmt(a(i_()), [a(i_())], update=True)))          # a[i] += a[i]
    assert verdict(flat(Stmt(a(i_(mul=2)), [a(i_(1))]), hi=N // 2 - 1))       # a[2i] = a[i + 1]: i=1 reads a[2]
    assert not verdict(flat(Stmt(a(i_(mul=2)), [a(i_(1, 2))]), hi=N // 2 - 1))  # a[2i] = a[2i + 1]
    c = label(flat(Stmt(a(i_()), [a(i_(1))]), hi=N - 2), 0, N, None)
    assert c is not None and c.a.write and {c.a.it, c.b.it} in ({0, 1}, {c.a.it, c.a.it + 1}, {c.a.it, c.a.it - 1})
    assert c.a.loc == c.b.loc and c.a.it != c.b.it


def test_subscripts_that_reach_one_element_from_two_iterations() -> None:
    half, mod, rev = Index("half", "i"), Index("mod", "i", m=8), Index("rev", "i")
    assert verdict(flat(Stmt(a(half), ["1"])))                                # a[i / 2] = 1
    assert verdict(flat(Stmt(a(mod), ["1"])))                                 # a[i % 8] = 1
    assert not verdict(flat(Stmt(a(rev), ["1"])))                             # a[n - 1 - i] = 1
    assert verdict(flat(Stmt(a(i_()), [a(rev)])))                             # a[i] = a[n - 1 - i]
    assert verdict(flat(Stmt(a(Index("const", add=3)), [a(i_(), "b")])))      # a[3] = b[i]
    perm = [(k * 5) % N for k in range(N)]
    dup = [k // 2 for k in range(N)]
    via = a(Index("via", "i", via="idx"))
    assert not verdict(flat(Stmt(via, [a(i_(), "b")], update=True), tables={"idx": perm}))
    assert verdict(flat(Stmt(via, [a(i_(), "b")], update=True), tables={"idx": dup}))
    assert not verdict(flat(Stmt(via, [a(i_(), "b")], update=True, guard="atomic"), tables={"idx": dup}))


def test_scalars_private_reduced_guarded_or_shared() -> None:
    tmp, acc = Ref("t"), Ref("s")
    body = (Stmt(tmp, [a(i_(), "b")]), Stmt(a(i_()), [tmp]))
    assert verdict(flat(*body))
    assert not verdict(flat(*body, private={"t"}))
    assert verdict(flat(Stmt(acc, [a(i_())], update=True)))
    assert not verdict(flat(Stmt(acc, [a(i_())], update=True), reduced={"s"}))
    assert not verdict(flat(Stmt(acc, [a(i_())], update=True, guard="critical")))
    assert not verdict(flat(Stmt(acc, [a(i_())], update=True, guard="atomic")))
    # atomic protects the update of its target only: another read of a written element still races
    assert verdict(flat(Stmt(a(i_()), [a(i_(1))], update=True, guard="atomic"), hi=N - 2))
    assert not verdict(flat(Stmt(a(i_()), [Ref("c")])))                       # a shared scalar only read
    # atomic and critical do not exclude each other: one update under each still races
    assert verdict(flat(Stmt(acc, [a(i_())], update=True, guard="atomic"),
                        Stmt(acc, [a(i_(), "b")], update=True, guard="critical")))
    assert not verdict(flat(Stmt(acc, [a(i_())], update=True, guard="critical"),
                            Stmt(acc, [a(i_(), "b")], update=True, guard="critical")))


def test_clauses_and_guards_do_not_tell_the_label() -> None:
    """Racy halves carry private / reduction / atomic / critical / nowait too (a race elsewhere in the nest)."""
    recs = [r for lang in ("c", "fortran") for r in generate_race_items(lang, 1, seed=5, grammar_pairs=150)
            if r.metadata["pattern"] == GRAMMAR]
    for word in ("private(", "reduction(", "nowait"):
        seen = Counter(r.answer for r in recs if word in r.question.lower())
        assert min(seen["yes"], seen["no"]) >= 0.3 * max(seen["yes"], seen["no"]), (word, seen)


def test_nests_race_only_across_iterations_of_the_parallel_loop() -> None:
    n = 16

    def nest(par_outer: bool, row: int, col: int) -> Nest:
        stmt = Stmt(Ref("m", (i_(), i_(var="j"))), [Ref("m", (i_(row), i_(col, var="j")))])
        inner = Loop("j", [stmt], par=not par_outer, lo=1, hi=n - 2)
        return Nest([Loop("i", [inner], par=par_outer, lo=1, hi=n - 2)])

    def racy(par_outer: bool, row: int, col: int, shared_inner: str | None = None) -> bool:
        return label(nest(par_outer, row, col), 0, n, shared_inner) is not None

    assert racy(True, -1, 0) and not racy(False, -1, 0)     # m[i][j] = m[i - 1][j]: carried by i
    assert racy(False, 0, -1) and not racy(True, 0, -1)     # m[i][j] = m[i][j - 1]: carried by j
    assert not racy(True, 0, 0) and not racy(False, 0, 0)
    assert racy(True, 0, 0, shared_inner="j")               # the inner index shared by the threads
    swap = Stmt(Ref("m", (i_(), i_(var="j"))), [Ref("m", (i_(var="j"), i_()))])
    assert label(Nest([Loop("i", [Loop("j", [swap], lo=0, hi=n - 1)], par=True, lo=0, hi=n - 1)]), 0, n, None)


def test_two_loops_race_through_nowait_only_across_iterations() -> None:
    def two(read: Index, nowait: bool) -> Nest:
        first = Loop("i", [Stmt(a(i_()), [a(i_(), "b")])], par=True, lo=1, hi=N - 2)
        second = Loop("i", [Stmt(a(i_(), "c"), [a(read)])], par=True, lo=1, hi=N - 2)
        return Nest([first, second], nowait=nowait)

    assert verdict(two(i_(1), True)) and not verdict(two(i_(1), False))
    assert not verdict(two(i_(), False))
    with pytest.raises(Redraw, match="schedule"):            # only the same iteration: the schedule decides
        verdict(two(i_(), True))


def test_a_subscript_out_of_bounds_is_refused() -> None:
    with pytest.raises(Redraw, match="out of bounds"):
        verdict(flat(Stmt(a(i_()), [a(i_(1))])))             # a[i + 1] at i = n - 1


def test_fortran_subscripts_are_one_based() -> None:
    nest = Nest([Loop("i", [Stmt(a(Index("rev", "i")), ["1"])], par=True, lo=1, hi=N)])
    assert label(nest, 1, N, None) is None                  # a(n + 1 - i) for i = 1..n: inside 1..n, each once
    with pytest.raises(Redraw):
        label(Nest([Loop("i", [Stmt(a(i_()), ["1"])], par=True, lo=0, hi=N - 1)]), 1, N, None)


@pytest.mark.parametrize("language", ["c", "fortran"])
def test_generated_pairs_are_balanced_minimal_and_deterministic(language: str) -> None:
    recs = [r for r in generate_race_items(language, 1, seed=2, grammar_pairs=40) if r.metadata["pattern"] == GRAMMAR]
    again = [r for r in generate_race_items(language, 1, seed=2, grammar_pairs=40) if r.metadata["pattern"] == GRAMMAR]
    assert recs == again and len(recs) == 80
    assert Counter(r.answer for r in recs) == {"yes": 40, "no": 40}
    pairs = list(zip(recs[::2], recs[1::2], strict=True))
    assert all(x.provenance["pair"] == y.provenance["pair"] for x, y in pairs)
    # a racy reason names the written location and the two iterations, or the shared scalar
    for r in recs:
        assert r.response.startswith(f"{r.answer}: ") and re.search(r"`[^`]+`", r.response), r.response
    # the shapes vary: 1-D loops, nests, two-loop regions; several subscript forms
    codes = [r.question for r in recs]
    assert sum("nowait" in c.lower() for c in codes) >= 2
    assert len({len(c.splitlines()) for c in codes}) > 10
    fixed_only = sum(len(set(x.question.splitlines()) ^ set(y.question.splitlines())) <= 8 for x, y in pairs)
    assert fixed_only >= len(pairs) // 2, fixed_only  # most pairs differ only where the fix is


def test_grammar_pairs_leave_the_pattern_items_as_they_were() -> None:
    plain = generate_race_items("c", 2, seed=4, held_out_pairs=1, rl_pairs=1)
    more = generate_race_items("c", 2, seed=4, held_out_pairs=1, rl_pairs=1, grammar_pairs=3)
    assert [r.question for r in more if r.metadata["pattern"] != GRAMMAR] == [r.question for r in plain]
    grammar = [r for r in more if r.metadata["pattern"] == GRAMMAR]
    assert Counter((r.provenance.get("held_out", False), r.provenance.get("rl", False)) for r in grammar) == {
        (False, False): 6, (True, False): 2, (False, True): 2}


@pytest.mark.integration
def test_tsan_never_flags_a_race_free_grammar_program_and_sees_most_racy_ones() -> None:
    if not tsan_available():
        pytest.skip("clang with ThreadSanitizer and libomp is not installed")
    recs = [r for r in generate_race_items("c", 1, seed=9, grammar_pairs=30) if r.metadata["pattern"] == GRAMMAR]
    out = check_with_tsan(recs, jobs=2)
    seen = Counter((r.answer, r.metadata["tsan"]) for r in out)
    assert seen[("no", "race")] == 0 and seen[("no", "error")] == 0 and seen[("yes", "error")] == 0, seen
    assert seen[("yes", "race")] >= 0.85 * 30, seen  # TSan sees a race only when two threads meet on it


@pytest.mark.integration
@pytest.mark.parametrize("language", ["c", "fortran"])
def test_generated_programs_compile_warning_free_and_stay_in_bounds(tmp_path: object, language: str) -> None:
    from tests.data.race.test_generator import _check_all

    compiler = "gcc" if language == "c" else "gfortran"
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} is not installed")
    recs = [r for seed in (0, 1) for r in generate_race_items(language, 1, seed, grammar_pairs=20)
            if r.metadata["pattern"] == GRAMMAR]
    cmd = (["gcc", "-fopenmp", "-Wall", "-Werror", "-g", "-fsanitize=address,undefined"] if language == "c" else
           ["gfortran", "-fopenmp", "-Wall", "-Werror", "-g", "-fcheck=bounds"])
    _check_all(recs, tmp_path, cmd, ".c" if language == "c" else ".f90")  # type: ignore[arg-type]


def _reference(nest: Nest, base: int, n: int, shared_inner: str | None) -> bool | None:
    """An independent, exhaustive reading of the same rule in plain Python: every iteration, every access, every
    pair. True: a race; False: none; None: the verdict depends on the schedule. Slow; for small nests only."""
    private = nest.private | nest.reduced | nest.firstprivate

    def sub(ix: Index, env: dict[str, int]) -> int:
        v = env.get(ix.var, 0)
        return {"aff": lambda: ix.mul * v + ix.add, "rev": lambda: n - 1 - v + 2 * base,
                "half": lambda: (v + base) // 2, "mod": lambda: v % ix.m + base,
                "via": lambda: nest.tables[ix.via][v - base], "const": lambda: ix.add}[ix.form]()

    def events(loop: Loop) -> list[tuple[tuple[object, ...], int, bool, str | None]]:
        par = loop.var if loop.par else next(s for s in loop.body if isinstance(s, Loop)).var
        out = []

        def walk(lp: Loop, env: dict[str, int]) -> None:
            for v in range(lp.lo, lp.hi + 1):
                e = {**env, lp.var: v}
                for s in lp.body:
                    if isinstance(s, Loop):
                        walk(s, e)
                        continue
                    seq = () if loop.par else (e[loop.var],)
                    refs = [(t, False) for t in s.terms if isinstance(t, Ref)] + [(s.target, False)] * s.update
                    for ref, w in [*refs, (s.target, True)]:
                        if not ref.idx and ref.name in private:
                            continue
                        g = s.guard if ref is s.target or s.guard == "critical" else None
                        out.append(((*seq, ref.name, *(sub(ix, e) for ix in ref.idx)), e[par], w, g))
                    if shared_inner:
                        out.append(((*seq, shared_inner), e[par], True, None))

        walk(loop, {})
        return out

    def clash(x: tuple[object, ...], y: tuple[object, ...]) -> bool:
        return x[0] == y[0] and (x[2] or y[2]) and not (x[3] is not None and x[3] == y[3])

    def by_address(ev: list[tuple[tuple[object, ...], int, bool, str | None]]) -> dict[object, list[Any]]:
        out: dict[object, list[Any]] = defaultdict(list)  # only accesses to one element can clash: every such pair
        for e in ev:
            out[e[0]].append(e)
        return out

    phases = [events(lp) for lp in nest.loops]
    for ev in phases:
        if any(clash(x, y) and x[1] != y[1] for same in by_address(ev).values() for x in same for y in same):
            return True
    if len(phases) == 2 and nest.nowait:
        later = by_address(phases[1])
        pairs = [(x, y) for x in phases[0] for y in later.get(x[0], ()) if clash(x, y)]
        if any(x[1] != y[1] for x, y in pairs):
            return True
        if pairs:
            return None
    return False


@pytest.mark.parametrize("language", ["c", "fortran"])
def test_the_labeller_agrees_with_an_exhaustive_reading_on_drawn_nests(language: str) -> None:
    import random

    from hpcrl_core.data.race import grammar as g
    from hpcrl_core.data.race import nests
    from hpcrl_core.data.race.programs import Program

    seen = Counter()
    for seed in range(60):
        p = Program(random.Random(seed), language)
        d = nests.Draw(p)
        shape = ("flat", "2d", "two")[seed % 3]
        nest = nests.DRAWERS[shape](d)
        if d.via:
            nest.tables[d.via] = d.table
        p.n_val = min(p.n_val, 24 if shape == "2d" else 96)  # small enough for the exhaustive reading
        if d.via:
            nest.tables[d.via] = [x for x in nest.tables[d.via] if x < p.n_val + d.base][: p.n_val]
            if len(nest.tables[d.via]) < p.n_val:
                continue
        d.r = random.Random(seed)
        for want in (None, True, False):  # as drawn, then mutated to each label
            try:
                if want is None:
                    nests.fix_bounds(nest, d)
                else:
                    g._settle(nest, d, want)
            except Redraw:
                continue
            shared = nests.shared_inner(nest, d)
            expected = _reference(nest, d.base, p.n_val, shared)
            if expected is None:
                with pytest.raises(Redraw):
                    label(nest, d.base, p.n_val, shared)
            else:
                found = label(nest, d.base, p.n_val, shared)
                assert (found is not None) == expected, (shape, want, nest)
                assert want is None or expected == want
            seen[(shape, expected)] += 1
    assert all(seen[(shape, v)] >= 5 for shape in ("flat", "2d", "two") for v in (True, False)), seen
