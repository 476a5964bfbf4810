"""Tests of DGEMM problems: determinism, the train/eval separation (sizes and held-out permitted sets), the prompt's
contract and the record's metadata.

Run: pytest tests/data/dgemm/test_problems.py
"""

from __future__ import annotations

import pytest

from hpcrl_core.bench.techniques import ALL_TECHNIQUES, Technique
from hpcrl_core.config import parse_params
from hpcrl_core.config.prepare import KIND_WEIGHTS
from hpcrl_core.data.dgemm.problems import (
    DEFINITIONS,
    EVAL_SIZES,
    HEADERS,
    HELD_OUT_PERMITTED,
    TRAIN_SIZES,
    Problem,
    make_problems,
    problem_prompt,
    problem_record,
)
from hpcrl_core.errors import ConfigError, DataError

T = Technique
ALL_SUBSETS = {frozenset(t for b, t in enumerate(ALL_TECHNIQUES) if mask >> b & 1) for mask in range(32)}


def _sections(p: Problem) -> tuple[str, str]:
    """(permitted section, forbidden section) of the prompt text."""
    text = problem_prompt(p)[-1]["content"]
    head, _, tail = text.partition("Forbidden techniques")
    return head.partition("Permitted techniques")[2], tail


def test_problems_are_deterministic_in_split_seed_and_count() -> None:
    assert make_problems("train", 7, 50) == make_problems("train", 7, 50)
    assert make_problems("train", 7, 50) != make_problems("train", 8, 50)
    assert make_problems("train", 7, 20) == make_problems("train", 7, 50)[:20]
    assert len({p.id for p in make_problems("eval", 7, 50)}) == 50


def test_permitted_is_the_order_prefix_and_forbidden_the_rest() -> None:
    for p in make_problems("train", 0, 200) + make_problems("eval", 0, 100):
        assert p.permitted == frozenset(p.order[:p.stage])
        assert p.permitted | p.forbidden == frozenset(ALL_TECHNIQUES)
        assert not p.permitted & p.forbidden
        assert sorted(p.order) == sorted(ALL_TECHNIQUES)


def test_train_and_eval_sizes_are_disjoint() -> None:
    assert not set(TRAIN_SIZES) & set(EVAL_SIZES)
    train = {p.n for s in range(5) for p in make_problems("train", s, 200)}
    evals = {p.n for s in range(5) for p in make_problems("eval", s, 200)}
    assert train == set(TRAIN_SIZES) and evals == set(EVAL_SIZES)


def test_sizes_come_from_the_params_and_are_checked() -> None:
    d = parse_params({}).prepare.dgemm
    assert (d.train_sizes, d.eval_sizes) == (TRAIN_SIZES, EVAL_SIZES)
    assert {p.n for p in make_problems("eval", 0, 60, (48, 80))} == {48, 80}
    assert all(f"tune it for n = {p.n}." in problem_prompt(p)[-1]["content"] for p in make_problems("train", 0, 9))
    # the defaults cost about what timing every kernel at 256 did: mean n^3 within 10% of 256^3
    for sizes in (TRAIN_SIZES, EVAL_SIZES):
        assert abs(sum(n ** 3 for n in sizes) / len(sizes) / 256 ** 3 - 1) < 0.1
    with pytest.raises(ConfigError, match="must be disjoint.*both hold \\[256\\]"):
        parse_params({"prepare": {"dgemm": {"train_sizes": [192, 256], "eval_sizes": [256, 300]}}})
    # eval sizes alone: the default train span less those
    moved = parse_params({"prepare": {"dgemm": {"eval_sizes": [256, 300]}}}).prepare.dgemm.train_sizes
    assert moved == tuple(n for n in range(192, 321) if n not in (256, 300))
    for bad in ([], [64, 64], [8]):
        with pytest.raises(ConfigError, match="distinct matrix sizes in 16..4096"):
            parse_params({"prepare": {"dgemm": {"train_sizes": bad}}})
    with pytest.raises(ConfigError, match="positive matrix sizes"):
        make_problems("train", 0, 3, ())
    for section in ("evaluate", "rl_dgemm"):
        with pytest.raises(ConfigError, match=f"{section}.bench_n is gone: every kernel is timed at its problem's"):
            parse_params({section: {"bench_n": 256}})


def test_a_train_span_is_every_size_in_it_but_the_eval_sizes() -> None:
    d = parse_params({"prepare": {"dgemm": {"train_sizes": "40..48", "eval_sizes": [44, 46, 60]}}}).prepare.dgemm
    assert d.train_sizes == (40, 41, 42, 43, 45, 47, 48)
    span = parse_params({"prepare": {"dgemm": {"train_sizes": " 192 .. 320 "}}}).prepare.dgemm.train_sizes
    assert len(span) == 129 - len(EVAL_SIZES) and not set(span) & set(EVAL_SIZES)
    assert parse_params({"prepare": {"dgemm": {"train_sizes": "64..64"}}}).prepare.dgemm.train_sizes == (64,)
    for bad in ("320..192", "192-320", "a..b", "192..", ""):
        with pytest.raises(ConfigError, match="span \"A..B\" with A <= B"):
            parse_params({"prepare": {"dgemm": {"train_sizes": bad}}})
    # a span the eval sizes cover, or one leaving 16..4096, is refused as any list of sizes would be
    for bad, eval_sizes in (("208..208", [208]), ("8..20", [300])):
        with pytest.raises(ConfigError, match="distinct matrix sizes in 16..4096"):
            parse_params({"prepare": {"dgemm": {"train_sizes": bad, "eval_sizes": eval_sizes}}})


