"""Generator of DGEMM kernel variants for the SFT corpus: slow to fast kernels across the five techniques, each in
a randomly drawn surface style, every one correct for any n >= 1.

Kinds (module, share of a batch, GFLOPS on one core of the 2-core dev VM at n = 256, min / median / max of a
400-variant batch; the VM is shared and noisy;
blocked: 54 kernels of the 320-variant default batch):

==============  ==============  =====  ===================================================  ============
kind            module          share  what                                                 GFLOPS
==============  ==============  =====  ===================================================  ============
naive           kinds.loops     9%     i-j-k / j-i-k scalar accumulator (+ B transposed)    0.5 / 1.4 / 10
reorder         kinds.loops     14%    i-k-j, k-i-j; j-k-i, k-j-i (column walks, slow)      0.2 / 5 / 24
tile_scalar     kinds.unroll    7%     MR x NR scalar register tile, k innermost            1.5 / 3.3 / 12
ikj_unrolled    kinds.unroll    10%    i-k-j with k or i unrolled by 2/4                    5 / 19 / 30
blocked         kinds.blocked   17%    tiles 16..128, inside half i-k-j, half i-j-k         1.4 / 3 / 23
ikj_vec         kinds.vector    10%    i-k-j, j loop in AVX2/AVX-512 vectors                3.5 / 13 / 20
tile_vec        kinds.vector    13%    vector tile, named or array accumulators, k blocks   5 / 20 / 60
packed          kinds.packed    20%    packed micro-kernels (Goto/BLIS), several MR x NR    16 / 38 / 66
==============  ==============  =====  ===================================================  ============

Optional OpenMP, ``omp simd`` and ``GCC unroll`` layers mix techniques within kinds. A batch is deterministic in
the seed: kinds are scheduled in proportion to their share (stride scheduling, so even a small batch holds every
kind), each variant draws its parameters and style from its own random stream, and variants whose code is
equal after removing comments and whitespace are drawn again. ``Variant.intended`` is what the generator meant by
the detector's rules; the corpus keeps the techniques the engine detects, and reports any disagreement.

Run: ``python -m hpcrl_core.data.dgemm.variants [SEED] [COUNT]`` prints the batch's names and intended techniques.
Test: ``pytest tests/data/dgemm/test_variants.py`` (``-m integration`` compiles and verifies a batch).
"""

from __future__ import annotations

import logging
import random
import re
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from hpcrl_core.bench.extract import normalise_code
from hpcrl_core.bench.techniques import Technique
from hpcrl_core.config.prepare import NAIVE_TRANSPOSED
from hpcrl_core.data.dgemm.kinds.blocked import blocked
from hpcrl_core.data.dgemm.kinds.loops import naive, reorder
from hpcrl_core.data.dgemm.kinds.packed import packed
from hpcrl_core.data.dgemm.kinds.style import Draft, Style, random_style
from hpcrl_core.data.dgemm.kinds.unroll import ikj_unrolled, tile_scalar
from hpcrl_core.data.dgemm.kinds.vector import ikj_vec, tile_vec
from hpcrl_core.errors import DataError

log = logging.getLogger(__name__)

# A kind: (the variant's random stream, its style) -> the kernel drawn.
Kind = Callable[[random.Random, Style], Draft]

KINDS: dict[str, tuple[Kind, float]] = {
    "naive": (naive, 0.09),
    "reorder": (reorder, 0.14),
    "tile_scalar": (tile_scalar, 0.07),
    "ikj_unrolled": (ikj_unrolled, 0.10),
    "blocked": (blocked, 0.17),
    "ikj_vec": (ikj_vec, 0.10),
    "tile_vec": (tile_vec, 0.13),
    "packed": (packed, 0.20),
}
_MAX_REDRAWS = 200  # per variant; the kinds' parameter spaces are far larger than any corpus


@dataclass(frozen=True)
class Variant:
    """One generated kernel: ``intended`` is the technique set the generator meant (the detector decides), ``kind``
    the key of ``KINDS`` that drew it."""

    name: str
    code: str
    intended: frozenset[Technique]
    kind: str


def kind_schedule(count: int) -> list[str]:
    """Kind names for ``count`` variants, in proportion to their shares (stride scheduling, deterministic)."""
    done = dict.fromkeys(KINDS, 0)
    out: list[str] = []
    for _ in range(count):
        name = min(KINDS, key=lambda k: (done[k] + 1) / KINDS[k][1])
        done[name] += 1
        out.append(name)
    return out


# The headers every kernel includes with ``uniform_includes``; ``omp.h`` and ``immintrin.h`` only where the kernel
# already did (``immintrin.h`` exists only on x86; ``#pragma omp`` needs no header).
UNIFORM_HEADERS: tuple[str, ...] = ("stddef.h", "stdlib.h", "string.h")
_INCLUDE_LINE = re.compile(r"^#include <([^>]+)>\n", re.M)


