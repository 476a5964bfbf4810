"""The builder of the synthetic race programs: one C or Fortran OpenMP program under construction.

A ``Program`` holds what every pattern shares: its random stream, the drawn names (from the pools of ``names``),
element type, size, memory layout, the arrays and scalars a kernel declares on it, the init loop, harmless extra
statements and the report code, and the C / Fortran layout (indentation, braces, directive spelling) applied last
by ``render``. The per-pattern kernels (``kernels``) build on it; ``generator`` draws one per item.

Every choice comes from ``Program.rng`` in a fixed order, so a program is a pure function of its seed; reordering
draws here or in a kernel changes every generated item.

Not an entry point: use ``generator.generate_race_items``.
Test: ``pytest tests/data/race/test_generator.py`` (compiles every sampled program with gcc / gfortran -fopenmp).
"""

from __future__ import annotations

import random
import re

from hpcrl_core.data.race.names import POOLS, WIDE

_INIT_NOTES = ("initialise the inputs", "fill the input arrays", "set up the data")
_WORK_NOTES = ("main computation", "compute", "work loop", "the kernel")


def indent(lines: list[str]) -> list[str]:
    """``lines`` one level deeper (four spaces; the layout re-indents to the drawn style); blank lines stay empty."""
    return [f"    {x}" if x else x for x in lines]


