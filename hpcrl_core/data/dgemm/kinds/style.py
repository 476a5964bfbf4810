"""Surface style of generated DGEMM kernels: names, index expressions, constants, layout and comments.

A ``Style`` is drawn once per variant (``random_style``); the kind generators in ``kinds`` write
their C through its helpers, and ``render`` applies the layout (brace style, indentation, comments) last. Style
never changes what a kernel computes nor the techniques it uses: only how it reads.

A kind's generator returns a ``Draft``: a short description of its parameters, the rendered code, and the
techniques it intends (by the detector's rules in ``hpcrl_core.bench.techniques``).

Comment lines in templates are written as ``//# text``; ``render`` keeps them as ``//`` or ``/* */`` comments, or
drops them, according to the style.

Test: ``pytest tests/data/dgemm/test_variants.py``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from hpcrl_core.bench.techniques import Technique

_T = TypeVar("_T")

# (row, column, reduction) index names and the matching tile-origin names; none collides with template locals.
NAME_SETS: tuple[tuple[str, ...], ...] = (
    ("i", "j", "k", "ii", "jj", "kk"),
    ("i", "j", "k", "i0", "j0", "k0"),
    ("i", "j", "k", "ib", "jb", "kb"),
    ("i", "j", "p", "ii", "jj", "pp"),
    ("row", "col", "k", "r0", "c0", "k0"),
    ("y", "x", "k", "yb", "xb", "kb"),
)
SIGNATURES: tuple[str, ...] = (
    "void dgemm(int n, const double *A, const double *B, double *C)",
    "void dgemm(int n, const double *restrict A, const double *restrict B, double *restrict C)",
    "void dgemm(const int n, const double *A, const double *B, double *C)",
    "void dgemm(int n, const double* A, const double* B, double* C)",
    "void\ndgemm(int n, const double *A, const double *B, double *C)",
)
_ACC_NAMES = ("sum", "s", "acc", "dot", "t")
_A_NAMES = ("a", "aik", "a_ik", "av")
_CROW_NAMES = ("crow", "c_row", "Ci", "out")
_BROW_NAMES = ("brow", "b_row", "Bk", "src")
_MIN_NAMES = ("imin", "min_int", "mini")
_DOT_NAMES = ("dot_col", "col_dot", "edge_dot")  # the edge helper of register-tile kernels
# With ``vary_names`` off every name takes its first spelling. A kernel declares a name on one line and uses it on
# many others; the tiny model (one token per line, so a name is fused into each line's tokens) often mixed two
# drawn spellings in one kernel (``dot_col`` defined, ``edge_dot`` called; ``p`` declared, ``k`` used), and about
# half of its compile errors were such mixes (docs/experiments.md). Layout, index style and constants still vary.


def pick_name(rng: random.Random, pool: Sequence[_T], vary_names: bool) -> _T:
    """A spelling from ``pool``: drawn when names vary, else the first (the one spelling the tiny model sees)."""
    return rng.choice(pool) if vary_names else pool[0]


@dataclass(frozen=True)
class Draft:
    """What a kind's generator returns: ``desc`` names the parameters (it becomes part of the variant name)."""

    desc: str
    code: str
    intended: frozenset[Technique]


