"""Per-pattern OpenMP kernels for ``generator``: the C and Fortran core of every pattern class, racy or race-free.

Each kernel takes a program under construction (``programs.Program``) and ``race`` (whether to build the racy
variant), declares its arrays and scalars on it, and returns the program's OpenMP part as lines indented by four
spaces per level, plus the one-sentence reason for the label (naming the variable first). ``KERNELS`` maps every
name in ``generator.PATTERNS`` to its kernel. Kernels draw only from ``p.rng``, in a fixed order, so a program is a
pure function of its seed; reordering draws changes every generated item.

Not an entry point: use ``generator.generate_race_items``.
Test: ``pytest tests/data/race/test_generator.py`` (compiles every sampled program with gcc / gfortran -fopenmp).
"""

from __future__ import annotations

from collections.abc import Callable

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


def _k_barrier(p: Program, race: bool) -> tuple[list[str], str]:
    return _k_nowait(p, race) if p.rng.random() < 0.5 else _k_master(p, race)


def _k_nowait(p: Program, race: bool) -> tuple[list[str], str]:
    """Two worksharing loops in one region; the second reads what other threads wrote in the first."""
    r, i, n = p.rng, p.i, p.size
    a, b, c = p.arr(), p.arr(), p.arr()
    s = r.randint(2, 8)
    read = p.ref(a, r.choice((f"{n} - 1 - {i}", f"({i} + {s}) % {n}") if p.c else
                             (f"{n} + 1 - {i}", f"mod({i} + {s - 1}, {n}) + 1")))
    mode = "nowait" if race else r.choice(("implicit", "explicit"))
    first = p.loop([p.st(f"{p.ref(a, i)} = {p.ref(b, i)} * 2 + 1")])
    second = p.loop([p.st(f"{p.ref(c, i)} = {read} + {p.ref(b, i)}")])
    wait = " nowait" if mode != "implicit" else ""
    bar = [p.omp("barrier")] if mode == "explicit" else []
    if p.c:
        inner = [p.omp(f"for{wait}"), *first, *bar, p.omp("for"), *second]
        region = [p.omp("parallel"), "{", *indent(inner), "}"]
    else:
        inner = [p.omp("do"), *first, p.omp(f"end do{wait}"), *bar, p.omp("do"), *second, p.omp("end do")]
        region = [p.omp("parallel"), *indent(inner), p.omp("end parallel")]
    p.summed.append(c)
    why = {"nowait": f"`{a}` is read as `{read}` in the second loop, but the nowait removes the barrier after the "
                     "first loop, so the element can be read before the thread that writes it has done so",
           "implicit": f"`{a}` is complete before the second loop reads `{read}`: the first loop ends with an "
                       "implicit barrier",
           "explicit": f"`{a}` is complete before the second loop reads `{read}`: the explicit barrier after the "
                       "nowait loop makes every thread wait"}
    return region, why[mode]


def _k_master(p: Program, race: bool) -> tuple[list[str], str]:
    """One thread sets a shared scalar that all threads then read in a worksharing loop."""
    r, i = p.rng, p.i
    v = p.scalar("bar")
    a, b = p.arr(), p.arr()
    mode = r.choice(("master", "single nowait")) if race else r.choice(("single", "master barrier"))
    write = p.st(f"{v} = {p.ref(a, p.first())} * 2 + 1")
    kind = mode.split()[0]
    if p.c:
        block = p.block(mode if mode != "master barrier" else "master", [write])
    else:
        block = p.block(kind, [write], end="end single nowait" if mode == "single nowait" else None)
    bar = [p.omp("barrier")] if mode == "master barrier" else []
    loop = p.loop([p.st(f"{p.ref(b, i)} = {p.ref(a, i)} + {v}")])
    work = [p.omp("for"), *loop] if p.c else [p.omp("do"), *loop, p.omp("end do")]
    inner = [*block, *bar, *work]
    region = [p.omp("parallel"), "{", *indent(inner), "}"] if p.c else \
        [p.omp("parallel"), *indent(inner), p.omp("end parallel")]
    p.summed.append(b)
    p.shown.append(v)
    why = {"master": f"`{v}` is written inside master, which has no implied barrier, while the other threads "
                     "already read it in the following loop",
           "single nowait": f"`{v}` is written inside single nowait, so the other threads do not wait and can read "
                            "it in the following loop before it is written",
           "single": f"`{v}` is written inside single, whose implied barrier makes every thread wait before the "
                     "loop reads it",
           "master barrier": f"`{v}` is written inside master and the explicit barrier after it makes every thread "
                             "wait before the loop reads it"}
    return region, why[mode]


