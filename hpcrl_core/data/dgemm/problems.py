"""DGEMM problems: a matrix size and an SQD technique schedule, their prompt and their record.

A problem's ``order`` is the SQD unlock order of the five techniques; at ``stage`` s the first s are permitted and
the rest forbidden (stage 0: a plain kernel; stage 5: anything). The prompt states the kernel contract exactly and
defines every technique in one line that follows the detector's rules (``hpcrl_core.bench.techniques``).

Train and eval problems differ twice:
- sizes: train n from ``prepare.dgemm.train_sizes``, eval n from ``prepare.dgemm.eval_sizes`` (disjoint; defaults
  ``TRAIN_SIZES`` and ``EVAL_SIZES``). The prompt asks for n and rewards and evaluation time the kernel at n;
- permitted sets: the six sets in ``HELD_OUT_PERMITTED`` (every technique is in one; never the empty or the full
  set) are eval-only. Train problems never have one; every other eval problem (even index) has one, cycling
  through the six, the odd ones are drawn like train problems. So eval measures both new sizes and technique
  combinations the model never saw permitted together.

Run: ``python -m hpcrl_core.data.dgemm.problems [SPLIT] [SEED]`` prints a problem and its prompt.
Test: ``pytest tests/data/dgemm/test_problems.py``.
"""

from __future__ import annotations

import random
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hpcrl_core.bench.techniques import ALL_TECHNIQUES, Technique
from hpcrl_core.config.prepare import EVAL_SIZES, TRAIN_SIZES
from hpcrl_core.data.schema import Record, messages
from hpcrl_core.errors import ConfigError, DataError

T = Technique
SPLITS: tuple[str, ...] = ("train", "eval")
HELD_OUT_PERMITTED: tuple[frozenset[Technique], ...] = (
    frozenset({T.OPENMP, T.SIMD}),
    frozenset({T.CACHE_BLOCKING, T.REGISTER_BLOCKING}),
    frozenset({T.LOOP_REORDER, T.SIMD}),
    frozenset({T.LOOP_REORDER, T.CACHE_BLOCKING, T.OPENMP}),
    frozenset({T.REGISTER_BLOCKING, T.OPENMP, T.SIMD}),
    frozenset({T.CACHE_BLOCKING, T.REGISTER_BLOCKING, T.OPENMP, T.SIMD}),
)
# One line each, following the detector's rules (hpcrl_core/bench/techniques/__init__.py).
DEFINITIONS: dict[Technique, str] = {
    T.LOOP_REORDER: "k (the sum index) not innermost: C or an accumulator array updated with a product inside "
                    "the loop over its own index (i-k-j, k-i-j ...)",
    T.CACHE_BLOCKING: "tiling: a loop stepping by a block size whose inner loops are bounded by that block",
    T.REGISTER_BLOCKING: "unrolling or register tiles: #pragma GCC unroll, loops stepping 2..31 that use i+1..., "
                         "several accumulators, small constant-size accumulator arrays",
    T.OPENMP: "threads: #pragma omp parallel/for/task... (omp simd alone is not openmp)",
    T.SIMD: "vector code: #pragma omp simd, x86 intrinsics or vector types (_mm256_*, __m512d), GCC vector_size",
}
HEADERS: tuple[str, ...] = ("stdlib.h", "string.h", "math.h", "stdint.h", "stddef.h", "omp.h", "immintrin.h")
SIGNATURE = "void dgemm(int n, const double *A, const double *B, double *C)"
_ID = re.compile(r"dgemm-(train|eval)-s(-?\d+)-\d+")


@dataclass(frozen=True)
class Problem:
    """One DGEMM task: size ``n``, SQD unlock ``order`` (a permutation of the five techniques), ``stage`` 0..5."""

    id: str
    n: int
    order: tuple[Technique, ...]
    stage: int

    def __post_init__(self) -> None:
        if sorted(self.order) != sorted(ALL_TECHNIQUES) or len(self.order) != len(ALL_TECHNIQUES):
            raise DataError(f"problem {self.id}: order must be a permutation of {[t.value for t in ALL_TECHNIQUES]}, "
                            f"got {[str(t) for t in self.order]}")
        if not 0 <= self.stage <= len(ALL_TECHNIQUES):
            raise DataError(f"problem {self.id}: stage must be 0..{len(ALL_TECHNIQUES)}, got {self.stage}")
        if self.n < 1:
            raise DataError(f"problem {self.id}: n must be >= 1, got {self.n}")

    @property
    def permitted(self) -> frozenset[Technique]:
        return frozenset(self.order[: self.stage])

    @property
    def forbidden(self) -> frozenset[Technique]:
        return frozenset(ALL_TECHNIQUES) - self.permitted


def _draw_train_like(rng: random.Random) -> tuple[tuple[Technique, ...], int]:
    """A uniform stage and unlock order whose permitted set is not held out."""
    while True:
        order = tuple(rng.sample(ALL_TECHNIQUES, len(ALL_TECHNIQUES)))
        stage = rng.randrange(len(ALL_TECHNIQUES) + 1)
        if frozenset(order[:stage]) not in HELD_OUT_PERMITTED:
            return order, stage


