"""Section ``prepare`` of params.yaml: which corpora the prepare stage builds and how it splits them.

Test: ``pytest tests/test_config.py``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from hpcrl_core.config.base import Section

SOURCE_KINDS: dict[str, tuple[str, ...]] = {
    "race_c": ("synthetic", "hpcgpt", "dataracebench"),
    "race_fortran": ("synthetic", "hpcgpt", "dataracebench"),
    "mlperf": ("synthetic", "hpcgpt"),
    "plp": ("synthetic", "hpcgpt"),
}


_SPAN = re.compile(r"\s*(\d+)\s*\.\.\s*(\d+)\s*")


def size_span(spec: str, exclude: Sequence[int] = ()) -> tuple[int, ...]:
    """The sizes ``"A..B"`` names: every n from A to B, both included, except ``exclude`` (the eval sizes).

    Raises:
        ValueError: ``spec`` is not ``"A..B"`` with A <= B.
    """
    m = _SPAN.fullmatch(spec)
    if not m or int(m.group(1)) > int(m.group(2)):
        raise ValueError(f"train_sizes: give a list of sizes or a span \"A..B\" with A <= B (every n from A to B "
                         f"but the eval sizes); got {spec!r}")
    return sizes_between(int(m.group(1)), int(m.group(2)), exclude)


def sizes_between(low: int, high: int, exclude: Sequence[int] = ()) -> tuple[int, ...]:
    """Every n from ``low`` to ``high``, both included, except ``exclude``."""
    skip = set(exclude)
    return tuple(n for n in range(low, high + 1) if n not in skip)


# Matrix sizes of the DGEMM problems. A prompt asks for its problem's n and rewards and evaluation time the kernel at
# that n. The eval sizes are new to training and not multiples of 32, so a tiled kernel must handle edges. Train
# problems draw from every size of 192..320 but those: with five train sizes the policy wrote kernels right at them
# and wrong at the held-out ones (docs/experiments.md, "Dense train sizes"). Both sets average n^3 within 10% of
# 256^3, the cost of timing at 256 (docs/data.md).
TRAIN_SPAN = "192..320"
EVAL_SIZES: tuple[int, ...] = (208, 240, 272, 304)
TRAIN_SIZES: tuple[int, ...] = size_span(TRAIN_SPAN, EVAL_SIZES)


# How often the SFT pairing draws a kernel of each generator kind (hpcrl_core/data/dgemm/variants.py) for a train
# prompt beyond the one prompt every kernel gets: a fixed weight per kind, never a timing, so two clones pair the same
# kernels with the same prompts (docs/data.md). The defaults are the kinds' median GFLOPS at n = 256 on one core of the
# dev VM, so faster kinds are imitated more, as a GFLOPS weighting would on average.
KIND_WEIGHTS: dict[str, float] = {"naive": 1.5, "reorder": 5.0, "tile_scalar": 3.0, "ikj_unrolled": 20.0,
                                  "blocked": 3.0, "ikj_vec": 13.0, "tile_vec": 20.0, "packed": 40.0}


def _default_sources() -> dict[str, tuple[str, ...]]:
    synthetic: tuple[str, ...] = ("synthetic",)
    return dict.fromkeys(SOURCE_KINDS, synthetic)

# Share of the generator's naive kernels that transpose B before the k loop (so both operands are read with unit
# stride): the only fast naive form, and the best kernel of several permitted sets without loop_reorder (docs/data.md).
NAIVE_TRANSPOSED = 0.8


MIN_PER_KERNEL = 3  # prompts every verified kernel gets before the weighted fill, where problems allow (docs/data.md)


class DgemmPrepParams(Section):
    train_problems: int = Field(1440, ge=1, le=100_000)
    eval_problems: int = Field(80, ge=1, le=10_000)
    variants: int = Field(320, ge=1, le=100_000)  # kernel variants generated and benchmarked for the corpus
    train_sizes: tuple[int, ...] = TRAIN_SIZES  # n of train problems (SFT prompts, RL): each kernel is timed at its n
    eval_sizes: tuple[int, ...] = EVAL_SIZES  # n of held-out problems, disjoint from train_sizes
    bench_n: int = Field(256, ge=16, le=4096)  # size at which corpus kernels are verified and timed
    per_kernel: int = Field(4, ge=1, le=100)  # train prompts each verified kernel is paired with
    # coverage rounds before the weighted fill: every kernel first gets up to this many prompts (scarcest first), so
    # kernels that use many techniques are not left with one or two (docs/data.md); unset, it is held to per_kernel
    min_per_kernel: int = Field(MIN_PER_KERNEL, ge=1, le=100)
    kind_weights: dict[str, float] = Field(default_factory=lambda: dict(KIND_WEIGHTS))  # pairing weight per kind
    # each SFT completion opens with "// plan: <kind> <parameters>" before the code, so the policy picks the kernel's
    # design in its first tokens, from the prompt, instead of by whichever #include line is commonest (docs/data.md)
    plan_line: bool = True
    # the completion first restates the permitted techniques ("// permitted: loop_reorder simd"), then the plan: the
    # tiny model chose kinds as if from the single techniques it saw, not their combination (docs/data.md)
    plan_permitted: bool = False
    vary_names: bool = False  # draw identifier spellings per variant (off: one spelling per name; docs/data.md)
    vary_layout: bool = False  # draw layout per variant (off: one house layout, only algorithms vary; docs/data.md)
    # share of the generator's naive kernels that transpose B first: their only fast form (docs/data.md)
    naive_transposed: float = Field(NAIVE_TRANSPOSED, ge=0.0, le=1.0)
    # packed kernels draw only vector micro-tiles that fit this node's vector registers (16 without AVX-512): a
    # spilling tile is a slow design the policy would otherwise learn (docs/data.md)
    fit_registers: bool = False
    # packed and array-form tile_vec kernels define their tile width as NR (VW * NV), not its value: a policy that
    # changes VW or NV cannot leave the width inconsistent (wrong results in RL runs; docs/data.md)
    derived_nr: bool = True
    # every kernel opens with the same standard headers (stddef, stdlib, string; omp/immintrin where used): a policy
    # that opens without <string.h> and then calls memset wrote a fifth of RL's failed kernels (docs/data.md)
    uniform_includes: bool = True

    @model_validator(mode="before")
    @classmethod
    def _train_span(cls, data: Any) -> Any:
        # train_sizes "A..B": every size of the span the eval sizes leave, so n varies as densely as a user's would;
        # unset, the default span less whichever eval sizes are given
        spec = data.get("train_sizes", TRAIN_SPAN) if isinstance(data, dict) else None
        if isinstance(spec, str):
            held = data.get("eval_sizes", EVAL_SIZES)
            exclude = [n for n in held if isinstance(n, int)] if isinstance(held, (list, tuple)) else []
            data = {**data, "train_sizes": size_span(spec, exclude)}
        if isinstance(data, dict) and "min_per_kernel" not in data and isinstance(data.get("per_kernel"), int):
            data = {**data, "min_per_kernel": max(1, min(MIN_PER_KERNEL, data["per_kernel"]))}
        return data

    @field_validator("train_sizes", "eval_sizes")
    @classmethod
    def _sizes(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if not v or len(set(v)) != len(v) or any(not 16 <= n <= 4096 for n in v):
            raise ValueError(f"sizes must be distinct matrix sizes in 16..4096, at least one; got {list(v)}")
        return v

    @field_validator("kind_weights")
    @classmethod
    def _kind_weights(cls, v: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(v) - set(KIND_WEIGHTS))
        missing = sorted(set(KIND_WEIGHTS) - set(v))
        bad = sorted(k for k, w in v.items() if not (w > 0 and math.isfinite(w)))
        if unknown or missing or bad:
            raise ValueError(f"give a positive finite weight for every kernel kind ({', '.join(KIND_WEIGHTS)}); "
                             f"unknown: {unknown or '-'}, missing: {missing or '-'}, not positive: {bad or '-'}")
        return v

    @model_validator(mode="after")
    def _min_per_kernel(self) -> DgemmPrepParams:
        if self.min_per_kernel > self.per_kernel:
            raise ValueError(f"min_per_kernel ({self.min_per_kernel}) must not exceed per_kernel ({self.per_kernel}): "
                             "a kernel gets at most per_kernel prompts")
        return self

    @model_validator(mode="after")
    def _disjoint(self) -> DgemmPrepParams:
        shared = sorted(set(self.train_sizes) & set(self.eval_sizes))
        if shared:
            raise ValueError(f"train_sizes and eval_sizes must be disjoint (eval asks sizes never trained); both "
                             f"hold {shared}")
        return self


class RacePrepParams(Section):
    per_pattern: int = Field(40, ge=1, le=10_000)  # synthetic items per (pattern, label); pairs: docs/data.md
    # more minimal pairs per pattern, generated for eval only (never trained) beside the 9:1 split of the per_pattern
    # pairs: 6 gives 168 more (with the split's 112, 280 eval items per language), above HARGO's 185 (C) and 157
    eval_pairs: int = Field(6, ge=0, le=10_000)
    # more pairs per pattern for RL only (data/<family>/rl.jsonl: never in SFT or eval), so RL asks programs its SFT
    # start has not memorised; 6 gives 168 RL prompts per language
    rl_pairs: int = Field(6, ge=0, le=10_000)
    tsan: bool = True  # run C items under ThreadSanitizer and report agreement in the card
    # narrow: the house surface (small name pools, one report format, the kernel alone); wide: more names, varied
    # report formats and race-free extra loops under both labels (hpcrl_core/data/race/generator.py)
    surface: Literal["narrow", "wide"] = "narrow"
    # pairs of the "grammar" pattern per language: random loop nests labelled by a dependence check instead of a
    # template (hpcrl_core/data/race/grammar.py); eval_pairs and rl_pairs more of them when above 0
    grammar_pairs: int = Field(0, ge=0, le=100_000)


class QAPrepParams(Section):
    paraphrases: int = Field(6, ge=1, le=20)  # question templates used per fact (the tables hold 6-7)
    # "phrasing": eval asks facts seen in training in words never seen (does SFT inject the fact?);
    # "fact": eval asks facts never seen in training (only answerable by a model that knew them before)
    hold_out: Literal["phrasing", "fact"] = "phrasing"
    # with hold_out "phrasing": held-out templates per fact (held_out_templates) asked in eval only, beside the 9:1
    # split of the trained phrasings; 2 gives 220+ MLPerf and 130+ PLP eval items (HARGO: 182 and 60). 0: none
    eval_phrasings: int = Field(2, ge=0, le=20)
    # of the paraphrases templates of each fact, this many go to RL only (data/<family>/rl.jsonl) instead of SFT:
    # wordings of trained facts that SFT never saw, which its start point answers imperfectly; at most all but one of
    # a fact's wordings (a fact keeps a trained wording, so paraphrases 1 gives no RL items). 0: none
    rl_phrasings: int = Field(1, ge=0, le=19)


class PrepareParams(Section):
    seed: int = 1234
    eval_fraction: float = Field(0.1, gt=0, lt=1)
    # records of one hpcgpt/dataracebench source that cannot be read or labelled are quarantined (listed in the data
    # card) up to this share of that source's records; past it the stage stops. 0: stop at the first such record
    max_quarantine_share: float = Field(0.01, ge=0, le=1)
    # share of each family's train groups moved to data/<family>/rl.jsonl (RL prompts never trained by SFT) after the
    # 9:1 split, beside the generated rl_pairs / rl_phrasings; for file sources (hpcgpt, dataracebench). 0: none
    rl_fraction: float = Field(0.0, ge=0, lt=1)
    # cleaned: hygiene (dedupe, conflicts kept out of eval, leak stripping, no eval question asked in train);
    # raw: the paper-faithful 9:1 split of the records as they came, with eval items that have an exact or a
    # conflicting twin in train counted in the card (docs/data.md)
    split: Literal["cleaned", "raw"] = "cleaned"
    sources: dict[str, tuple[str, ...]] = Field(default_factory=lambda: _default_sources())
    dgemm: DgemmPrepParams = DgemmPrepParams()
    race: RacePrepParams = RacePrepParams()
    mlperf: QAPrepParams = QAPrepParams()
    plp: QAPrepParams = QAPrepParams()

    @field_validator("sources")
    @classmethod
    def _known_sources(cls, v: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        problems = []
        for family, specs in v.items():
            if family not in SOURCE_KINDS:
                problems.append(f"unknown family {family!r} (allowed: {', '.join(SOURCE_KINDS)})")
                continue
            if not specs:
                problems.append(f"{family}: give at least one source")
            for spec in specs:
                kind, _, path = spec.partition(":")
                if kind not in SOURCE_KINDS[family]:
                    allowed = ", ".join(k if k == "synthetic" else k + ":PATH" for k in SOURCE_KINDS[family])
                    problems.append(f"{family}: source {spec!r} has kind {kind!r}; allowed: {allowed}")
                elif (kind == "synthetic") == bool(path):
                    problems.append(f"{family}: source {spec!r}: 'synthetic' takes no path, other kinds need one")
        if problems:
            raise ValueError("; ".join(problems))
        return v