def _k_taskwait(p: Program, race: bool) -> tuple[list[str], str]:
    """Tasks write shared scalars that the generating thread then reads, with or without a taskwait in between."""
    r = p.rng
    a = p.arr()
    two = r.random() < 0.5
    outs = [p.scalar("task") for _ in range(1 + two)]
    q = p.scalar("task")
    exprs = [f"{p.ref(a, p.first())} * 2 + 1", f"{p.ref(a, p.last())} + {p.ref(a, p.first())}"]
    tasks: list[str] = []
    for v, expr in zip(outs, exprs, strict=False):
        clause = f" shared({v})" if r.random() < 0.5 else ""
        tasks += p.block(f"task{clause}", [p.st(f"{v} = {expr}")], end="end task")
    read = p.st(f"{q} = " + (f"{outs[0]} + {outs[1]}" if two else f"{outs[0]} * 2"))
    mode = r.choice(("missing", "late")) if race else "present"
    wait = [p.omp("taskwait")]
    body = [*tasks, *(wait * (mode == "present")), read, *(wait * (mode == "late"))]
    single = p.block("single", body)
    region = [p.omp("parallel"), *single] if p.c and r.random() < 0.3 else p.block("parallel", single)
    p.shown.append(q)
    names = " and ".join(f"`{v}`" for v in outs)
    written = f"{names} {'are' if two else 'is'} written by {'tasks' if two else 'a task'}"
    why = {"missing": f"{written} and read into `{q}` without a taskwait, so the read can happen while a task is "
                      "still writing",
           "late": f"{written} but read into `{q}` before the taskwait, so the read can overlap the write",
           "present": f"{written} and the taskwait makes the generating thread wait for {'them' if two else 'it'} "
                      f"before `{q}` reads the result"}
    return region, why[mode]


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


def _k_sections(p: Program, race: bool) -> tuple[list[str], str]:
    """Two sections of a parallel sections construct that write (or read) one shared variable, or separate ones, or
    update it under critical."""
    r = p.rng
    a = p.arr()
    v, w = p.scalar("acc"), p.scalar("acc")
    i = p.i
    declared = p.c and p.in_for
    mode = r.choice(("write_write", "write_read")) if race else r.choice(("disjoint", "disjoint", "critical"))
    first = p.loop([p.st(f"{v} = {v} + {p.ref(a, i)}")], hi=None)
    k = r.randint(2, 5)
    if mode == "write_write":
        second = [p.st(f"{v} = {p.ref(a, p.first())} * {k}")]
    elif mode == "write_read":
        second = [p.st(f"{w} = {v} + {k}")]
    elif mode == "disjoint":
        second = p.loop([p.st(f"{w} = {w} + {p.ref(a, i)} * {k}")])
    else:
        first = p.loop(p.block("critical", [p.st(f"{v} = {v} + {p.ref(a, i)}")]))
        second = p.block("critical", [p.st(f"{v} = {v} + {k}")])
    clause = f" private({i})" if p.c and not declared else ""
    parts = ([*p.block("section", first), *p.block("section", second)] if p.c else  # Fortran: no end section
             [p.omp("section"), *indent(first), p.omp("section"), *indent(second)])
    if p.c:
        region = [p.omp(f"parallel sections{clause}"), "{", *indent(parts), "}"]
    else:
        region = [p.omp("parallel sections"), *indent(parts), p.omp("end parallel sections")]
    p.shown += [v, w]
    why = {"write_write": f"`{v}` is written in both sections, which run at the same time on different threads",
           "write_read": f"`{v}` is written in one section and read into `{w}` in the other, and the sections run "
                         "concurrently with no ordering between them",
           "disjoint": f"each section writes its own variable (`{v}` and `{w}`) and the array `{a}` is only read, so "
                       "the sections share nothing they write",
           "critical": f"both sections update `{v}` only inside critical regions, which exclude each other"}
    return region, why[mode]