def _draw_held_out(rng: random.Random, permitted: frozenset[Technique]) -> tuple[tuple[Technique, ...], int]:
    """An unlock order whose first ``len(permitted)`` techniques are exactly ``permitted``."""
    first = rng.sample(sorted(permitted), len(permitted))
    rest = rng.sample(sorted(frozenset(ALL_TECHNIQUES) - permitted), len(ALL_TECHNIQUES) - len(permitted))
    return tuple(first + rest), len(permitted)


def make_problems(split: str, seed: int, count: int, sizes: Sequence[int] | None = None) -> list[Problem]:
    """Draw ``count`` problems of a split (see the module docstring for how train and eval differ).

    Args:
        split: "train" or "eval".
        seed: the same (split, seed, count, sizes) gives the same problems.
        count: how many (>= 0).
        sizes: the matrix sizes drawn from; None: ``TRAIN_SIZES`` or ``EVAL_SIZES`` by split.

    Returns:
        Problems with ids ``dgemm-<split>-s<seed>-<index>``.

    Raises:
        ConfigError: an unknown split, a negative count or no sizes.
    """
    if split not in SPLITS:
        raise ConfigError(f"unknown split {split!r}; allowed: {', '.join(SPLITS)}")
    if count < 0:
        raise ConfigError(f"problem count must be >= 0, got {count}")
    rng = random.Random(f"dgemm-problems:{split}:{seed}")
    sizes = tuple(sizes) if sizes is not None else (TRAIN_SIZES if split == "train" else EVAL_SIZES)
    if not sizes or any(n < 1 for n in sizes):
        raise ConfigError(f"problem sizes must be positive matrix sizes, at least one; got {list(sizes)}")
    out = []
    for idx in range(count):
        if split == "eval" and idx % 2 == 0:
            order, stage = _draw_held_out(rng, HELD_OUT_PERMITTED[(idx // 2) % len(HELD_OUT_PERMITTED)])
        else:
            order, stage = _draw_train_like(rng)
        out.append(Problem(f"dgemm-{split}-s{seed}-{idx:05d}", rng.choice(sizes), order, stage))
    return out


def _technique_lines(techs: frozenset[Technique], prefix: str = "") -> str:
    return "\n".join(f"- {prefix}{t.value}: {DEFINITIONS[t]}" for t in ALL_TECHNIQUES if t in techs)


def problem_prompt(p: Problem) -> list[dict[str, str]]:
    """The user message of a problem: contract, size, permitted and forbidden techniques, answer format."""
    permitted = ("Permitted techniques:\n" + _technique_lines(p.permitted)) if p.permitted \
        else "Permitted techniques: none (write a plain kernel)."
    # A forbidden line reads "- no simd: ...", never like the permitted line "- simd: ...". The tiny model's
    # tokenizer makes each frequent line one token, so with equal lines a technique's token meant "use it" or
    # "never use it" only through which heading came before it (docs/experiments.md).
    forbidden = ("Forbidden techniques (a kernel using one is rejected):\n" + _technique_lines(p.forbidden, "no ")) \
        if p.forbidden else "Forbidden techniques: none."
    user = (f"Write a C99 function\n{SIGNATURE}\ncomputing C = A*B for row-major n x n matrices (element i,j at "
            f"[i*n+j]). Overwrite C: it arrives holding garbage. It must be correct for every n >= 1; tune it for "
            f"n = {p.n}.\nAllowed headers: {', '.join(HEADERS)}. No I/O, no BLAS, no main.\n{permitted}\n"
            f"{forbidden}\nAnswer with one ```c code block.")
    return messages(None, user)


def problem_metadata(p: Problem, kernel: dict[str, Any] | None = None) -> dict[str, Any]:
    """The metadata of every dgemm record (same keys for problems and SFT pairs); ``kernel`` fills the
    ``kernel_*`` fields."""
    kernel = kernel or {}
    return {"problem_id": p.id, "n": p.n, "stage": p.stage, "order": [t.value for t in p.order],
            "permitted": sorted(t.value for t in p.permitted), "forbidden": sorted(t.value for t in p.forbidden),
            "kernel_name": kernel.get("kernel_name"), "kernel_kind": kernel.get("kernel_kind"),
            "kernel_techniques": kernel.get("kernel_techniques")}


def split_and_seed(problem_id: str) -> tuple[str | None, int | None]:
    """The split and seed encoded in an id made by ``make_problems`` (``dgemm-<split>-s<seed>-<index>``), else None."""
    m = _ID.fullmatch(problem_id)
    return (m.group(1), int(m.group(2))) if m else (None, None)


def problem_record(p: Problem, split: str | None = None, seed: int | None = None) -> Record:
    """A problem as a record with no completion (for GRPO and evaluation).

    Args:
        p: the problem.
        split, seed: for the provenance; taken from the id of a ``make_problems`` problem when omitted.
    """
    id_split, id_seed = split_and_seed(p.id)
    split = split if split is not None else id_split
    seed = seed if seed is not None else id_seed
    return Record(family="dgemm", prompt=problem_prompt(p), completion=[], answer="", metadata=problem_metadata(p),
                  provenance={"source": "synthetic:dgemm-problems@1", "seed": seed, "split": split})


if __name__ == "__main__":
    args = sys.argv[1:]
    first = make_problems(args[0] if args else "train", int(args[1]) if len(args) > 1 else 0, 1)[0]
    print(first)
    print(problem_prompt(first)[-1]["content"])
