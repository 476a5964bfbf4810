"""Per-pattern OpenMP kernels for ``generator``: the C and Fortran core of every pattern class, racy or race-free.

Each kernel takes a program under construction (``programs.Program``) and ``race`` (whether to build the racy
variant), declares its arrays and scalars on it, and returns the program's OpenMP part as lines indented by four
spaces per level, plus the one-sentence reason for the label (naming the variable first). ``KERNELS`` maps every
name in ``generator.PATTERNS`` to its kernel: the loop-level ones here, the synchronisation ones (barriers, task
waits, sections, locks, task dependences) in ``kernels_sync``. Kernels draw only from ``p.rng``, in a fixed order,
so a program is a pure function of its seed; reordering draws changes every generated item.

Not an entry point: use ``generator.generate_race_items``.
Test: ``pytest tests/data/race/test_generator.py`` (compiles every sampled program with gcc / gfortran -fopenmp).
"""

from __future__ import annotations

from collections.abc import Callable

from hpcrl_core.data.race.kernels_sync import _k_barrier, _k_lock, _k_sections, _k_task_depend, _k_taskwait
from hpcrl_core.data.race.programs import Program, indent

# A kernel: (program under construction, racy?) -> (OpenMP part of the program, reason for the label).
Kernel = Callable[[Program, bool], tuple[list[str], str]]


def _k_private(p: Program, race: bool) -> tuple[list[str], str]:
    """A temporary written then read in each iteration: shared (race) or private / lastprivate / block-local."""
    if p.c and p.rng.random() < 0.3:
        return _k_inner_index(p, race)
    r, i = p.rng, p.i
    a, b = p.arr(), p.arr()
    t = p.scalar("tmp")
    u = p.scalar("tmp") if r.random() < 0.3 else None
    k1, k2 = r.randint(2, 5), r.randint(1, 9)
    ai, bi = p.ref(a, i), p.ref(b, i)
    if u:
        body = [f"{u} = {ai} + {k2}", f"{t} = {u} * {k1}", f"{bi} = {t} - {u}"]
    else:
        use = r.choice((f"{bi} = {t} * {t}", f"{bi} = {t} + {ai}", f"{bi} = {t} - {k2}"))
        body = [f"{t} = {ai} * {k1} + {k2}", use]
    p.summed.append(b)
    mode = "shared" if race else r.choice(("private", "private", "lastprivate", *(("local",) * (p.c and not u))))
    others = f", {u}" if u else ""
    if mode == "shared":
        clause = f" private({u})" if u else ""
        why = (f"`{t}` is not in the private clause, so all threads write and read the same `{t}` at the same time"
               if u else f"`{t}` is shared by all threads, so one thread can overwrite it between another thread's "
               "write and its read")
    elif mode == "local":
        p.scalars.remove((t, p.ty))
        body[0] = f"{p.ty} {body[0]}"
        clause, why = "", f"`{t}` is declared inside the loop body, so every iteration has its own copy"
    elif mode == "lastprivate":
        clause = f" lastprivate({t})" + (f" private({u})" if u else "")
        p.shown.append(t)
        why = f"`{t}` is lastprivate, so each thread works on its own copy and only the last iteration's value is kept"
    else:
        clause = f" private({t}{others})"
        why = f"`{t}` is private, so each thread works on its own copy and every iteration writes its own element"
    return p.par_for(clause, p.loop([p.st(x) for x in body])), why


def _k_inner_index(p: Program, race: bool) -> tuple[list[str], str]:
    """C only: the index of a sequential inner loop declared outside the parallel loop is shared unless private."""
    r, i = p.rng, p.i
    j = p.name("loop")
    w = r.choice([x for x in (4, 8, 16) if p.n_val % x == 0])
    a, b = p.arr(), p.arr()
    mode = "shared" if race else r.choice(("private", "declared"))
    at, bt = p.ref(a, f"{i} * {w} + {j}"), p.ref(b, f"{i} * {w} + {j}")
    inner = p.loop([p.st(f"{at} = {bt} * 2 + {j}")], hi=str(w), var=j, declare=mode == "declared")
    p.summed.append(a)
    why = {"shared": f"the inner loop index `{j}` is declared outside the parallel loop and not private, so all "
                     f"threads update the same `{j}`",
           "private": f"the inner loop index `{j}` is in a private clause, so each thread has its own counter",
           "declared": f"the inner loop index `{j}` is declared in its for statement, so each thread has its own copy",
           }[mode]
    clause = f" private({j})" if mode == "private" else ""
    return p.par_for(clause, p.loop(inner, hi=f"{p.size} / {w}")), why