def uniform_prelude(code: str) -> str:
    """``code`` with its ``#include`` lines replaced, where the first stood, by ``UNIFORM_HEADERS`` followed by the
    other headers it included (in their order): which standard headers a kernel opens with then says nothing about
    its body, so a body that calls ``memset`` cannot follow an opening without ``<string.h>``. A kernel without
    includes gets the block at its top (after a leading ``#ifndef`` feature-test guard)."""
    headers = list(dict.fromkeys([*UNIFORM_HEADERS, *_INCLUDE_LINE.findall(code)]))
    block = "".join(f"#include <{h}>\n" for h in headers)
    first = _INCLUDE_LINE.search(code)
    if first is not None:
        return code[:first.start()] + block + _INCLUDE_LINE.sub("", code[first.start():])
    guard = re.match(r"(#ifndef [^\n]*\n#define [^\n]*\n#endif\n)", code)
    at = guard.end() if guard else 0
    return code[:at] + block + "\n" + code[at:]


def generate_variants(seed: int, count: int, vary_names: bool = False, vary_layout: bool = True,
                      naive_transposed: float = NAIVE_TRANSPOSED, fit_registers: bool = False,
                      derived_nr: bool = False, uniform_includes: bool = False) -> list[Variant]:
    """Generate ``count`` distinct kernel variants.

    Args:
        seed: the batch's seed; the same seed, count and ``vary_names`` give the same variants.
        count: how many variants (>= 0).
        vary_names: draw identifier spellings too (``prepare.dgemm.vary_names``); off, each name has one spelling.
        vary_layout: draw the layout too (``prepare.dgemm.vary_layout``); off, every kernel is written in the house
            layout (``HOUSE_LAYOUT``) and only its algorithm, parameters and techniques vary.
        naive_transposed: share of ``naive`` kernels that transpose B first (``prepare.dgemm.naive_transposed``),
            in [0, 1].
        fit_registers: ``packed`` draws only vector micro-tiles that fit the node's vector registers
            (``prepare.dgemm.fit_registers``; ``kinds.packed.tile_registers``).
        derived_nr: ``packed`` and array-form ``tile_vec`` kernels define their tile width as ``(VW * NV)``
            instead of its value (``prepare.dgemm.derived_nr``).
        uniform_includes: every kernel opens with the same standard headers (``uniform_prelude``;
            ``prepare.dgemm.uniform_includes``).

    Returns:
        Variants in schedule order, named ``NNNN:kind:parameters``.

    Raises:
        DataError: a negative count or a share outside [0, 1], or a kind that cannot produce a new distinct kernel
            (a generator defect).
    """
    if count < 0:
        raise DataError(f"variant count must be >= 0, got {count}")
    if not 0.0 <= naive_transposed <= 1.0:
        raise DataError(f"naive_transposed must be a share in [0, 1], got {naive_transposed}")
    makers: dict[str, Kind] = {"naive": partial(naive, transposed_share=naive_transposed),
                               "packed": partial(packed, fit_registers=fit_registers, derived_nr=derived_nr),
                               "tile_vec": partial(tile_vec, derived_nr=derived_nr)}
    rng = random.Random(f"dgemm-variants:{seed}")
    seen: set[str] = set()
    out: list[Variant] = []
    exhausted: Counter[str] = Counter()  # kind -> slots skipped after it ran out of distinct kernels
    for idx, kind in enumerate(kind_schedule(count)):
        if kind in exhausted:
            exhausted[kind] += 1
            continue
        make = makers.get(kind, KINDS[kind][0])
        for _ in range(_MAX_REDRAWS):
            sub = random.Random(rng.getrandbits(64))
            draft = make(sub, random_style(sub, vary_names, vary_layout))
            code = uniform_prelude(draft.code) if uniform_includes else draft.code
            key = normalise_code(code)
            if key not in seen:
                seen.add(key)
                out.append(Variant(f"{idx:04d}:{kind}:{draft.desc}", code, draft.intended, kind))
                break
        else:
            if vary_layout:
                raise DataError(f"kind {kind!r} produced no new distinct kernel in {_MAX_REDRAWS} draws "
                                f"(seed {seed}, variant {idx}); widen its parameter space or lower the count")
            exhausted[kind] += 1  # one layout leaves small kinds few distinct kernels: use what there is
    if exhausted:
        log.warning("%d of %d variants skipped: in the house layout these kinds have no more distinct kernels: %s",
                    sum(exhausted.values()), count, ", ".join(f"{f} ({n})" for f, n in sorted(exhausted.items())))
    return out


def main(argv: list[str]) -> None:
    seed = int(argv[0]) if argv else 0
    count = int(argv[1]) if len(argv) > 1 else 40
    for v in generate_variants(seed, count):
        print(f"{v.name:60s} {','.join(sorted(v.intended)) or '-'}")


if __name__ == "__main__":
    main(sys.argv[1:])
