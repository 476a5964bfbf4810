"""Synthetic OpenMP data-race items for the ``race_c`` and ``race_fortran`` families, labelled by construction.

Each item is a small, complete OpenMP program (``main`` / ``program``) in the manner of DataRaceBench's
micro-benchmarks, built from one pattern class of ``PATTERNS``; every pattern comes as a racy program and as its
race-free counterpart (private/reduction clause, no dependence, barrier, taskwait, unique indices, atomic).
Names, sizes, element types, memory layout, loop bounds, brace style and harmless extra statements vary with the
seed; no identifier names the label. The same ``(language, per_pattern, seed)`` always gives the same records, and
item ``j`` of a pattern does not depend on ``per_pattern`` (a larger count extends a smaller one).

Labels follow OpenMP semantics, not what one run shows: an ``omp simd`` loop with a loop-carried dependence is a
race (SIMD lanes run iterations concurrently) although no second thread exists; ThreadSanitizer cannot see those
(see ``race_tsan``).

Run: ``python -c "from hpcrl_core.data.race_gen import generate_race_items as g; print(g('c', 2, 0)[0].question)"``
Test: ``pytest tests/data/test_race_gen.py`` (compiles every sampled program with gcc / gfortran -fopenmp).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable
from typing import Any

from hpcrl_core.data.schema import Record, assistant, messages
from hpcrl_core.errors import DataError

SYSTEM = "You are an expert in parallel programming with OpenMP in C, C++ and Fortran."
QUESTION = "Does the following OpenMP program contain a data race? Answer yes or no, then explain briefly."
SOURCE = "synthetic:race@1"
FAMILIES = {"c": "race_c", "fortran": "race_fortran"}
FENCES = {"c": "c", "fortran": "fortran"}
PATTERNS = ("missing_private", "missing_reduction", "loop_carried", "missing_barrier", "missing_taskwait",
            "simd_dependence", "indirect_access", "missing_atomic")

# Disjoint name pools, one per role. No name contains a label word (race, yes, no, safe, bug, DRB) and none
# shadows a C library function or a Fortran intrinsic (hence no sum, max, size, len, index, scale).
_POOLS: dict[str, tuple[str, ...]] = {
    "arr": ("a", "b", "c", "d", "e", "x", "y", "z", "u", "v", "w", "arr", "vec", "buf", "vals", "src", "dst",
            "grid", "coef", "lhs", "rhs", "f", "g"),
    "loop": ("i", "j", "k", "ii", "jj", "kk", "ix", "iy", "it"),
    "tmp": ("t", "tmp", "temp", "scratch", "work", "cur", "hold", "tval", "aux"),
    "acc": ("s", "total", "acc", "accum", "tot", "res", "dot", "psum", "agg"),
    "peak": ("peak", "top", "hi", "mx", "vmax", "biggest", "best"),
    "cnt": ("cnt", "hits", "tally", "matches", "events", "hitcount"),
    "hist": ("hist", "bins", "freq", "buckets", "h"),
    "idx": ("idx", "indx", "perm", "ind", "pos", "sel", "slot", "ord"),
    "task": ("p", "r", "left", "right", "part1", "part2", "first", "second", "lo_part", "hi_part", "val1", "val2"),
    "bar": ("base", "offset", "shift", "bias", "factor", "level"),
    "size_c": ("n", "len", "size", "num", "dim", "nelem"),
    "size_f": ("n", "nn", "sz", "npts", "nx", "ntot"),
    "fn": ("fill", "init_value", "start_value", "make_value", "gen_value"),
    "prog": ("main_prog", "compute", "kernel", "loops", "driver", "demo", "calc"),
    "chk": ("chk", "checksum", "cs", "digest", "verify"),
}
_INIT_NOTES = ("initialise the inputs", "fill the input arrays", "set up the data")
_WORK_NOTES = ("main computation", "compute", "work loop", "the kernel")
Kernel = Callable[["_Prog", bool], tuple[list[str], str]]


def race_question(code: str, fence: str) -> str:
    """The user message for one program; ``fence`` is the code block's language tag (c, cpp, fortran)."""
    return f"{QUESTION}\n\n```{fence}\n{code.strip()}\n```"