def _k_reduction(p: Program, race: bool) -> tuple[list[str], str]:
    """A sum or maximum accumulated in a shared scalar, with or without a reduction clause."""
    r, i = p.rng, p.i
    a = p.arr()
    ai = p.ref(a, i)
    if r.random() < 0.3:
        v, op = p.scalar("peak"), "max"
        body = [f"{v} = max({v}, {ai})"] if not p.c else r.choice(([f"if ({ai} > {v}) {v} = {ai};"],
                                                                   [f"if ({ai} > {v})", f"    {v} = {ai};"]))
        yes = f"threads compare and overwrite the shared `{v}` without a reduction(max:{v}) clause, so the " \
              "read-compare-write steps conflict"
    else:
        v, op = p.scalar("acc"), "+"
        term = f"{ai} * {p.ref(p.arr(), i)}" if r.random() < 0.4 else ai
        body = [p.st(r.choice((f"{v} += {term}", f"{v} = {v} + {term}")) if p.c else f"{v} = {v} + {term}")]
        yes = f"every iteration updates the shared accumulator `{v}` without a reduction clause, so concurrent " \
              "read-modify-write updates are lost"
    if r.random() < 0.3:
        c = p.arr()
        body.append(p.st(f"{p.ref(c, i)} = {ai} + 1"))
        p.summed.append(c)
    p.shown.append(v)
    clause = "" if race else f" reduction({op}:{v})"
    no = f"`{v}` is combined through a reduction({op}:{v}) clause, so each thread updates a private copy"
    return p.par_for(clause, p.loop(body)), yes if race else no


def _dependence(p: Program, kind: str, d: int, who: str) -> tuple[str | None, str | None, str, str]:
    """Loop bounds, statement and reason for a loop over ``a`` with (flow, anti, back) or without (other, same) a
    loop-carried dependence of distance ``d``."""
    a, b = p.arr(), p.arr()
    ahead, behind = p.ref(a, p.off("+", d)), p.ref(a, p.off("-", d))
    ai, bi = p.ref(a, p.i), p.ref(b, p.i)
    upper = f"{p.size} - {d}"
    p.summed.append(a)
    if kind == "flow":
        return None, upper, f"{ahead} = {ai} + {bi}", (
            f"`{a}` has a loop-carried dependence: the element written as `{ahead}` is read as `{ai}` by a later "
            f"iteration, which may run at the same time on {who}")
    if kind == "anti":
        return None, upper, f"{ai} = {ahead} + {bi}", (
            f"`{a}` has a loop-carried anti-dependence: `{ahead}` is read while a later iteration, possibly on {who}, "
            "overwrites that element")
    if kind == "back":
        return str(d) if p.c else str(d + 1), None, f"{ai} = {behind} + {bi}", (
            f"`{a}` has a loop-carried dependence: `{behind}` reads an element that an earlier iteration, possibly "
            f"running at the same time on {who}, writes")
    if kind == "other":
        c = p.arr()
        p.summed.append(c)
        return None, upper, f"{p.ref(c, p.i)} = {ahead} + {bi}", (
            f"`{c}` is the only array written, one element per iteration, and `{a}` and `{b}` are only read, so the "
            "iterations are independent")
    return None, None, f"{ai} = {ai} * 2 + {bi}", (
        f"`{a}` is only accessed at element {p.i} in iteration {p.i}, so no iteration touches another's element")


def _k_carried(p: Program, race: bool) -> tuple[list[str], str]:
    """A parallel loop with or without a loop-carried dependence."""
    kind = p.rng.choice(("flow", "anti", "back") if race else ("other", "same"))
    lo, hi, stmt, why = _dependence(p, kind, p.rng.choice((1, 1, 2, 3)), "another thread")
    return p.par_for("", p.loop([p.st(stmt)], lo, hi)), why


def _k_simd(p: Program, race: bool) -> tuple[list[str], str]:
    """An ``omp simd`` loop (one thread) with or without a loop-carried true dependence."""
    kind = p.rng.choice(("flow", "back") if race else ("other", "same"))
    lo, hi, stmt, why = _dependence(p, kind, p.rng.choice((1, 2, 3, 4)), "another SIMD lane")
    end = [p.omp("end simd")] if not p.c and p.rng.random() < 0.5 else []
    return [p.omp("simd"), *p.loop([p.st(stmt)], lo, hi), *end], f"under omp simd, {why}"


