"""The oracle yardstick: which corpus kernel is each problem's oracle, the ratios and headroom computed on known
numbers (each expected value worked out independently here), distinct kernels, and the report blocks it adds.
No engine: results are given; the real-engine run is in ``test_dgemm.py``.

Run: ``.venv/bin/python -m pytest tests/evaluation/test_oracle.py -q``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from hpcrl_core.bench.result import BenchResult, Status
from hpcrl_core.data.dgemm.problems import HELD_OUT_PERMITTED, make_problems, problem_record
from hpcrl_core.errors import DataError
from hpcrl_core.evaluation.dgemm import add_yardstick, model_block
from hpcrl_core.evaluation.oracle import (
    CorpusEntry,
    Oracle,
    distinct_kernels,
    headroom_closed,
    is_held_out,
    oracle_distinct,
    oracle_metrics,
    read_corpus,
    select_oracles,
    time_corpus,
)
from hpcrl_core.evaluation.promotion import report_metrics
from hpcrl_core.evaluation.report import write_report

PLAIN = "void dgemm(int n, const double *A, const double *B, double *C) { /* plain */ }"


def _ok(gflops: float, *techniques: str, cached: bool = False, n: int = 64) -> BenchResult:
    return BenchResult(status=Status.OK, n=n, gflops=gflops, techniques=tuple(sorted(techniques)), cached=cached)


def _everywhere(problems: Sequence[Any], results: list[BenchResult]) -> dict[int, list[BenchResult]]:
    """The same corpus results at every size the problems ask for."""
    return {int(p.metadata["n"]): results for p in problems}


def _corpus(*names: str) -> list[CorpusEntry]:
    return [CorpusEntry(name, f"void dgemm(void) {{ /* {name} */ int {name}; }}") for name in names]


def test_the_oracle_is_the_fastest_verified_kernel_the_problem_permits() -> None:
    corpus = _corpus("plain", "omp", "omp_simd", "blocked_wrong", "blocked_slow")
    results = [_ok(3.0), _ok(10.0, "openmp"), _ok(20.0, "openmp", "simd"),
               BenchResult(status=Status.WRONG_RESULT, gflops=None, techniques=("cache_blocking",)),
               _ok(1.0, "cache_blocking")]
    permitted = [[], ["openmp"], ["openmp", "simd"], ["cache_blocking"], ["simd"]]
    oracles = select_oracles(corpus, {64: results}, permitted, [64] * 5)
    assert [o.kernel for o in oracles] == ["plain", "omp", "omp_simd", "plain", "plain"]
    assert [o.gflops for o in oracles] == [3.0, 10.0, 20.0, 3.0, 3.0]  # the failed blocked kernel never counts
    assert oracles[2].techniques == ("openmp", "simd")
    # no plain kernel: a problem that permits nothing the corpus uses has no oracle, not a number
    none = select_oracles(corpus[1:3], {64: results[1:3]}, [[], ["simd"], ["openmp"]], [64] * 3)
    assert none[0] == none[1] == Oracle() and none[2].kernel == "omp"


def test_each_problem_takes_its_oracle_at_its_own_size() -> None:
    corpus = _corpus("tiled", "streamed")
    # the tiled kernel wins at 96, loses at 80 (its tile meets an edge); no results at 112
    results = {96: [_ok(30.0, "cache_blocking", n=96), _ok(20.0, "loop_reorder", n=96)],
               80: [_ok(12.0, "cache_blocking", n=80), _ok(19.0, "loop_reorder", n=80)]}
    both = ["cache_blocking", "loop_reorder"]
    oracles = select_oracles(corpus, results, [both, both, both, ["cache_blocking"]], [96, 80, 112, 80])
    assert [(o.kernel, o.gflops) for o in oracles] == [("tiled", 30.0), ("streamed", 19.0), (None, None),
                                                       ("tiled", 12.0)]


def test_ratios_and_headroom_on_known_numbers() -> None:
    oracles = [Oracle("a", 10.0), Oracle("b", 40.0), Oracle(), Oracle("c", 5.0), Oracle("d", 60.0)]
    permitted = [["simd"], ["openmp", "simd", "cache_blocking", "register_blocking"], [],
                 ["openmp"], ["openmp", "simd", "cache_blocking", "register_blocking", "loop_reorder"]]
    rl = [8.0, 20.0, 7.0, 5.0, 15.0]
    sft = [2.0, 10.0, 1.0, 6.0, 3.0]
    m = oracle_metrics(rl, oracles, permitted)
    # ratios where an oracle exists: 0.8, 0.5, 1.0, 0.25 -> median of four = (0.5 + 0.8) / 2
    assert m["oracle_ratio"] == pytest.approx(0.65) and m["oracle_problems"] == 4
    # rich problems (4 and 5 techniques): 0.5 and 0.25
    assert m["oracle_ratio_rich"] == pytest.approx(0.375) and m["oracle_problems_rich"] == 2
    h = headroom_closed(rl, sft, oracles)
    # problem d: oracle 5 is not above SFT's 6 -> excluded; c has no oracle -> not counted at all
    expected = [(8 - 2) / (10 - 2), (20 - 10) / (40 - 10), (15 - 3) / (60 - 3)]
    assert h["headroom_closed"] == pytest.approx(sum(expected) / 3)
    assert h["headroom_closed_median"] == pytest.approx(sorted(expected)[1])
    assert h["headroom_problems"] == 3 and h["headroom_excluded"] == 1
    # held-out sets: ["openmp", "simd", "cache_blocking", "register_blocking"] only (problem b, ratio 0.5)
    assert m["oracle_ratio_held_out"] == pytest.approx(0.5) and m["oracle_problems_held_out"] == 1
    assert m["oracle_ratio_drawn"] == pytest.approx(0.8) and m["oracle_problems_drawn"] == 3  # 0.8, 1.0, 0.25
    empty = oracle_metrics([1.0], [Oracle()], [["simd"]])
    assert empty["oracle_ratio"] is None and empty["oracle_ratio_rich"] is None and empty["oracle_problems"] == 0
    assert headroom_closed([1.0], [2.0], [Oracle()])["headroom_closed"] is None
    assert headroom_closed([1.0], [2.0], [Oracle()])["headroom_closed_median"] is None
    # an oracle barely above the baseline: the mean follows that one problem, the median does not
    near = headroom_closed([0.0, 8.0, 9.0], [5.59, 2.0, 3.0],
                           [Oracle("a", 5.65), Oracle("b", 10.0), Oracle("c", 10.0)])
    assert near["headroom_closed"] < -25 and near["headroom_closed_median"] == pytest.approx(6 / 8)
    # ... a gap of 1% of the oracle is within the engine's spread: the measurable mean leaves it out
    assert near["headroom_closed_measurable"] == pytest.approx((6 / 8 + 6 / 7) / 2)
    assert near["headroom_unmeasurable"] == 1 and near["headroom_problems"] == 3
    edge = headroom_closed([10.0, 5.0], [9.4, 9.6], [Oracle("a", 10.0), Oracle("b", 10.0)])  # gaps 6% and 4%
    assert edge["headroom_unmeasurable"] == 1 and edge["headroom_closed_measurable"] == pytest.approx(1.0)
    assert edge["headroom_closed"] == pytest.approx((1.0 - 4.6 / 0.4) / 2)
    assert h["headroom_closed_measurable"] == h["headroom_closed"] and h["headroom_unmeasurable"] == 0
    # gap-weighted: gains and gaps in units of each oracle, summed over the counted problems a, b, e
    gains = (8 - 2) / 10 + (20 - 10) / 40 + (15 - 3) / 60
    gaps = (10 - 2) / 10 + (40 - 10) / 40 + (60 - 3) / 60
    assert h["headroom_closed_weighted"] == pytest.approx(gains / gaps)
    # the problem with a 1% gap where the model lost everything moves it by what was lost (a whole oracle), not 84x
    assert near["headroom_closed_weighted"] == pytest.approx((-5.59 / 5.65 + 6 / 10 + 6 / 10)
                                                             / ((5.65 - 5.59) / 5.65 + 8 / 10 + 7 / 10))
    assert 0 < near["headroom_closed_weighted"] < near["headroom_closed_median"]
    assert headroom_closed([1.0], [2.0], [Oracle()])["headroom_closed_weighted"] is None
    at_oracle = headroom_closed([10.0, 4.0], [2.0, 2.0], [Oracle("a", 10.0), Oracle("b", 4.0)])
    assert at_oracle["headroom_closed_weighted"] == pytest.approx(1.0)


def test_distinct_kernels_counts_verified_sources_up_to_layout_and_comments() -> None:
    fenced = f"Here it is:\n```c\n{PLAIN}\n```\n"
    spaced = PLAIN.replace("{ ", "{\n\n   ").replace("/* plain */", "/* another comment */")
    other = PLAIN.replace("/* plain */", "int x;")
    results = [[_ok(1.0), _ok(1.0), BenchResult(status=Status.COMPILE_ERROR)], [_ok(2.0), _ok(1.0)]]
    completions = [[fenced, spaced, "```c\nbroken\n```"], [other, PLAIN]]
    assert distinct_kernels(results, completions) == 2
    assert distinct_kernels([[BenchResult(status=Status.TIMEOUT)]], [[PLAIN]]) == 0


class _CountingBackend:
    def __init__(self) -> None:
        self.seen: list[tuple[str, int | None]] = []

    def submit(self, completion: str | bytes, n: int | None = None) -> Future[BenchResult]:
        self.seen.append((str(completion), n))
        fut: Future[BenchResult] = Future()
        fut.set_result(_ok(float(len(self.seen)), n=n or 0))
        return fut


def test_each_distinct_corpus_source_is_timed_once_per_size() -> None:
    corpus = [CorpusEntry("a", PLAIN), CorpusEntry("b", "void dgemm(void) {}"),
              CorpusEntry("a_copy", PLAIN.replace("/* plain */", "\n"))]
    backend = _CountingBackend()
    results = time_corpus(backend, corpus, [64, 48, 64])  # type: ignore[arg-type]
    assert sorted(n for _, n in backend.seen) == [48, 48, 64, 64], "two sources, two sizes, each pair once"
    assert set(results) == {64, 48}
    for n, res in results.items():
        assert res[0] is res[2] and all(r.n == n for r in res)
    assert results[64][1].gflops == 2.0 and results[48][1].gflops == 4.0


def test_read_corpus_missing_and_malformed(tmp_path: Path) -> None:
    assert read_corpus(tmp_path) is None
    (tmp_path / "dgemm").mkdir()
    path = tmp_path / "dgemm" / "corpus.jsonl"
    path.write_text(json.dumps({"name": "k1", "techniques": ["simd"], "gflops": 9.0, "code": PLAIN}) + "\n\n")
    assert read_corpus(tmp_path) == [CorpusEntry("k1", PLAIN)]
    path.write_text('{"name": "k1"}\n')
    with pytest.raises(DataError, match="corpus.jsonl:1"):
        read_corpus(tmp_path)


def test_kernels_using_a_forbidden_technique_do_not_count_towards_the_oracle() -> None:
    problems = [problem_record(p) for p in make_problems("eval", 0, 2)]
    permitted = [list(p.metadata["permitted"]) for p in problems]
    forbidden = next(t for t in ("openmp", "simd", "cache_blocking", "register_blocking", "loop_reorder")
                     if t not in permitted[0])
    corpus, corpus_results = _corpus("plain"), _everywhere(problems, [_ok(10.0)])
    # rl's fast kernels on the first problem use a technique it forbids; sft's plain kernels respect it
    results = {"sft": [[_ok(2.0), _ok(2.0)], [_ok(5.0)]],
               "rl": [[_ok(40.0, forbidden), _ok(40.0, forbidden), _ok(3.0)], [_ok(5.0)]]}
    samples = {name: [[PLAIN] * len(g) for g in res] for name, res in results.items()}
    report: dict[str, Any] = {name: model_block(res, permitted, {64: 16.0}, None) for name, res in results.items()}
    block = add_yardstick(report, problems, results, samples, corpus, corpus_results)
    first = block["table"][0]
    assert (first["rl_median"], first["rl_best"], first["rl_ratio"]) == (3.0, 3.0, 0.3)  # not 40 / 10 = 4.0
    assert report["rl"]["gflops_median"] == 22.5 and report["rl"]["respect_rate"] < 1  # over every verified kernel
    assert report["rl"]["headroom_closed"] == pytest.approx(((3.0 - 2.0) / (10.0 - 2.0) + 0.0) / 2)


def test_report_blocks_gain_the_yardstick_and_flatten_to_numbers(tmp_path: Path) -> None:
    problems = [problem_record(p) for p in make_problems("eval", 0, 3)]  # permitted: {openmp, simd}, {openmp}, ...
    permitted = [list(p.metadata["permitted"]) for p in problems]
    corpus = _corpus("plain", "omp")
    corpus_results = _everywhere(problems, [_ok(4.0, cached=True), _ok(8.0, "openmp")])
    sizes = sorted(corpus_results)
    results = {"sft": [[_ok(2.0), BenchResult(status=Status.WRONG_RESULT)], [_ok(4.0)], [_ok(1.0)]],
               "rl": [[_ok(6.0), _ok(6.0)], [_ok(8.0)], [_ok(3.0)]]}
    samples = {"sft": [[PLAIN, "x"], [PLAIN], [PLAIN]],
               "rl": [[PLAIN, PLAIN], [PLAIN.replace("/* plain */", "int a;")], [PLAIN]]}
    report: dict[str, Any] = {name: model_block(res, permitted, {64: 16.0}, None) for name, res in results.items()}
    block = add_yardstick(report, problems, results, samples, corpus, corpus_results)
    assert block["problems_with_oracle"] + block["problems_without_oracle"] == 3
    assert block["corpus_distinct"] == 2 and block["corpus_verified"] == 2
    assert block["corpus_timings"] == 2 * len(sizes) and block["corpus_cached"] == len(sizes)
    first = block["table"][0]
    assert first["problem_id"] == problems[0].metadata["problem_id"] and first["oracle_kernel"] == "omp"
    assert first["n"] == problems[0].metadata["n"]
    assert (first["sft_median"], first["sft_best"], first["rl_median"], first["rl_ratio"]) == (2.0, 2.0, 6.0, 0.75)
    assert report["sft"]["distinct_kernels"] == 1 and report["rl"]["distinct_kernels"] == 2
    assert "headroom_closed" in report["rl"] and "headroom_closed" not in report["sft"]
    assert report["rl"]["best_vs_numpy"] == pytest.approx(8.0 / 16.0)
    report["oracle"] = block
    metrics = report_metrics(report)
    assert metrics["rl.oracle_ratio"] == report["rl"]["oracle_ratio"] and metrics["oracle.problems_with_oracle"] >= 1
    assert not any(k.startswith("oracle.table") for k in metrics)
    write_report(report, tmp_path / "eval_dgemm.json")  # no NaN anywhere
    missing = add_yardstick({"sft": {}, "rl": {}}, problems, results, samples, None, {})
    assert missing["problems_without_oracle"] == 3 and "corpus.jsonl is missing" in missing["note"]


def test_held_out_sets_follow_the_problem_generator_whatever_the_order() -> None:
    assert is_held_out(["simd", "openmp"]) and is_held_out(["register_blocking", "cache_blocking"])
    assert not is_held_out(["openmp"]) and not is_held_out([]) and not is_held_out(["openmp", "simd", "loop_reorder"])
    assert sum(is_held_out(sorted(str(t) for t in s)) for s in HELD_OUT_PERMITTED) == len(HELD_OUT_PERMITTED)


def test_oracle_distinct_counts_sources_not_names() -> None:
    corpus = [CorpusEntry("a", "void f() { }"), CorpusEntry("b", "void f()  {  }  // the same source"),
              CorpusEntry("c", "void g() { }")]
    assert oracle_distinct(corpus, [Oracle("a", 1.0), Oracle("b", 2.0), Oracle(), Oracle("a", 3.0)]) == 1
    assert oracle_distinct(corpus, [Oracle("a", 1.0), Oracle("c", 2.0)]) == 2
    assert oracle_distinct(corpus, [Oracle()]) == 0
