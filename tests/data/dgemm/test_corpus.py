"""Tests of the DGEMM corpus: benchmarking through a real engine (detected techniques, failure and mismatch report),
pairing kernels with problems (never a forbidden technique: a property test on random inputs; heavier kinds
preferred, light ones kept; no timing read) and the GFLOPS distribution.

Run: pytest tests/data/dgemm/test_corpus.py
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from hpcrl_core.bench.engine import Engine
from hpcrl_core.bench.executor import LocalExecutor
from hpcrl_core.bench.extract import extract_code
from hpcrl_core.bench.techniques import ALL_TECHNIQUES, Technique
from hpcrl_core.config.prepare import KIND_WEIGHTS
from hpcrl_core.data.dgemm.corpus import (
    CorpusKernel,
    benchmark_variants,
    gflops_distribution,
    plan_line,
    sft_records,
)
from hpcrl_core.data.dgemm.problems import Problem, make_problems, problem_record
from hpcrl_core.data.dgemm.variants import KINDS, Variant, generate_variants
from hpcrl_core.errors import DataError

T = Technique
NAIVE = """void dgemm(int n, const double *A, const double *B, double *C)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0.0;
            for (int k = 0; k < n; k++)
                s += A[i * n + k] * B[k * n + j];
            C[i * n + j] = s;
        }
}
"""


def _kernel(name: str, techs: frozenset[Technique], gflops: float, kind: str = "naive") -> CorpusKernel:
    return CorpusKernel(name, kind, f"/* {name} */\n{NAIVE}", techs, gflops, 0.01, techs, 256)


def _random_kernels(rng: random.Random, count: int) -> list[CorpusKernel]:
    return [_kernel(f"k{i}", frozenset(t for t in ALL_TECHNIQUES if rng.random() < 0.4), rng.uniform(0.3, 60),
                    rng.choice(sorted(KINDS))) for i in range(count)]


def _prompt_permits(record_text: str) -> set[str]:
    permitted = record_text.partition("Forbidden techniques")[0].partition("Permitted techniques")[2]
    return {t.value for t in ALL_TECHNIQUES if f"- {t.value}:" in permitted}


@pytest.fixture(scope="module")
def benchmarked(engine: Engine) -> tuple[list[Variant], list[CorpusKernel], dict]:
    variants = generate_variants(9, 40)
    with LocalExecutor(engine) as ex:
        kernels, report = benchmark_variants(variants, ex, engine.params.n)
    return variants, kernels, report


@pytest.mark.integration
def test_benchmarked_kernels_carry_detected_techniques_and_speed(benchmarked: tuple) -> None:
    variants, kernels, report = benchmarked
    assert report["total"] == 40 and report["verified"] == len(kernels) == 40, report["failures"]
    assert report["mismatched"] == 0 and report["agreement"] == 1.0, report["mismatches"]
    assert [k.name for k in kernels] == [v.name for v in variants]
    assert all(k.gflops > 0 and k.cv >= 0 and k.n == 64 for k in kernels)
    assert len({k.techniques for k in kernels}) >= 10


@pytest.mark.integration
def test_failures_and_technique_mismatches_are_reported(engine: Engine) -> None:
    broken = Variant("broken", NAIVE.replace("double s = 0.0;", "double s = ;"), frozenset(), "naive")
    wrong = Variant("wrong", NAIVE.replace("C[i * n + j] = s;", "C[i * n + j] = s + 1.0;"), frozenset(), "naive")
    unrolled = NAIVE.replace("            for (int k", "            #pragma GCC unroll 4\n            for (int k")
    mislabelled = Variant("mislabelled", unrolled, frozenset({T.SIMD}), "ikj_unrolled")
    with LocalExecutor(engine) as ex:
        kernels, report = benchmark_variants([broken, wrong, mislabelled], ex, engine.params.n)
    assert [k.name for k in kernels] == ["mislabelled"]
    assert kernels[0].techniques == {T.REGISTER_BLOCKING} and kernels[0].intended == {T.SIMD}
    assert report["failed"] == {"compile_error": 1, "wrong_result": 1}
    assert report["mismatched"] == 1 and report["mismatches"][0] == ["mislabelled", ["simd"], ["register_blocking"]]
    assert [f[:2] for f in report["failures"]] == [["broken", "compile_error"], ["wrong", "wrong_result"]]


@pytest.mark.integration
def test_corpus_records_only_pair_kernels_with_problems_that_permit_them(benchmarked: tuple) -> None:
    _, kernels, _ = benchmarked
    records = sft_records(kernels, make_problems("train", 9, 300), seed=9, per_kernel=3, kind_weights=KIND_WEIGHTS)
    assert {r.metadata["kernel_name"] for r in records} == {k.name for k in kernels}  # every kernel is used
    by_name = {k.name: k for k in kernels}
    for r in records:
        k = by_name[r.metadata["kernel_name"]]
        assert {t.value for t in k.techniques} <= _prompt_permits(r.question) == set(r.metadata["permitted"])
        assert extract_code(r.response, 65536).code == k.code
        assert r.metadata["kernel_techniques"] == sorted(t.value for t in k.techniques)
        assert r.metadata["kernel_kind"] == k.kind == k.name.split(":")[1] and k.kind in KINDS


def test_sft_records_never_pair_a_kernel_with_a_problem_that_forbids_its_techniques() -> None:
    for seed in range(30):
        rng = random.Random(seed)
        kernels = _random_kernels(rng, rng.randint(1, 40))
        problems = make_problems("train", seed, rng.randint(1, 120))
        per_kernel, rounds = rng.randint(1, 5), rng.randint(1, 6)  # rounds above the quota are held to it
        records = sft_records(kernels, problems, seed, per_kernel, KIND_WEIGHTS, min_per_kernel=rounds)
        by_name = {k.name: k for k in kernels}
        by_id = {p.id: p for p in problems}
        uses = Counter(r.metadata["kernel_name"] for r in records)
        assert max(uses.values(), default=0) <= per_kernel
        assert len({r.metadata["problem_id"] for r in records}) == len(records)  # a problem is used once
        for r in records:
            p, k = by_id[r.metadata["problem_id"]], by_name[r.metadata["kernel_name"]]
            assert k.techniques <= p.permitted and not k.techniques & p.forbidden, (seed, k, p)
        again = sft_records(kernels, problems, seed, per_kernel, KIND_WEIGHTS, min_per_kernel=rounds)
        assert again == records  # deterministic


def test_sft_records_prefer_heavier_kinds_but_keep_light_ones() -> None:
    kernels = [_kernel("light", frozenset(), 50.0, "naive"), _kernel("heavy", frozenset(), 1.0, "packed"),
               _kernel("mid", frozenset({T.LOOP_REORDER}), 10.0, "reorder")]
    problems = make_problems("train", 0, 400)
    weights = dict(KIND_WEIGHTS, naive=1.0, packed=50.0)
    uses = Counter(r.metadata["kernel_name"] for r in sft_records(kernels, problems, 0, 1000, weights))
    assert uses["light"] >= 1 and uses["mid"] >= 1
    assert uses["heavy"] > 5 * uses["light"]  # the kind's weight counts, not the kernel's own (here lower) GFLOPS
    flipped = Counter(r.metadata["kernel_name"]
                      for r in sft_records(kernels, problems, 0, 1000, dict(weights, naive=50.0, packed=1.0)))
    assert flipped["light"] > 5 * flipped["heavy"]


def test_coverage_rounds_give_the_kernels_only_rich_prompts_fit_their_share_first() -> None:
    # many plain kernels that every prompt fits, few that need all five techniques (only stage-5 prompts fit them):
    # with one coverage round the weighted fill hands the rich prompts to the heavy plain kind; with three rounds,
    # scarcest first, every kernel gets three where the problems allow, and the quota still caps them
    rich = frozenset(ALL_TECHNIQUES)
    kernels = [_kernel(f"plain{i}", frozenset(), 1.0, "packed") for i in range(60)]
    kernels += [_kernel(f"rich{i}", rich, 1.0, "naive") for i in range(6)]
    problems = make_problems("train", 3, 200)
    fitting = sum(1 for p in problems if p.permitted == rich)
    assert 18 <= fitting < 60  # enough stage-5 prompts for three each, not for the plain kernels as well
    weights = dict(KIND_WEIGHTS, naive=1.0, packed=100.0)

    def uses(min_per_kernel: int) -> Counter[str]:
        return Counter(r.metadata["kernel_name"]
                       for r in sft_records(kernels, problems, 3, 4, weights, min_per_kernel=min_per_kernel))

    one, three = uses(1), uses(3)
    assert min(one[f"rich{i}"] for i in range(6)) < 3
    assert all(three[k.name] >= 3 for k in kernels), three
    assert max(three.values()) <= 4
    assert uses(3) == three  # deterministic


def test_sft_records_refuse_a_kind_without_a_weight() -> None:
    weights = {k: w for k, w in KIND_WEIGHTS.items() if k != "packed"}
    with pytest.raises(DataError, match="packed"):
        sft_records([_kernel("k", frozenset(), 1.0, "packed")], make_problems("train", 0, 4), 0, 1, weights)
    with pytest.raises(DataError, match="naive"):
        sft_records([_kernel("k", frozenset(), 1.0)], make_problems("train", 0, 4), 0, 1, dict(KIND_WEIGHTS, naive=0))


def test_kind_weights_name_every_generator_kind() -> None:
    assert set(KIND_WEIGHTS) == set(KINDS)


def test_sft_record_format_matches_problem_records() -> None:
    k = _kernel("k", frozenset({T.OPENMP}), 3.25)
    p = Problem("dgemm-train-s0-00001", 512, (T.OPENMP, T.SIMD, T.LOOP_REORDER, T.CACHE_BLOCKING,
                                              T.REGISTER_BLOCKING), 1)
    (r,) = sft_records([k], [p], seed=4, per_kernel=2, kind_weights=KIND_WEIGHTS)
    assert r.family == "dgemm" and r.answer == "" and r.prompt == problem_record(p).prompt
    assert r.completion == [{"role": "assistant", "content": "```c\n" + k.code + "```"}]
    assert set(r.metadata) == set(problem_record(p).metadata)
    assert r.metadata["kernel_techniques"] == ["openmp"] and r.metadata["permitted"] == ["openmp"]
    assert r.provenance == {"source": "synthetic:dgemm-corpus@1", "seed": 4, "variant": "k"}


def test_plan_line_opens_the_completion_and_names_kind_and_parameters() -> None:
    k = _kernel("0007:packed:packed-ext8-12x16-kc384", frozenset(), 3.0, "packed")
    p = make_problems("train", 0, 1)[0]
    (plain,) = sft_records([k], [p], seed=1, per_kernel=1, kind_weights=KIND_WEIGHTS)
    (planned,) = sft_records([k], [p], seed=1, per_kernel=1, kind_weights=KIND_WEIGHTS, plan=True)
    assert planned.response == plain.response.replace(
        "```c\n", "```c\n// plan: packed: packed-ext8-12x16-kc384\n", 1)
    assert planned.prompt == plain.prompt and planned.metadata == plain.metadata


@pytest.mark.integration
def test_the_plan_line_changes_no_verdict_of_the_engine(engine: Engine) -> None:
    variants = [v for v in generate_variants(5, 16) if v.kind in ("packed", "tile_vec", "reorder", "blocked")][:4]
    kernels = [CorpusKernel(v.name, v.kind, v.code, v.intended, 1.0, 0.0, v.intended, 64) for v in variants]
    with LocalExecutor(engine) as ex:
        plain = ex.map([k.code for k in kernels], engine.params.n)
        planned = ex.map(["```c\n" + plan_line(k.kind, k.name) + k.code + "```" for k in kernels], engine.params.n)
    assert not any(r.cached for r in plain + planned)  # no result cache here: each was screened and run
    assert [r.status for r in planned] == [r.status for r in plain] and all(r.ok for r in plain)
    assert [r.techniques for r in planned] == [r.techniques for r in plain]


def test_sft_records_refuse_eval_problems() -> None:
    with pytest.raises(DataError, match="eval problem"):
        sft_records([_kernel("k", frozenset(), 1.0)], make_problems("eval", 0, 4), seed=0, per_kernel=1,
                    kind_weights=KIND_WEIGHTS)


def test_gflops_distribution() -> None:
    kernels = [_kernel(f"k{i}", frozenset({T.SIMD}) if i % 2 else frozenset(), float(g),
                       "packed" if g > 8 else "naive") for i, g in enumerate(range(1, 12))]
    d = gflops_distribution(kernels)
    assert (d["count"], d["min"], d["p10"], d["median"], d["p90"], d["max"], d["mean"]) == (11, 1, 2, 6, 10, 11, 6)
    assert d["median_by_kind"] == {"naive": 4.5, "packed": 10}
    assert d["by_techniques"] == {"none": 6, "simd": 5}
    assert gflops_distribution([])["median"] is None


def _pairs(kernels: list[CorpusKernel], problems: list[Problem]) -> set[tuple[str, str]]:
    return {(r.metadata["problem_id"], r.metadata["kernel_name"])
            for r in sft_records(kernels, problems, 3, 3, KIND_WEIGHTS)}


def test_pairing_ignores_timings_and_barely_moves_when_one_kernel_is_missing() -> None:
    # Two nodes verify almost the same kernels at different speeds; their corpora must agree (exactly, when the same
    # kernels verify), or the SFT policy (and RL's gain over it) differs from clone to clone.
    rng = random.Random(11)
    kernels = _random_kernels(rng, 120)
    problems = make_problems("train", 5, 360)
    base = _pairs(kernels, problems)
    fewer = _pairs(kernels[:40] + kernels[41:], problems)
    retimed = _pairs([_kernel(k.name, k.techniques, k.gflops * rng.uniform(0.3, 3.0), k.kind) for k in kernels],
                     problems)
    assert len(base) > 300
    assert len(base & fewer) >= 0.9 * len(base)
    assert retimed == base


def test_the_permitted_line_restates_the_prompts_techniques_in_its_order_before_the_plan() -> None:
    k = _kernel("0007:packed:packed-ext8-12x16-kc384", frozenset(), 3.0, "packed")
    rich = next(p for p in make_problems("train", 0, 400) if len(p.permitted) == 3)
    plain = next(p for p in make_problems("train", 0, 400) if not p.permitted)
    for p in (rich, plain):
        (r,) = sft_records([k], [p], seed=1, per_kernel=1, kind_weights=KIND_WEIGHTS, plan=True, plan_permitted=True)
        first, second = r.response.split("\n")[1:3]
        assert second == "// plan: packed: packed-ext8-12x16-kc384"
        listed = [ln[2:].split(":")[0] for ln in r.prompt[-1]["content"].splitlines()
                  if ln.startswith("- ") and not ln.startswith("- no ")]
        assert first == "// permitted: " + (" ".join(listed) if p.permitted else "none")
        assert sorted(first.split(": ", 1)[1].split()) == (sorted(t.value for t in p.permitted) or ["none"])