def race_metadata(language: str, pattern: str | None, label: str, source_name: str | None = None) -> dict[str, Any]:
    """The metadata of every race record: exactly these keys, whatever the source."""
    return {"language": language, "pattern": pattern, "label": label, "tsan": None, "source_name": source_name}


def generate_race_items(language: str, per_pattern: int, seed: int) -> list[Record]:
    """``per_pattern`` racy ("yes") and ``per_pattern`` race-free ("no") programs for each of ``PATTERNS``.

    Args:
        language: "c" (family race_c) or "fortran" (family race_fortran).
        per_pattern: items per (pattern, label), as ``prepare.race.per_pattern`` in params.yaml.
        seed: every program is a pure function of (seed, language, pattern, item number).

    Raises:
        DataError: unknown language or a count below 1.
    """
    if language not in FAMILIES:
        raise DataError(f"race generator: language {language!r} is not supported; allowed: {', '.join(FAMILIES)}")
    if per_pattern < 1:
        raise DataError(f"race generator: per_pattern={per_pattern}; it must be >= 1 (items per pattern and label)")
    out: list[Record] = []
    seen: set[str] = set()
    for pattern in PATTERNS:
        for j in range(2 * per_pattern):
            label = "no" if j % 2 else "yes"
            code, reason = _program(language, pattern, label == "yes", seed, j, seen)
            out.append(Record(family=FAMILIES[language], answer=label,
                              prompt=messages(SYSTEM, race_question(code, FENCES[language])),
                              completion=assistant(f"{label}: {reason}."),
                              metadata=race_metadata(language, pattern, label),
                              provenance={"source": SOURCE, "seed": seed, "index": len(out)}))
    return out