def _k_lock(p: Program, race: bool) -> tuple[list[str], str]:
    """A shared accumulator updated in a parallel loop with OpenMP locks held around the update, or not always."""
    r = p.rng
    p.need_omp = True
    lk = p.name("lock")
    a = p.arr()
    v = p.scalar("acc")
    ai = p.ref(a, p.i)
    nest = not race and r.random() < 0.3
    kind = "nest_lock" if nest else "lock"
    p.decls.append(f"omp_{kind}_t {lk};" if p.c else f"integer(kind=omp_{kind}_kind) :: {lk}")

    def call(routine: str) -> str:
        return f"omp_{routine}(&{lk});" if p.c else f"call omp_{routine}({lk})"

    update = p.st(r.choice((f"{v} += {ai}", f"{v} = {v} + {ai}")) if p.c else f"{v} = {v} + {ai}")
    mode = r.choice(("after", "branch")) if race else ("nested" if nest else r.choice(("held", "test")))
    set_, unset = call(f"set_{kind}"), call(f"unset_{kind}")
    if mode == "after":
        body = [set_, unset, update]
    elif mode == "branch":
        even = f"{p.i} % 2 == 0" if p.c else f"mod({p.i}, 2) == 0"
        body = ([f"if ({even}) {{", *indent([set_, update, unset]), "} else {", *indent([update]), "}"] if p.c else
                [f"if ({even}) then", *indent([set_, update, unset]), "else", *indent([update]), "end if"])
    elif mode == "test":
        spin = ([f"while (!omp_test_lock(&{lk})) {{", "}"] if p.c else
                [f"do while (.not. omp_test_lock({lk}))", "end do"])
        body = [*spin, update, unset]
    elif mode == "nested":
        body = [set_, set_, update, unset, unset]
    else:
        body = [set_, update, unset]
    kernel = [call(f"init_{kind}"), *p.par_for("", p.loop(body)), call(f"destroy_{kind}")]
    p.shown.append(v)
    why = {"after": f"`{v}` is updated after `{lk}` is released, so threads update it concurrently",
           "branch": f"`{v}` is updated under `{lk}` only in even iterations; the odd ones update it without the "
                     "lock, at the same time as other threads",
           "held": f"every update of `{v}` happens while `{lk}` is held, so the updates exclude each other",
           "test": f"every update of `{v}` happens after omp_test_lock has acquired `{lk}` and before it is released",
           "nested": f"every update of `{v}` happens while the nestable lock `{lk}` is held, so the updates exclude "
                     "each other"}
    return kernel, why[mode]


def _k_task_depend(p: Program, race: bool) -> tuple[list[str], str]:
    """Sibling tasks ordered (or not) by depend clauses: one writes a shared scalar that the others read."""
    r = p.rng
    a = p.arr()
    x, y = p.scalar("task"), p.scalar("task")
    z = p.scalar("task") if r.random() < 0.4 else None
    mode = r.choice(("no_depend", "both_in", "writer_only")) if race else r.choice(("out_in", "inout_in", "out_inout"))
    w_dep, r_dep = {"no_depend": ("", ""), "both_in": ("in", "in"), "writer_only": ("out", ""),
                    "out_in": ("out", "in"), "inout_in": ("inout", "in"), "out_inout": ("out", "inout")}[mode]

    def task(dep: str, var: str, stmt: str) -> list[str]:
        return p.block(f"task depend({dep}: {var})" if dep else "task", [p.st(stmt)], end="end task")

    tasks = task(w_dep, x, f"{x} = {p.ref(a, p.first())} * 2 + 1")
    tasks += task(r_dep, x, f"{y} = {x} + {r.randint(1, 9)}")
    if z:
        tasks += task("in" if r_dep else "", x, f"{z} = {x} * {r.randint(2, 4)}")
        p.shown.append(z)
    region = p.block("parallel", p.block("single", [*tasks, *([p.omp("taskwait")] * (r.random() < 0.5))]))
    p.shown += [x, y]
    why = {"no_depend": f"`{x}` is written by one task and read by another, and no depend clause orders the two "
                        "tasks, so they can run at the same time",
           "both_in": f"`{x}` is written by a task that declares only depend(in: {x}), and in dependences do not "
                      "order tasks among themselves, so the writer and the reader can run at the same time",
           "writer_only": f"`{x}` is written by a task with depend(out: {x}), but the task reading it declares no "
                          "dependence, so nothing makes it wait for the writer",
           "out_in": f"`{x}` is written by a task with depend(out: {x}) and read by tasks with depend(in: {x}), so "
                     "every reader waits for the writer",
           "inout_in": f"`{x}` is written by a task with depend(inout: {x}) and read by tasks with depend(in: {x}), "
                       "so every reader waits for the writer",
           "out_inout": f"`{x}` is written by a task with depend(out: {x}) and the reading task declares "
                        f"depend(inout: {x}), so it runs only after the writer"}
    return region, why[mode]


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
