"""Held-out DGEMM evaluation of several models: per-model blocks, best-vs-references, per-problem WinRate, sample
rows, and the plots. Generation is replaced by fixed kernels (one model writes the naive kernel, the other a
faster i-k-j one, or a broken one), so the outcome is known; benchmarking is real (gcc, sandbox, small n).

Run: ``.venv/bin/python -m pytest tests/evaluation/test_dgemm.py -q``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from hpcrl_core.bench.result import BenchResult, Status
from hpcrl_core.config import Settings
from hpcrl_core.evaluation.dgemm import evaluate_dgemm, model_block, problem_medians, rows_by_model
from hpcrl_core.evaluation.plots import plot_gflops_distributions, plot_training_curves
from tests.evaluation.test_runner import EVAL_SIZES, NAIVE, K, _eval_params, workspace  # noqa: F401  (fixture)

IKJ = ("```c\nvoid dgemm(int n, const double *A, const double *B, double *C) {\n"
       "  for (int i = 0; i < n; i++) {\n    for (int j = 0; j < n; j++) C[i*n+j] = 0.0;\n"
       "    for (int k = 0; k < n; k++) {\n      double a = A[i*n+k];\n"
       "      for (int j = 0; j < n; j++) C[i*n+j] += a * B[k*n+j];\n    }\n  }\n}\n```")
PNG = b"\x89PNG\r\n\x1a\n"


def _ok(gflops: float, n: int = 64, **extra: Any) -> BenchResult:
    return BenchResult(status=Status.OK, n=n, gflops=gflops, extra=extra)


def test_problem_medians_and_block_ratios() -> None:
    results = [[_ok(2.0), _ok(4.0), BenchResult(status=Status.WRONG_RESULT)], [BenchResult(status=Status.TIMEOUT)]]
    assert problem_medians(results) == [3.0, 0.0]
    block = model_block(results, [["openmp"], []], numpy={64: 8.0}, peak_gflops=16.0)
    assert block["verified_rate"] == pytest.approx(2 / 4) and block["gflops_best"] == 4.0
    assert block["best_vs_numpy"] == pytest.approx(0.5) and block["best_vs_peak"] == pytest.approx(0.25)
    assert block["best_vs_numpy_n"] == 64
    assert model_block(results, [[], []], {64: 8.0}, None)["best_vs_peak"] is None


def test_best_vs_numpy_compares_each_kernel_with_numpy_at_its_own_size() -> None:
    # 12 GFLOPS where numpy makes 10 beats 30 where numpy makes 40; an agent's result carries its node's figure
    results = [[_ok(12.0, n=32)], [_ok(30.0, n=64)], [_ok(9.0, n=48, node_reference_gflops=6.0)]]
    block = model_block(results, [[], [], []], {32: 10.0, 64: 40.0, 48: 100.0}, None)
    assert block["gflops_best"] == 30.0
    assert block["best_vs_numpy"] == pytest.approx(1.5) and block["best_vs_numpy_n"] == 48
    assert model_block(results[:2], [[], []], {32: 10.0, 64: 40.0}, None)["best_vs_numpy"] == pytest.approx(1.2)
    nothing = model_block(results[:2], [[], []], {}, None)  # no numpy figure at either size: no ratio
    assert nothing["best_vs_numpy"] == 0.0 and nothing["best_vs_numpy_n"] is None


def test_two_models_compared_on_the_held_out_problems(workspace: tuple[Path, Path],  # noqa: F811
                                                      bench_dirs: Settings, monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    data_dir, model_dir = workspace
    kernels = {"sft": NAIVE, "rl": IKJ}

    def fake_sample(path: Path, problems: list[Any], params: Any, progress: Any = None,
                    corpus: Any = None) -> list[list[str]]:
        return [[kernels[path.name]] * K for _ in problems]

    for name in kernels:
        (tmp_path / name).mkdir()
    monkeypatch.setattr("hpcrl_core.evaluation.dgemm.sample_model", fake_sample)
    params = _eval_params()
    # the corpus: the naive kernel (no technique: every problem permits it) and i-k-j (loop_reorder: neither of
    # the two problems, which permit {openmp, simd} and {openmp}, does); both are timed again in this run
    data = tmp_path / "data"
    (data / "dgemm").mkdir(parents=True)
    shutil.copy(data_dir / "dgemm" / "problems_eval.jsonl", data / "dgemm" / "problems_eval.jsonl")
    (data / "dgemm" / "corpus.jsonl").write_text("".join(
        json.dumps({"name": name, "techniques": [], "gflops": 999.0, "code": code.strip("`c\n")}) + "\n"
        for name, code in (("naive", NAIVE), ("ikj", IKJ))))
    report, rows = evaluate_dgemm({n: tmp_path / n for n in kernels}, data, params, bench_dirs)
    sft, rl = report["sft"], report["rl"]
    assert sft["verified_rate"] == rl["verified_rate"] == 1.0
    assert rl["gflops_median"] > sft["gflops_median"] > 0  # i-k-j streams B's rows; the naive kernel strides
    assert rl["winrate_vs_sft"] == 1.0 and "winrate_vs_sft" not in sft
    oracle = report["oracle"]
    assert oracle["problems_with_oracle"] == 2 and oracle["corpus_verified"] == 2
    assert oracle["sizes"] == sorted(EVAL_SIZES) and oracle["corpus_timings"] == 2 * len(EVAL_SIZES)
    # every kernel, the models' and the corpus's, was timed at the size its problem asks for
    assert [row["n"] for row in oracle["table"]] == list(EVAL_SIZES)
    assert [row["n"] for row in rows if row["model"] == "rl"] == [n for n in EVAL_SIZES for _ in range(K)]
    assert [row["oracle_kernel"] for row in oracle["table"]] == ["naive", "naive"]  # i-k-j is not permitted
    assert all(row["oracle_gflops"] != 999.0 for row in oracle["table"])  # measured now, not read from the file
    assert sft["oracle_ratio"] == pytest.approx(1.0, rel=0.2)
    # rl's faster i-k-j kernels reorder the loops, which neither problem permits: WinRate and gflops_median count
    # them, the yardstick does not (a kernel using a forbidden technique is no answer to the problem)
    assert rl["oracle_ratio"] == 0.0 and rl["respect_rate"] == 0.0
    assert sft["distinct_kernels"] == rl["distinct_kernels"] == 1
    # {openmp, simd} is one of the eval-only sets, {openmp} is not: one problem on each side of the split
    assert oracle["held_out_problems"] == 1 and oracle["distinct_kernels"] == 1
    assert sft["oracle_problems_held_out"] == sft["oracle_problems_drawn"] == 1
    assert rl["oracle_ratio_held_out"] == rl["oracle_ratio_drawn"] == 0.0
    # the oracle (naive) is no faster than SFT's median (naive) on either problem: no headroom to close
    assert oracle["corpus_cached"] == 2 * len(EVAL_SIZES) and sft["oracle_ratio"] == 1.0  # the same sources: cached
    assert rl["headroom_excluded"] == 2 and rl["headroom_closed"] is None
    assert rl["best_vs_numpy"] > 0 and report["meta"]["problems"] == 2
    assert set(report["meta"]["numpy_gflops"]) == {str(n) for n in EVAL_SIZES}
    assert all(g > 0 for g in report["meta"]["numpy_gflops"].values())
    by_model = rows_by_model(rows)
    assert len(by_model["rl"]) == 2 * K and by_model["rl"][0]["status"] == "ok"
    assert "C[i*n+j] += a" in by_model["rl"][0]["completion"] and by_model["rl"][0]["model"] == "rl"
    assert by_model["sft"][0].keys() == by_model["rl"][0].keys()

    kernels["rl"] = "```c\nvoid dgemm(int n) {}\n```"  # the same problems, a model that never verifies
    report, rows = evaluate_dgemm({n: tmp_path / n for n in kernels}, data_dir, params, bench_dirs)
    assert report["rl"]["verified_rate"] == 0.0 and report["rl"]["winrate_vs_sft"] == 0.0
    assert report["rl"]["distinct_kernels"] == 0
    assert "corpus.jsonl is missing" in report["oracle"]["note"] and report["rl"]["oracle_ratio"] is None
    out = tmp_path / "dist.png"
    plot_gflops_distributions(rows_by_model(rows), out)
    assert out.read_bytes()[:8] == PNG and out.stat().st_size > 5000


def test_training_curves_plot_with_and_without_history(tmp_path: Path) -> None:
    history = [{"step": s, "reward": -50.0 + 10 * s, "reward/gflops_median": 1.0 + s, "reward/gflops_max": 2.0 + s}
               for s in range(1, 6)] + [{"step": 5, "train_runtime": 12.0}]
    plot_training_curves(history, tmp_path / "curves.png")
    plot_training_curves([], tmp_path / "empty.png")
    for name in ("curves.png", "empty.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG
    assert (tmp_path / "curves.png").stat().st_size > (tmp_path / "empty.png").stat().st_size