@dataclass(frozen=True)
class Style:
    """How one kernel reads. ``index``: flat | cast | ptr; ``consts``: define | enum;
    ``bound``: func | macro | ternary; ``comments``: none | line | block."""

    i: str
    j: str
    k: str
    ii: str
    jj: str
    kk: str
    index: str
    consts: str
    bound: str
    comments: str
    indent: str
    allman: bool
    signature: str
    acc: str
    aval: str
    crow: str
    brow: str
    min_name: str
    dot: str
    rowptr: bool
    const_locals: bool
    vary_names: bool
    vary_layout: bool = True

    def pick(self, rng: random.Random, pool: Sequence[_T]) -> _T:
        """A kind's own name choice: drawn from ``pool`` when names vary, else its first entry."""
        return pick_name(rng, pool, self.vary_names)

    def at(self, m: str, r: str, c: str) -> str:
        """Element (r, c) of the n x n row-major matrix m; r and c must be parenthesised if compound."""
        if self.index == "cast":
            return f"{m}[(size_t){r} * n + {c}]"
        if self.index == "ptr":
            return f"*({m} + {r} * n + {c})"
        return f"{m}[{r} * n + {c}]"

    def addr(self, m: str, r: str, c: str) -> str:
        """Address of element (r, c) of m."""
        if self.index == "cast":
            return f"&{m}[(size_t){r} * n + {c}]"
        if self.index == "ptr":
            return f"{m} + {r} * n + {c}"
        return f"&{m}[{r} * n + {c}]"

    def row(self, m: str, r: str) -> str:
        """Pointer to row r of m."""
        if self.index == "cast":
            return f"{m} + (size_t){r} * n"
        if self.index == "ptr":
            return f"&{m}[{r} * n]"
        return f"{m} + {r} * n"

    def mn(self, a: str, b: str) -> str:
        """min(a, b) in this style's spelling (``min_def`` supplies the helper)."""
        if self.bound == "func":
            return f"{self.min_name}({a}, {b})"
        if self.bound == "macro":
            return f"MIN({a}, {b})"
        return f"({a} < {b} ? {a} : {b})"

    def min_def(self) -> str:
        if self.bound == "func":
            return f"static inline int {self.min_name}(int a, int b) {{ return a < b ? a : b; }}\n\n"
        if self.bound == "macro":
            return "#define MIN(a, b) ((a) < (b) ? (a) : (b))\n\n"
        return ""

    def consts_def(self, values: Mapping[str, int | str]) -> str:
        """File-scope integer constants (usable in array sizes and attributes either way). A string value is an
        expression in constants defined before it (``"VW * NV"``); a macro gets it in parentheses."""
        if not values:
            return ""
        if self.consts == "enum":
            return "enum { " + ", ".join(f"{k} = {v}" for k, v in values.items()) + " };\n\n"
        return "".join(f"#define {k} {v if isinstance(v, int) else f'({v})'}\n" for k, v in values.items()) + "\n"

    @property
    def cq(self) -> str:
        """``const `` or nothing, for read-only locals."""
        return "const " if self.const_locals else ""


# With ``vary_layout`` off every kernel is written in one house style: these fields, no schedule clause on
# ``omp parallel for``, C zeroed with the first ``memset`` form, tile bounds at the end of a tile's loop header.
# The draws still happen, so a seed gives the same kernels (algorithm, tiles, techniques) either way.
HOUSE_LAYOUT: dict[str, object] = {"index": "flat", "consts": "define", "bound": "macro", "comments": "none",
                                   "indent": "    ", "allman": False, "signature": SIGNATURES[0], "rowptr": True,
                                   "const_locals": True}


def random_style(rng: random.Random, vary_names: bool, vary_layout: bool = True) -> Style:
    """Draw a style (every choice independent, so surface variation multiplies across kinds); with
    ``vary_names`` off, every identifier takes its first spelling; with ``vary_layout`` off, the layout is
    ``HOUSE_LAYOUT`` (the draws are made and discarded, so the rest of the stream is the same)."""
    def name(pool: Sequence[_T]) -> _T:
        return pick_name(rng, pool, vary_names)

    i, j, k, ii, jj, kk = name(NAME_SETS)
    style = Style(i=i, j=j, k=k, ii=ii, jj=jj, kk=kk, index=rng.choice(("flat", "flat", "cast", "cast", "ptr")),
                 consts=rng.choice(("define", "define", "enum")), bound=rng.choice(("func", "macro", "ternary")),
                 comments=rng.choice(("none", "line", "line", "block")), indent=rng.choice(("    ", "    ", "  ")),
                 allman=rng.random() < 0.3, signature=rng.choice(SIGNATURES), acc=name(_ACC_NAMES),
                 aval=name(_A_NAMES), crow=name(_CROW_NAMES), brow=name(_BROW_NAMES), min_name=name(_MIN_NAMES),
                 dot=name(_DOT_NAMES), rowptr=rng.random() < 0.5, const_locals=rng.random() < 0.6,
                 vary_names=vary_names)
    return style if vary_layout else replace(style, vary_layout=False, **HOUSE_LAYOUT)  # type: ignore[arg-type]


def layout_choice(s: Style, rng: random.Random, forms: Sequence[_T]) -> _T:
    """One of ``forms`` drawn from ``rng``; in the house layout always the first (the draw is still made)."""
    drawn = rng.choice(forms)
    return drawn if s.vary_layout else forms[0]