def _program(language: str, pattern: str, race: bool, seed: int, j: int, seen: set[str]) -> tuple[str, str]:
    """A program not yet in ``seen`` (redrawn deterministically on the rare collision) and its reason."""
    for attempt in range(100):
        key = f"{seed}:{language}:{pattern}:{j}:{attempt}".encode()
        prog = _Prog(random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big")), language)
        kernel, reason = _KERNELS[pattern](prog, race)
        code = prog.render(kernel)
        if code not in seen:
            seen.add(code)
            return code, reason
    raise DataError(f"race generator: could not draw a new {pattern} program for item {j}")  # pragma: no cover


def _ind(lines: list[str]) -> list[str]:
    return [f"    {x}" if x else x for x in lines]


class _Prog:
    """One program under construction: its names, declarations and style. Kernels add to it; ``render`` prints it."""

    def __init__(self, rng: random.Random, language: str) -> None:
        self.rng, self.c = rng, language == "c"
        self.used: set[str] = set()
        self.ty = rng.choice(("int", "long", "float", "double") if self.c else
                             ("integer", "real", "double precision", "real(8)"))
        self.heap = self.c and rng.random() < 0.3          # malloc'd arrays sized by a variable, else a macro
        self.n_val = rng.choice((64, 128, 200, 256, 500, 512, 1000, 1024, 2048))
        self.n = self.name("size_c" if self.c else "size_f")
        self.i = self.name("loop")
        self.in_for = self.c and rng.random() < 0.35        # C loops declare their index: for (int i = 0; ...)
        self.sp = rng.choice((" ", ""))                      # a[i + 1] or a[i+1]
        self.arrays: list[str] = []                          # element type, length n, filled by the init loop
        self.scalars: list[tuple[str, str]] = []             # (name, type), zero-initialised
        self.int_arrays: list[tuple[str, int, list[int] | None]] = []  # (name, length or 0 for n, None/[]/literal)
        self.top_ints: list[str] = []                        # loop indices declared at the top
        self.shown: list[str] = []                           # expressions printed at the end
        self.summed: list[str] = []                          # arrays folded into the printed output

    @property
    def size(self) -> str:
        return self.n.upper() if self.c and not self.heap else self.n

    def name(self, role: str) -> str:
        name = self.rng.choice([x for x in _POOLS[role] if x not in self.used])
        self.used.add(name)
        return name

    def arr(self) -> str:
        self.arrays.append(self.name("arr"))
        return self.arrays[-1]

    def scalar(self, role: str, ty: str | None = None) -> str:
        self.scalars.append((self.name(role), ty or self.ty))
        return self.scalars[-1][0]

    def ref(self, a: str, idx: str) -> str:
        return f"{a}[{idx}]" if self.c else f"{a}({idx})"

    def off(self, op: str, d: int) -> str:
        return f"{self.i}{self.sp}{op}{self.sp}{d}"

    def st(self, text: str) -> str:
        return f"{text};" if self.c else text

    def omp(self, directive: str) -> str:
        return f"#pragma omp {directive}" if self.c else f"!$omp {directive}"

    def first(self) -> str:
        return "0" if self.c else "1"

    def last(self) -> str:
        return f"{self.size} - 1" if self.c else self.size

    def loop(self, body: list[str], lo: str | None = None, hi: str | None = None, var: str | None = None,
             declare: bool | None = None) -> list[str]:
        """A counted loop over [lo, hi) in C or lo..hi in Fortran; the defaults cover the whole array."""
        v = var or self.i
        declare = self.in_for if declare is None else declare
        if not declare and v not in self.top_ints:
            self.top_ints.append(v)
        if not self.c:
            return [f"do {v} = {lo or '1'}, {hi or self.size}", *_ind(body), "end do"]
        head = f"for ({'int ' if declare else ''}{v} = {lo or '0'}; {v} < {hi or self.size}; {v}++)"
        if len(body) == 1 and not body[0].startswith("#") and self.rng.random() < 0.3:
            return [head, *_ind(body)]
        return [f"{head} {{", *_ind(body), "}"]

    def block(self, directive: str, body: list[str], end: str | None = None) -> list[str]:
        """A construct around ``body``: braces in C, an end directive in Fortran."""
        if self.c:
            if len(body) == 1 and self.rng.random() < 0.4:
                return [self.omp(directive), body[0]]
            return [self.omp(directive), "{", *_ind(body), "}"]
        return [self.omp(directive), *_ind(body), self.omp(end or f"end {directive.split()[0]}")]

    def par_for(self, clauses: str, loop: list[str]) -> list[str]:
        """``loop`` as a worksharing loop: the combined construct, or a parallel region holding a for / do."""
        split = self.rng.random() < 0.3
        if self.c:
            if split:
                return [self.omp("parallel"), "{", *_ind([self.omp(f"for{clauses}"), *loop]), "}"]
            return [self.omp(f"parallel for{clauses}"), *loop]
        if split:
            return [self.omp("parallel"), *_ind([self.omp(f"do{clauses}"), *loop, self.omp("end do")]),
                    self.omp("end parallel")]
        return [self.omp(f"parallel do{clauses}"), *loop, *([self.omp("end parallel do")] * self.rng.randint(0, 1))]

    def render(self, kernel: list[str]) -> str:
        lines = self._render_c(kernel) if self.c else self._render_f(kernel)
        return _layout_c(lines, self.rng) if self.c else _layout_f(lines, self.rng)

    def _fill(self, fn: str | None, k: int) -> str:
        i, m, c = self.i, self.rng.choice((5, 7, 9, 11, 13)), self.rng.randint(1, 4)
        if fn and k == 0:
            return f"{fn}({i})"
        if self.c:
            return self.rng.choice((f"{i} % {m} + {c}", f"({i} + {c}) % {m}", f"({i} % {m}) * 2 + {c}"))
        return self.rng.choice((f"mod({i}, {m}) + {c}", f"mod({i} + {c}, {m})", f"mod({i}, {m}) * 2 + {c}"))

    def _note(self, notes: tuple[str, ...]) -> list[str]:
        if self.rng.random() < 0.6:
            return []
        text = self.rng.choice(notes)
        return [f"! {text}"] if not self.c else [self.rng.choice((f"/* {text} */", f"// {text}"))]

    def _prelude(self, fn: str | None, omp_lib: bool) -> list[str]:
        """Init loop and harmless extras: values depend on the index only, so every run starts the same."""
        out = self._note(_INIT_NOTES)
        out += self.loop([self.st(f"{self.ref(a, self.i)} = {self._fill(fn, k)}") for k, a in enumerate(self.arrays)])
        if self.rng.random() < 0.25:
            a = self.ref(self.arrays[0], self.i)
            out += self.loop([self.st(f"{a} = {a} * 2")])
        if omp_lib and self.rng.random() < 0.5:
            out.append('printf("%d\\n", omp_get_max_threads());' if self.c else "print *, omp_get_max_threads()")
        return [*out, "", *self._note(_WORK_NOTES)]

    def _report(self) -> list[str]:
        exprs = list(self.shown)
        lines: list[str] = []
        if self.summed and self.rng.random() < 0.6:
            chk = self.scalar("chk", "double" if self.c else "double precision")
            lines = self.loop([self.st(f"{chk} = {chk} + " + " + ".join(self.ref(a, self.i) for a in self.summed))])
            exprs.insert(0, chk)
        else:
            exprs += [self.ref(a, self.rng.choice((self.first(), self.last()))) for a in self.summed]
        if self.c:
            fmt = " ".join(["%g"] * len(exprs))
            return [*lines, f'printf("{fmt}\\n", {", ".join(f"(double){e}" for e in exprs)});']
        return [*lines, self.rng.choice(("print *, ", "write(*, *) ")) + ", ".join(exprs)]

    def _c_arrays(self) -> list[str]:
        n, ty = self.size, self.ty
        if self.heap:
            out = [f"{ty} *{a} = malloc({n} * sizeof *{a});" for a in self.arrays]
        elif self.rng.random() < 0.5:
            out = [f"{ty} {', '.join(f'{a}[{n}]' for a in self.arrays)};"]
        else:
            out = [f"{ty} {a}[{n}];" for a in self.arrays]
        for name, length, vals in self.int_arrays:
            if vals is None:
                out.append(f"int *{name} = malloc({n} * sizeof *{name});" if self.heap else f"int {name}[{n}];")
            else:
                out.append(f"int {name}[{length or n}] = {{{', '.join(map(str, vals)) or '0'}}};")
        return out

    def _render_c(self, kernel: list[str]) -> list[str]:
        r = self.rng
        fn, omp_lib = (self.name("fn") if r.random() < 0.3 else None), r.random() < 0.3
        body = [*self._prelude(fn, omp_lib), *kernel, "", *self._report()]
        glob = not self.heap and r.random() < 0.3
        arrays = self._c_arrays()
        head = ["#include <stdio.h>", *(["#include <stdlib.h>"] * self.heap), *(["#include <omp.h>"] * omp_lib), ""]
        if not self.heap:
            head += [f"#define {self.size} {self.n_val}", ""]
        if glob:
            head += [*(f"static {a}" for a in arrays), ""]
        if fn:
            k = self.name("loop")
            head += [f"static {self.ty} {fn}(int {k}) {{", f"    return ({self.ty})({k} % 7 + 1);", "}", ""]
        decl = ([] if glob else arrays) + [f"{t} {s} = 0;" for s, t in self.scalars]
        decl += [f"int {', '.join(self.top_ints)};"] if self.top_ints else []
        r.shuffle(decl)
        if self.heap:
            decl.insert(0, f"{r.choice(('int', 'const int'))} {self.n} = {self.n_val};")
        frees = [f"free({x});" for x in self.arrays + [a for a, _, v in self.int_arrays if v is None]] * self.heap
        sig = r.choice(("int main(void)", "int main()", "int main(int argc, char *argv[])"))
        return [*head, f"{sig} {{", *_ind([*decl, "", *body, *frees, "return 0;"]), "}"]

    def _render_f(self, kernel: list[str]) -> list[str]:
        r, n, ty = self.rng, self.size, self.ty
        fn, omp_lib = (self.name("fn") if r.random() < 0.3 else None), r.random() < 0.3
        body = [*self._prelude(fn, omp_lib), *kernel, "", *self._report()]
        alloc = r.random() < 0.3
        decl = [f"integer, parameter :: {n} = {self.n_val}", f"integer :: {', '.join(self.top_ints)}"]
        if alloc:
            decl.append(f"{ty}, allocatable :: {', '.join(f'{a}(:)' for a in self.arrays)}")
        elif r.random() < 0.5:
            decl.append(f"{ty}, dimension({n}) :: {', '.join(self.arrays)}")
        else:
            decl.append(f"{ty} :: {', '.join(f'{a}({n})' for a in self.arrays)}")
        execs = [f"allocate({', '.join(f'{a}({n})' for a in self.arrays)})"] if alloc else []
        for name, length, vals in self.int_arrays:
            literal = ", ".join(map(str, vals or []))
            decl.append(f"integer :: {name}({length or n})" + (r.choice((f" = [{literal}]", f" = (/ {literal} /)"))
                                                              if vals else ""))
            execs += [f"{name} = 0"] if vals == [] else []
        for ty_ in dict.fromkeys(t for _, t in self.scalars):
            decl.append(f"{ty_} :: {', '.join(s for s, t in self.scalars if t == ty_)}")
        execs += [f"{s} = 0" for s, _ in self.scalars]
        dealloc = [f"deallocate({', '.join(self.arrays)})"] if alloc else []
        prog = self.name("prog")
        out = [f"program {prog}", *_ind([*(["use omp_lib"] * omp_lib), "implicit none", *decl, "", *execs, *body,
                                         *dealloc])]
        if fn:
            k, v = self.name("loop"), self.name("tmp")
            out += ["contains", *_ind([f"function {fn}({k}) result({v})", f"    integer, intent(in) :: {k}",
                                       f"    {ty} :: {v}", f"    {v} = mod({k}, 7) + 1", f"end function {fn}"])]
        return [*out, r.choice((f"end program {prog}", "end program", "end"))]


def _layout_c(lines: list[str], rng: random.Random) -> str:
    """Re-indent (2 or 4 spaces or tabs), optionally Allman braces and pragmas flush left."""
    unit, allman, flush = rng.choice(("    ", "    ", "  ", "\t")), rng.random() < 0.35, rng.random() < 0.4
    out = []
    for line in lines:
        text = line.lstrip(" ")
        pad = "" if flush and text.startswith("#pragma") else unit * ((len(line) - len(text)) // 4)
        if allman and text.endswith(" {"):
            out += [pad + text[:-2], pad + "{"]
        else:
            out.append(pad + text if text else "")
    return "\n".join(out)


def _layout_f(lines: list[str], rng: random.Random) -> str:
    """Re-indent (2 to 4 spaces), optionally upper-case directives, ``enddo`` and directives flush left."""
    unit, upper, short, flush = rng.choice(("  ", "   ", "    ")), rng.random() < 0.4, rng.random() < 0.3, \
        rng.random() < 0.3
    out = []
    for line in lines:
        text = line.lstrip(" ")
        level = (len(line) - len(text)) // 4
        if text.startswith("!$omp") and upper:
            text = re.sub(r"[^()]+(?=\(|$)|\)[^()]*", lambda m: m.group().upper(), text)
        elif short and text in ("end do", "end if"):
            text = text.replace(" ", "")
        pad = "" if flush and text.lower().startswith("!$omp") else unit * level
        out.append(pad + text if text else "")
    return "\n".join(out)


# Kernels: each returns the program's OpenMP part and the one-sentence reason (naming the variable first).

def _k_private(p: _Prog, race: bool) -> tuple[list[str], str]:
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


def _k_inner_index(p: _Prog, race: bool) -> tuple[list[str], str]:
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


def _k_reduction(p: _Prog, race: bool) -> tuple[list[str], str]:
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


def _dependence(p: _Prog, kind: str, d: int, who: str) -> tuple[str | None, str | None, str, str]:
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


def _k_carried(p: _Prog, race: bool) -> tuple[list[str], str]:
    """A parallel loop with or without a loop-carried dependence."""
    kind = p.rng.choice(("flow", "anti", "back") if race else ("other", "same"))
    lo, hi, stmt, why = _dependence(p, kind, p.rng.choice((1, 1, 2, 3)), "another thread")
    return p.par_for("", p.loop([p.st(stmt)], lo, hi)), why


def _k_simd(p: _Prog, race: bool) -> tuple[list[str], str]:
    """An ``omp simd`` loop (one thread) with or without a loop-carried true dependence."""
    kind = p.rng.choice(("flow", "back") if race else ("other", "same"))
    lo, hi, stmt, why = _dependence(p, kind, p.rng.choice((1, 2, 3, 4)), "another SIMD lane")
    end = [p.omp("end simd")] if not p.c and p.rng.random() < 0.5 else []
    return [p.omp("simd"), *p.loop([p.st(stmt)], lo, hi), *end], f"under omp simd, {why}"


def _k_barrier(p: _Prog, race: bool) -> tuple[list[str], str]:
    return _k_nowait(p, race) if p.rng.random() < 0.5 else _k_master(p, race)


def _k_nowait(p: _Prog, race: bool) -> tuple[list[str], str]:
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
        region = [p.omp("parallel"), "{", *_ind(inner), "}"]
    else:
        inner = [p.omp("do"), *first, p.omp(f"end do{wait}"), *bar, p.omp("do"), *second, p.omp("end do")]
        region = [p.omp("parallel"), *_ind(inner), p.omp("end parallel")]
    p.summed.append(c)
    why = {"nowait": f"`{a}` is read as `{read}` in the second loop, but the nowait removes the barrier after the "
                     "first loop, so the element can be read before the thread that writes it has done so",
           "implicit": f"`{a}` is complete before the second loop reads `{read}`: the first loop ends with an "
                       "implicit barrier",
           "explicit": f"`{a}` is complete before the second loop reads `{read}`: the explicit barrier after the "
                       "nowait loop makes every thread wait"}
    return region, why[mode]


def _k_master(p: _Prog, race: bool) -> tuple[list[str], str]:
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
    region = [p.omp("parallel"), "{", *_ind(inner), "}"] if p.c else \
        [p.omp("parallel"), *_ind(inner), p.omp("end parallel")]
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


def _k_taskwait(p: _Prog, race: bool) -> tuple[list[str], str]:
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


def _k_indirect(p: _Prog, race: bool) -> tuple[list[str], str]:
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


def _k_atomic(p: _Prog, race: bool) -> tuple[list[str], str]:
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
        body = ([f"if ({ai} > {k}) {{", *_ind(body), "}"] if p.c else
                [f"if ({ai} > {k}) then", *_ind(body), "end if"])
    no = f"every update of `{v}` is protected by an omp {sync.split()[0]} directive, so increments cannot conflict"
    return p.par_for("", p.loop(body)), yes if race else no


_KERNELS: dict[str, Kernel] = {
    "missing_private": _k_private, "missing_reduction": _k_reduction, "loop_carried": _k_carried,
    "missing_barrier": _k_barrier, "missing_taskwait": _k_taskwait, "simd_dependence": _k_simd,
    "indirect_access": _k_indirect, "missing_atomic": _k_atomic,
}