def test_kind_weights_come_from_the_params_and_are_checked() -> None:
    assert parse_params({}).prepare.dgemm.kind_weights == KIND_WEIGHTS
    assert parse_params({"prepare": {"dgemm": {"kind_weights": dict(KIND_WEIGHTS, packed=80)}}}).prepare.dgemm \
        .kind_weights["packed"] == 80
    for bad in ({"naive": 1.0}, dict(KIND_WEIGHTS, packed=0.0), dict(KIND_WEIGHTS, fancy=2.0),
                dict(KIND_WEIGHTS, naive=float("inf"))):
        with pytest.raises(ConfigError, match="positive finite weight for every kernel kind"):
            parse_params({"prepare": {"dgemm": {"kind_weights": bad}}})


def test_held_out_sets_are_eval_only_and_cover_every_technique() -> None:
    assert 5 <= len(HELD_OUT_PERMITTED) <= 6 and len(set(HELD_OUT_PERMITTED)) == len(HELD_OUT_PERMITTED)
    assert frozenset() not in HELD_OUT_PERMITTED and frozenset(ALL_TECHNIQUES) not in HELD_OUT_PERMITTED
    assert set().union(*HELD_OUT_PERMITTED) == set(ALL_TECHNIQUES)
    train = {p.permitted for s in range(10) for p in make_problems("train", s, 500)}
    assert not train & set(HELD_OUT_PERMITTED)
    assert train == ALL_SUBSETS - set(HELD_OUT_PERMITTED)  # every other combination is trained
    evals = make_problems("eval", 0, 60)
    assert {p.permitted for p in evals} >= set(HELD_OUT_PERMITTED)
    assert sum(p.permitted in HELD_OUT_PERMITTED for p in evals) == 30


def test_prompt_states_the_contract() -> None:
    p = Problem("x", 448, tuple(ALL_TECHNIQUES), 2)
    msgs = problem_prompt(p)
    assert [m["role"] for m in msgs] == ["user"]
    text = msgs[0]["content"]
    for needle in ("void dgemm(int n, const double *A, const double *B, double *C)", "C = A*B", "row-major",
                   "garbage", "every n >= 1", "n = 448", "No I/O", "no BLAS", "no main", "```c", "C99"):
        assert needle in text, needle
    assert all(h in text for h in HEADERS)
    assert len(text) < 1600  # compact: the small policy reads it on every sample


def test_prompt_lists_permitted_and_forbidden_with_definitions() -> None:
    for p in make_problems("train", 3, 60):
        permitted, forbidden = _sections(p)
        for t in ALL_TECHNIQUES:
            if t in p.permitted:
                assert f"- {t.value}: {DEFINITIONS[t]}" in permitted, (p, t)
                assert f" {t.value}:" not in forbidden, (p, t)
            else:  # a forbidden line never reads like a permitted one: "- no simd: ..."
                assert f"- no {t.value}: {DEFINITIONS[t]}" in forbidden, (p, t)
                assert f" {t.value}:" not in permitted, (p, t)
                assert f"- {t.value}:" not in forbidden, (p, t)


def test_prompt_of_stage_zero_and_full_stage() -> None:
    plain, _ = _sections(Problem("a", 256, tuple(ALL_TECHNIQUES), 0))
    assert "none" in plain
    _, nothing = _sections(Problem("b", 256, tuple(ALL_TECHNIQUES), 5))
    assert "none" in nothing


def test_problem_record_metadata_and_provenance() -> None:
    p = make_problems("eval", 11, 3)[2]
    r = problem_record(p)
    assert r.family == "dgemm" and r.completion == [] and r.answer == ""
    assert r.metadata == {"problem_id": p.id, "n": p.n, "stage": p.stage, "order": [t.value for t in p.order],
                          "permitted": sorted(t.value for t in p.permitted),
                          "forbidden": sorted(t.value for t in p.forbidden), "kernel_name": None,
                          "kernel_kind": None, "kernel_techniques": None}
    assert r.provenance == {"source": "synthetic:dgemm-problems@1", "seed": 11, "split": "eval"}
    assert problem_record(p, "train", 5).provenance["split"] == "train"
    assert r.question == problem_prompt(p)[-1]["content"]


def test_bad_arguments_are_rejected_with_the_allowed_values() -> None:
    with pytest.raises(ConfigError, match="unknown split 'test'; allowed: train, eval"):
        make_problems("test", 0, 3)
    with pytest.raises(DataError, match="permutation"):
        Problem("p", 256, (T.SIMD, T.SIMD, T.OPENMP, T.LOOP_REORDER, T.CACHE_BLOCKING), 1)
    with pytest.raises(DataError, match="stage must be 0..5, got 6"):
        Problem("p", 256, tuple(ALL_TECHNIQUES), 6)