_IDX_FORMS: dict[tuple[bool, bool], tuple[tuple[str, Callable[[int, int, int], int]], ...]] = {
    # (C?, duplicates?) -> (expression in {i}, {n}, {s}; the value it stores for index i, size n, parameter s)
    (True, True): (("{i} % ({n} / 2)", lambda i, n, s: i % (n // 2)), ("({i} * 2) % {n}", lambda i, n, s: 2 * i % n),
                   ("{n} / 2 - 1 - {i} % ({n} / 2)", lambda i, n, s: n // 2 - 1 - i % (n // 2))),
    (True, False): (("{n} - 1 - {i}", lambda i, n, s: n - 1 - i), ("({i} + {s}) % {n}", lambda i, n, s: (i + s) % n),
                    ("({i} * {s}) % {n}", lambda i, n, s: i * s % n)),
    (False, True): (("mod({i} - 1, {n} / 2) + 1", lambda i, n, s: (i - 1) % (n // 2) + 1),
                    ("mod(2 * {i}, {n}) + 1", lambda i, n, s: 2 * i % n + 1),
                    ("{n} / 2 - mod({i}, {n} / 2)", lambda i, n, s: n // 2 - i % (n // 2))),
    (False, False): (("{n} + 1 - {i}", lambda i, n, s: n + 1 - i), ("mod({i} + {s}, {n}) + 1",
                                                                     lambda i, n, s: (i + s) % n + 1),
                     ("mod({i} * {s}, {n}) + 1", lambda i, n, s: i * s % n + 1)),
}


def _k_indirect(p: Program, race: bool) -> tuple[list[str], str]:
    """Updates through an index array that holds duplicates (race) or a permutation (no race).

    Duplicates sit in different quarters of the iteration space, so with a static schedule they land on different
    threads (which lets ThreadSanitizer see them); odd multipliers of a power-of-two size give permutations."""
    r, i = p.rng, p.i
    ix = p.name("idx")
    base = 0 if p.c else 1
    prelude: list[str] = []
    if r.random() < 0.3:
        p.heap, p.n_val = False, r.randint(8, 16)
        m = p.n_val
        vals = r.sample(range(m), m)
        if race:
            vals[r.randrange(m - m // 4, m)] = vals[r.randrange(m // 4)]
        vals = [v + base for v in vals]
        p.int_arrays.append((ix, 0, vals))
    else:
        p.n_val = m = r.choice((64, 128, 256, 512, 1024))
        text, fn = r.choice(_IDX_FORMS[(p.c, race)])
        s = r.choice((3, 5, 7, 9, 11))
        vals = [fn(k, m, s) for k in range(base, m + base)]
        p.int_arrays.append((ix, 0, None))
        prelude = p.loop([p.st(f"{p.ref(ix, i)} = {text.format(i=i, n=p.size, s=s)}")])
    a, b = p.arr(), p.arr()
    target, bi = p.ref(a, p.ref(ix, i)), p.ref(b, i)
    stmt = r.choice((f"{target} += {bi}", f"{target} = {target} + {bi} * 2")) if p.c else f"{target} = {target} + {bi}"
    p.summed.append(a)
    kernel = [*prelude, *p.par_for("", p.loop([p.st(stmt)]))]
    if not race:
        return kernel, f"`{ix}` is a permutation, so every iteration updates a different element of `{a}`"
    k1 = next(k for k in range(m) if vals.index(vals[k]) != k)
    k0 = vals.index(vals[k1])
    return kernel, (f"`{ix}` holds repeated indices: iterations {k0 + base} and {k1 + base} both update "
                    f"`{p.ref(a, str(vals[k1]))}`, so two threads can write the same element of `{a}` at once")


def _k_atomic(p: Program, race: bool) -> tuple[list[str], str]:
    """A shared counter or histogram updated by many iterations, bare or under atomic / critical."""
    r, i = p.rng, p.i
    ai = p.ref(p.arr(), i)
    if r.random() < 0.5:
        v = p.scalar("cnt", "int" if p.c else "integer")
        upd = p.st(r.choice((f"{v}++", f"{v} += 1", f"{v} = {v} + 1")) if p.c else f"{v} = {v} + 1")
        p.shown.append(v)
        yes = f"`{v}` is incremented by many threads without atomic or critical protection, so updates are lost"
    else:
        v, nb = p.name("hist"), r.choice((4, 5, 8, 10))
        p.int_arrays.append((v, nb, []))
        slot = p.ref(v, f"(int){ai} % {nb}" if p.c else f"mod(int({ai}), {nb}) + 1")
        upd = p.st(r.choice((f"{slot}++", f"{slot} += 1")) if p.c else f"{slot} = {slot} + 1")
        p.shown.append(p.ref(v, p.first()))
        yes = f"`{v}` has only {nb} bins, so iterations on different threads increment the same bin without " \
              "atomic or critical protection"
    sync = "none" if race else r.choice(("atomic", "atomic update", "critical"))
    body = [upd] if race else p.block(sync, [upd]) if sync == "critical" else [p.omp(sync), upd]
    if p.shown[-1] == v:  # the counter counts the elements above a threshold
        k = r.randint(2, 5)
        body = ([f"if ({ai} > {k}) {{", *indent(body), "}"] if p.c else
                [f"if ({ai} > {k}) then", *indent(body), "end if"])
    no = f"every update of `{v}` is protected by an omp {sync.split()[0]} directive, so increments cannot conflict"
    return p.par_for("", p.loop(body)), yes if race else no


def _k_nested(p: Program, race: bool) -> tuple[list[str], str]:
    """A 2-D stencil in nested loops: the dependence is carried by a parallel loop (race) or only by a sequential one.

    Shapes: the outer loop parallel (the inner one sequential), the inner loop parallel inside a sequential outer
    loop, or both through collapse(2). C arrays are row-major ``a[row][col]``, Fortran ones ``a(row, col)`` with the
    column loop outside, as each language's code is written."""
    r = p.rng
    p.n_val = r.choice((16, 32, 50, 64, 100, 128))
    a, b = p.mat(), p.mat()
    row, col = p.i, p.j
    outer, inner = (row, col) if p.c else (col, row)
    shape = r.choice(("outer", "inner", "collapse"))
    parallel = {"outer": {outer}, "inner": {inner}, "collapse": {outer, inner}}[shape]
    d = r.choice((1, 1, 2))
    carried: str | None = None  # the loop variable that carries the dependence, None for no dependence
    if race:
        carried = r.choice(sorted(parallel))
    elif shape != "collapse":
        carried = r.choice(sorted({outer, inner} - parallel))
    subs = {row: row, col: col}
    if carried:
        subs[carried] = f"{carried}{p.sp}-{p.sp}{d}"
    stmt = p.st(f"{p.ref2(a, row, col)} = {p.ref2(a, subs[row], subs[col])} + {p.ref2(b, row, col)}")
    lows = {v: (str(d) if p.c else str(d + 1)) if v == carried else None for v in (outer, inner)}
    if shape == "inner":
        body = p.par_for("", p.loop([stmt], lo=lows[inner], var=inner))
        kernel = p.loop(body, lo=lows[outer], var=outer)
    else:
        declared = p.c and p.in_for
        clause = " collapse(2)" if shape == "collapse" else f" private({inner})" if p.c and not declared else ""
        kernel = p.par_for(clause, p.loop(p.loop([stmt], lo=lows[inner], var=inner), lo=lows[outer], var=outer))
    if carried and race:
        why = (f"`{a}` has a dependence carried by the parallel loop over `{carried}`: the element read as "
               f"`{p.ref2(a, subs[row], subs[col])}` is written by another iteration of `{carried}`, which may run "
               "at the same time on another thread")
    elif carried:
        other = next(iter(parallel))
        why = (f"`{a}` depends only on elements of earlier iterations of the sequential loop over `{carried}`; the "
               f"parallel loop over `{other}` gives each thread its own elements")
    else:
        why = f"`{a}` is only accessed at its own element in every iteration of the collapsed loops"
    return kernel, why


def _k_offload(p: Program, race: bool) -> tuple[list[str], str]:
    """A loop offloaded with target teams distribute parallel for / do: a sum with or without a reduction clause,
    or a loop with or without a loop-carried dependence. Without a device it runs on the host."""
    r = p.rng
    kind = "sum" if r.random() < 0.5 else "carried"

    def sec(x: str) -> str:
        return f"{x}[0:{p.size}]" if p.c else x

    if kind == "sum":
        a = p.arr()
        v = p.scalar("acc")
        body = [p.st(r.choice((f"{v} += {p.ref(a, p.i)}", f"{v} = {v} + {p.ref(a, p.i)}")) if p.c else
                     f"{v} = {v} + {p.ref(a, p.i)}")]
        maps = f" map(to: {sec(a)}) map(tofrom: {v})" + ("" if race else f" reduction(+:{v})")
        p.shown.append(v)
        why = (f"every iteration, across teams and threads, updates `{v}` without a reduction clause, so concurrent "
               f"updates of the mapped `{v}` are lost") if race else \
              (f"`{v}` is combined through reduction(+:{v}) across the teams and threads of the target region")
        lo = hi = None
    else:
        dep = r.choice(("flow", "anti", "back") if race else ("other", "same"))
        lo, hi, stmt, why = _dependence(p, dep, r.choice((1, 1, 2)), "another team or thread")
        body = [p.st(stmt)]
        written, read = (p.arrays[-1], p.arrays[-3:-1]) if dep == "other" else (p.arrays[-2], p.arrays[-1:])
        maps = f" map(tofrom: {sec(written)}) map(to: {', '.join(sec(x) for x in read)})"
        why = f"in the target region, {why}"
    directive = f"target teams distribute parallel {'for' if p.c else 'do'}{maps}"
    loop = p.loop(body, lo, hi)
    end = [p.omp("end target teams distribute parallel do")] if not p.c else []
    return [p.omp(directive), *loop, *end], why


def _k_function_state(p: Program, race: bool) -> tuple[list[str], str]:
    """A parallel loop calls a helper function that keeps state across calls (a static / SAVE local, or a shared
    outer variable) or uses only its arguments and automatic locals."""
    r = p.rng
    fn, st = p.name("helper"), p.name("state")
    a, b = p.arr(), p.arr()
    ty, k = p.ty, r.randint(2, 5)
    mode = r.choice(("static_local", "shared_outer")) if race else r.choice(("local", "local", "pointer"))
    x = p.name("tmp")
    if p.c:
        if mode == "static_local":
            p.helpers += [f"static {ty} {fn}({ty} {x}) {{", f"    static {ty} {st} = 0;", f"    {st} = {st} + {x};",
                          f"    return {st} * {k};", "}"]
        elif mode == "shared_outer":
            p.globals.append(f"static {ty} {st};")
            p.helpers += [f"static {ty} {fn}({ty} {x}) {{", f"    {st} = {x} * {k};", f"    return {st} + 1;", "}"]
        elif mode == "local":
            p.helpers += [f"static {ty} {fn}({ty} {x}) {{", f"    {ty} {st} = {x} * {k};", f"    return {st} + 1;",
                          "}"]
        else:
            p.helpers += [f"static void {fn}({ty} *{st}, {ty} {x}) {{", f"    *{st} = {x} * {k} + 1;", "}"]
        call = (f"{fn}(&{p.ref(b, p.i)}, {p.ref(a, p.i)});" if mode == "pointer" else
                f"{p.ref(b, p.i)} = {fn}({p.ref(a, p.i)});")
    else:
        if mode == "shared_outer":
            p.scalars.append((st, ty))
        res = p.name("tmp")
        if mode == "pointer":
            p.helpers += [f"subroutine {fn}({res}, {x})", f"    {ty}, intent(out) :: {res}",
                          f"    {ty}, intent(in) :: {x}", f"    {res} = {x} * {k} + 1", f"end subroutine {fn}"]
            call = f"call {fn}({p.ref(b, p.i)}, {p.ref(a, p.i)})"
        else:
            own = {"static_local": [r.choice((f"    {ty}, save :: {st} = 0", f"    {ty} :: {st} = 0"))],
                   "shared_outer": [], "local": [f"    {ty} :: {st}"]}[mode]
            value = f"{st} + {x}" if mode == "static_local" else f"{x} * {k}"
            p.helpers += [f"function {fn}({x}) result({res})", f"    {ty}, intent(in) :: {x}", f"    {ty} :: {res}",
                          *own, f"    {st} = {value}", f"    {res} = {st} + 1", f"end function {fn}"]
            call = f"{p.ref(b, p.i)} = {fn}({p.ref(a, p.i)})"
    p.summed.append(b)
    if mode == "shared_outer":
        p.shown.append(st)  # read after the loop, so the compiler keeps every store to it
    why = {"static_local": f"`{st}` in `{fn}` keeps its value between calls (static storage), so the threads calling "
                           f"`{fn}` at the same time update the same `{st}`",
           "shared_outer": f"`{fn}` writes `{st}`, which lives outside the function and is shared, so concurrent "
                           "calls from the parallel loop write it at the same time",
           "local": f"`{st}` is an automatic local of `{fn}`, so each call has its own copy, and each iteration "
                    f"writes its own element of `{b}`",
           "pointer": f"`{fn}` writes only through its argument, which is a different element of `{b}` in every "
                      "iteration"}
    return p.par_for("", p.loop([call])), why[mode]


KERNELS: dict[str, Kernel] = {
    "missing_private": _k_private, "missing_reduction": _k_reduction, "loop_carried": _k_carried,
    "missing_barrier": _k_barrier, "missing_taskwait": _k_taskwait, "simd_dependence": _k_simd,
    "indirect_access": _k_indirect, "missing_atomic": _k_atomic, "nested_dependence": _k_nested,
    "sections": _k_sections, "locks": _k_lock, "task_depend": _k_task_depend, "offload": _k_offload,
    "function_state": _k_function_state,
}
