"""Synchronisation kernels for ``generator`` (``kernels`` holds the loop-level ones and ``KERNELS``): barriers
(``nowait`` and ``master`` forms), task waits, sections, locks and task dependences.

Same contract as every kernel of ``kernels``: a program under construction and ``race`` in, the OpenMP part as lines
and the reason for the label out; draws only from ``p.rng``, in a fixed order.

Not an entry point: use ``generator.generate_race_items``.
Test: ``pytest tests/data/race/test_generator.py``.
"""

from __future__ import annotations

from hpcrl_core.data.race.programs import Program, indent


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
    bar = [p.omp("barrier")] if mode == "explicit" else []
    region = p.region([*p.workshare(first, nowait=mode != "implicit"), *bar, *p.workshare(second)])
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
    region = p.region([*block, *bar, *p.workshare(loop)])
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