class Program:
    """One program under construction: its names, declarations and style. Kernels add to it; ``render`` prints it."""

    def __init__(self, rng: random.Random, language: str, wide: bool = False) -> None:
        self.rng, self.c, self.wide = rng, language == "c", wide
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
        self.mats: list[str] = []                            # n x n arrays of the element type, filled by the init
        self.j = ""                                          # the init loop's column index, once a matrix exists
        self.need_omp = False                                # the kernel calls the OpenMP runtime (omp.h / omp_lib)
        self.decls: list[str] = []                           # further declarations at the top of main / program
        self.helpers: list[str] = []                         # C: functions before main; Fortran: after contains
        self.globals: list[str] = []                         # C only: file-scope declarations

    @property
    def size(self) -> str:
        return self.n.upper() if self.c and not self.heap else self.n

    def name(self, role: str) -> str:
        pool = POOLS[role] + WIDE[role] if self.wide else POOLS[role]
        name = self.rng.choice([x for x in pool if x not in self.used])
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

    def mat(self) -> str:
        """A new n x n array; ``ref2`` addresses it (flattened row-major when malloc'd in C)."""
        if not self.j:
            self.j = self.name("col")
        self.mats.append(self.name("mat"))
        return self.mats[-1]

    def ref2(self, a: str, row: str, col: str) -> str:
        """Element (row, col) of matrix ``a``: ``a[row][col]``, ``a[(row) * n + col]`` when malloc'd (C), or
        ``a(row, col)`` (Fortran)."""
        if not self.c:
            return f"{a}({row}, {col})"
        if self.heap:
            r = row if row.isidentifier() or row.isdigit() else f"({row})"
            return f"{a}[{r} * {self.size} + {col}]"
        return f"{a}[{row}][{col}]"

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
            return [f"do {v} = {lo or '1'}, {hi or self.size}", *indent(body), "end do"]
        head = f"for ({'int ' if declare else ''}{v} = {lo or '0'}; {v} < {hi or self.size}; {v}++)"
        if len(body) == 1 and not body[0].startswith("#") and self.rng.random() < 0.3:
            return [head, *indent(body)]
        return [f"{head} {{", *indent(body), "}"]

    def block(self, directive: str, body: list[str], end: str | None = None) -> list[str]:
        """A construct around ``body``: braces in C, an end directive in Fortran."""
        if self.c:
            if len(body) == 1 and self.rng.random() < 0.4:
                return [self.omp(directive), body[0]]
            return [self.omp(directive), "{", *indent(body), "}"]
        return [self.omp(directive), *indent(body), self.omp(end or f"end {directive.split()[0]}")]

    def region(self, inner: list[str]) -> list[str]:
        """A parallel region around ``inner``: braces in C, ``end parallel`` in Fortran."""
        if self.c:
            return [self.omp("parallel"), "{", *indent(inner), "}"]
        return [self.omp("parallel"), *indent(inner), self.omp("end parallel")]

    def workshare(self, loop: list[str], clauses: str = "", nowait: bool = False) -> list[str]:
        """``loop`` as a for / do construct inside a region; ``nowait`` on the for, or on Fortran's ``end do``."""
        wait = " nowait" if nowait else ""
        if self.c:
            return [self.omp(f"for{clauses}{wait}"), *loop]
        return [self.omp(f"do{clauses}"), *loop, self.omp(f"end do{wait}")]

    def par_for(self, clauses: str, loop: list[str]) -> list[str]:
        """``loop`` as a worksharing loop: the combined construct, or a parallel region holding a for / do."""
        split = self.rng.random() < 0.3
        if split:
            return self.region(self.workshare(loop, clauses))
        if self.c:
            return [self.omp(f"parallel for{clauses}"), *loop]
        return [self.omp(f"parallel do{clauses}"), *loop, *([self.omp("end parallel do")] * self.rng.randint(0, 1))]

    def render(self, kernel: list[str]) -> str:
        if self.wide:
            kernel = self._with_distractors(kernel)
        lines = self._render_c(kernel) if self.c else self._render_f(kernel)
        return _layout_c(lines, self.rng) if self.c else _layout_f(lines, self.rng)

    def _with_distractors(self, kernel: list[str]) -> list[str]:
        """The "wide" surface: up to two race-free extra loops before or after the kernel, the same under both
        labels, so that neither a clause, a second parallel loop nor a serial recurrence tells the label."""
        r = self.rng
        out = list(kernel)
        for _ in range(r.choice((0, 1, 1, 2))):
            extra = self._distractor(r.choice(("parallel", "reduction", "private", "serial")))
            out = [*extra, "", *out] if r.random() < 0.5 else [*out, "", *extra]
        return out

    def _distractor(self, kind: str) -> list[str]:
        """One race-free loop over a fresh array: an independent parallel loop, a reduction with its clause, a
        private temporary, or a serial loop-carried recurrence (one thread, so no race)."""
        i, d = self.i, self.arr()
        self.summed.append(d)
        di = self.ref(d, i)
        if kind == "serial":
            prev = self.ref(d, self.off("-", 1))
            return self.loop([self.st(f"{di} = {di} + {prev}")], lo="1" if self.c else "2")
        if kind == "reduction":
            acc = self.scalar("acc")
            self.shown.append(acc)
            return self.par_for(f" reduction(+:{acc})", self.loop([self.st(f"{acc} = {acc} + {di}")]))
        if kind == "private":
            t = self.scalar("tmp")
            return self.par_for(f" private({t})", self.loop([self.st(f"{t} = {di} * 3"), self.st(f"{di} = {t} + 1")]))
        return self.par_for("", self.loop([self.st(f"{di} = {di} * {self.rng.randint(2, 5)} + {i}")]))

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
        if self.arrays:
            out += self.loop([self.st(f"{self.ref(a, self.i)} = {self._fill(fn, k)}")
                              for k, a in enumerate(self.arrays)])
        if self.mats:
            i, j = self.i, self.j
            fills = []
            for k, m in enumerate(self.mats):
                mod = self.rng.choice((5, 7, 9))
                value = f"({i} + {k + 2} * {j}) % {mod} + 1" if self.c else f"mod({i} + {k + 2} * {j}, {mod}) + 1"
                fills.append(self.st(f"{self.ref2(m, i, j)} = {value}"))
            # Fortran walks a column per inner loop (column-major), C a row
            outer, inner = (i, j) if self.c else (j, i)
            out += self.loop(self.loop(fills, var=inner), var=outer)
        if self.rng.random() < 0.25 and self.arrays:
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
        exprs += [self.ref2(m, self.last(), self.last()) for m in self.mats]
        if self.c:
            spec, sep, named = "%g", " ", False
            if self.wide:
                spec = self.rng.choice(("%g", "%f", "%.3f", "%e", "%.6g", "%lf"))
                sep, named = self.rng.choice((" ", ", ", "\\t")), self.rng.random() < 0.5
            fmt = sep.join(f"{_label(e)}={spec}" if named else spec for e in exprs)
            return [*lines, f'printf("{fmt}\\n", {", ".join(f"(double){e}" for e in exprs)});']
        head = self.rng.choice(("print *, ", "write(*, *) "))
        if self.wide and self.rng.random() < 0.5:
            return [*lines, head + ", ".join(f"'{_label(e)} =', {e}" for e in exprs)]
        return [*lines, head + ", ".join(exprs)]

    def _c_arrays(self) -> list[str]:
        n, ty = self.size, self.ty
        if self.heap:
            out = [f"{ty} *{a} = malloc({n} * sizeof *{a});" for a in self.arrays]
        elif not self.arrays:
            out = []
        elif self.rng.random() < 0.5:
            out = [f"{ty} {', '.join(f'{a}[{n}]' for a in self.arrays)};"]
        else:
            out = [f"{ty} {a}[{n}];" for a in self.arrays]
        if self.heap:
            out += [f"{ty} *{m} = malloc({n} * {n} * sizeof *{m});" for m in self.mats]
        else:
            out += [f"{ty} {m}[{n}][{n}];" for m in self.mats]
        for name, length, vals in self.int_arrays:
            if vals is None:
                out.append(f"int *{name} = malloc({n} * sizeof *{name});" if self.heap else f"int {name}[{n}];")
            else:
                out.append(f"int {name}[{length or n}] = {{{', '.join(map(str, vals)) or '0'}}};")
        return out

    def _render_c(self, kernel: list[str]) -> list[str]:
        r = self.rng
        fn = self.name("fn") if r.random() < 0.3 and self.arrays else None
        omp_lib = r.random() < 0.3 or self.need_omp
        body = [*self._prelude(fn, omp_lib), *kernel, "", *self._report()]
        glob = not self.heap and (r.random() < 0.3 or bool(self.mats) and self.n_val > 64)
        arrays = self._c_arrays()
        head = ["#include <stdio.h>", *(["#include <stdlib.h>"] * self.heap), *(["#include <omp.h>"] * omp_lib), ""]
        if not self.heap:
            head += [f"#define {self.size} {self.n_val}", ""]
        if glob:
            head += [*(f"static {a}" for a in arrays), ""]
        if self.globals:
            head += [*self.globals, ""]
        if fn:
            k = self.name("loop")
            head += [f"static {self.ty} {fn}(int {k}) {{", f"    return ({self.ty})({k} % 7 + 1);", "}", ""]
        if self.helpers:
            head += [*self.helpers, ""]
        decl = ([] if glob else arrays) + [f"{t} {s} = 0;" for s, t in self.scalars] + self.decls
        decl += [f"int {', '.join(self.top_ints)};"] if self.top_ints else []
        r.shuffle(decl)
        if self.heap:
            decl.insert(0, f"{r.choice(('int', 'const int'))} {self.n} = {self.n_val};")
        frees = [f"free({x});" for x in self.arrays + self.mats + [a for a, _, v in self.int_arrays if v is None]
                 ] * self.heap
        sig = r.choice(("int main(void)", "int main()", "int main(int argc, char *argv[])"))
        return [*head, f"{sig} {{", *indent([*decl, "", *body, *frees, "return 0;"]), "}"]

    def _render_f(self, kernel: list[str]) -> list[str]:
        r, n, ty = self.rng, self.size, self.ty
        fn = self.name("fn") if r.random() < 0.3 and self.arrays else None
        omp_lib = r.random() < 0.3 or self.need_omp
        body = [*self._prelude(fn, omp_lib), *kernel, "", *self._report()]
        alloc = r.random() < 0.3
        decl = [f"integer, parameter :: {n} = {self.n_val}", f"integer :: {', '.join(self.top_ints)}"]
        shapes = [(a, f"{n}") for a in self.arrays] + [(m, f"{n}, {n}") for m in self.mats]
        if alloc:
            decl.append(f"{ty}, allocatable :: " + ", ".join(f"{a}({':, :' if ',' in dims else ':'})"
                                                             for a, dims in shapes))
        elif r.random() < 0.5:
            decl += [f"{ty}, dimension({dims}) :: {', '.join(a for a, d in shapes if d == dims)}"
                     for dims in dict.fromkeys(d for _, d in shapes)]
        else:
            decl.append(f"{ty} :: {', '.join(f'{a}({dims})' for a, dims in shapes)}")
        execs = [f"allocate({', '.join(f'{a}({dims})' for a, dims in shapes)})"] if alloc else []
        for name, length, vals in self.int_arrays:
            literal = ", ".join(map(str, vals or []))
            decl.append(f"integer :: {name}({length or n})" + (r.choice((f" = [{literal}]", f" = (/ {literal} /)"))
                                                              if vals else ""))
            execs += [f"{name} = 0"] if vals == [] else []
        for ty_ in dict.fromkeys(t for _, t in self.scalars):
            decl.append(f"{ty_} :: {', '.join(s for s, t in self.scalars if t == ty_)}")
        decl += self.decls
        execs += [f"{s} = 0" for s, _ in self.scalars]
        dealloc = [f"deallocate({', '.join(a for a, _ in shapes)})"] if alloc else []
        prog = self.name("prog")
        out = [f"program {prog}", *indent([*(["use omp_lib"] * omp_lib), "implicit none", *decl, "", *execs, *body,
                                         *dealloc])]
        contained: list[str] = []
        if fn:
            k, v = self.name("loop"), self.name("tmp")
            contained += [f"function {fn}({k}) result({v})", f"    integer, intent(in) :: {k}", f"    {ty} :: {v}",
                          f"    {v} = mod({k}, 7) + 1", f"end function {fn}"]
        contained += self.helpers
        if contained:
            out += ["contains", *indent(contained)]
        return [*out, r.choice((f"end program {prog}", "end program", "end"))]


def _label(expr: str) -> str:
    """A printable name for a reported expression: ``a[n - 1]`` -> ``a_last``, ``total`` -> ``total``."""
    name = re.split(r"[\[(]", expr, maxsplit=1)[0]
    return name if name == expr else f"{name}_" + ("first" if re.search(r"[\[(](0|1)[\])]", expr) else "last")


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