def omp_for(s: Style, rng: random.Random, extra: str = "") -> str:
    """A ``#pragma omp parallel for`` line with an optional schedule clause (none in the house layout)."""
    sched = layout_choice(s, rng, ("", "", " schedule(static)", " schedule(dynamic, 4)", " schedule(guided)"))
    return f"#pragma omp parallel for{extra}{sched}"


def lead(pragma: str) -> str:
    """A pragma line to put before a statement (nothing when ``pragma`` is empty)."""
    return f"{pragma}\n" if pragma else ""


def decls(ctype: str, items: list[str], width: int = 96) -> str:
    """``ctype a, b, c;`` on one line when it fits in ``width``, else one declaration per line."""
    one = f"{ctype} {', '.join(items)};"
    return one if len(one) <= width else "\n".join(f"{ctype} {x};" for x in items)


def pline(pragma: str, depth: int = 0) -> str:
    """A pragma as a whole line indented by ``depth`` levels (nothing when ``pragma`` is empty)."""
    return f"{'    ' * depth}{pragma}\n" if pragma else ""


def unroll(rng: random.Random) -> str:
    return f"#pragma GCC unroll {rng.choice((2, 4, 4, 8))}"


def roff(v: str, d: int) -> str:
    """``v`` or ``(v + d)``: a row index offset, parenthesised for use in ``Style.at``."""
    return f"({v} + {d})" if d else v


def coff(v: str, d: int) -> str:
    """``v`` or ``v + d``: a column index offset."""
    return f"{v} + {d}" if d else v


def includes(*headers: str) -> str:
    return "".join(f"#include <{h}>\n" for h in dict.fromkeys(headers)) + ("\n" if headers else "")


def zero_matrix(s: Style, rng: random.Random) -> str:
    """A statement that zeroes all of C (C arrives holding garbage); the first form in the house layout."""
    return layout_choice(s, rng, (
        "memset(C, 0, (size_t)n * n * sizeof(double));",
        "memset(C, 0, sizeof(double) * (size_t)n * n);",
        "for (size_t z = 0; z < (size_t)n * n; z++)\n    C[z] = 0.0;",
    ))


def zero_row(s: Style, ptr: str, rng: random.Random) -> str:
    """A statement that zeroes one row of n doubles at ``ptr``; the first form in the house layout."""
    return layout_choice(s, rng, (f"memset({ptr}, 0, (size_t)n * sizeof(double));",
                                  f"memset({ptr}, 0, sizeof(double) * n);",
                                  f"for (int z = 0; z < n; z++)\n    {ptr}[z] = 0.0;"))


def block(text: str, depth: int) -> str:
    """Indent every non-empty line of ``text`` by ``depth`` levels of four spaces."""
    pad = "    " * depth
    return "\n".join(pad + ln if ln.strip() else ln for ln in text.strip("\n").split("\n"))


_OPEN = re.compile(r"^(\s*)(\S.*?)\s*\{$")


def _allman(lines: list[str]) -> list[str]:
    out: list[str] = []
    for ln in lines:
        m = _OPEN.match(ln)
        if not m or m.group(2).endswith("=") or m.group(2).startswith(("#", "//", "/*", "typedef", "enum")):
            out.append(ln)
            continue
        pad, head = m.groups()
        if head.startswith("} "):
            out.append(pad + "}")
            head = head[2:]
        out += [pad + head, pad + "{"]
    return out


def _comment(ln: str, mode: str) -> str | None:
    pad, text = ln.split("//#", 1)
    if mode == "none":
        return None
    return f"{pad}// {text.strip()}" if mode == "line" else f"{pad}/* {text.strip()} */"


def render(code: str, s: Style, header: str = "") -> str:
    """Apply comments, brace style and indentation; prepend the optional header comment."""
    lines: list[str] = []
    for ln in code.strip("\n").split("\n"):
        if ln.lstrip().startswith("//#"):
            kept = _comment(ln, s.comments)
            if kept is not None:
                lines.append(kept)
        else:
            lines.append(ln.rstrip())
    if s.allman:
        lines = _allman(lines)
    if s.indent != "    ":
        lines = [re.sub(r"^(    )+", lambda m: s.indent * (len(m.group(0)) // 4), ln) for ln in lines]
    text = "\n".join(lines) + "\n"
    if header and s.comments != "none":
        text = (f"/* {header} */\n" if s.comments == "block" else f"// {header}\n") + text
    return re.sub(r"\n{3,}", "\n\n", text)
