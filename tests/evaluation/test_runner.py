"""Post-SFT evaluation: DGEMM metric arithmetic, seeded batched generation, and a whole ``evaluate_policy`` run.

The model is an untrained tiny Qwen2 (hidden 32, 2 layers) with a tokenizer trained on tiny data; its kernels are
format violations, which the report must still describe in well-formed numbers. CPU, offline, well under a minute.

Run: ``.venv/bin/python -m pytest tests/evaluation/test_runner.py -q``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hpcrl_core.bench.result import BenchResult, Status
from hpcrl_core.config import Params, Settings, parse_params
from hpcrl_core.data.dgemm.problems import make_problems, problem_record
from hpcrl_core.data.schema import Record, assistant, messages, write_jsonl
from hpcrl_core.errors import ConfigError
from hpcrl_core.evaluation.dgemm import dgemm_metrics
from hpcrl_core.evaluation.generate import generate
from hpcrl_core.evaluation.report import write_report
from hpcrl_core.evaluation.runner import evaluate_policy, load_model
from hpcrl_core.models.build import load_policy
from tests.conftest import FAST_BENCH
from tests.training.test_sft import make_data, make_params

K = 2


def _ok(gflops: float, *techniques: str) -> BenchResult:
    return BenchResult(status=Status.OK, n=64, gflops=gflops, techniques=tuple(sorted(techniques)))


def test_dgemm_metrics_counts_forbidden_technique_as_not_respecting() -> None:
    results = [_ok(2.0, "openmp", "simd"), _ok(4.0, "openmp"), _ok(9.0, "cache_blocking"),
               BenchResult(status=Status.WRONG_RESULT), BenchResult(status=Status.COMPILE_ERROR),
               BenchResult(status=Status.FORMAT_VIOLATION)]
    permitted = [["openmp", "simd"], ["openmp", "simd"], ["openmp", "simd"], ["simd"], [], []]
    m = dgemm_metrics(results, permitted)
    assert m["samples"] == 6 and m["verified"] == 3 and m["respecting"] == 2
    assert m["compile_rate"] == pytest.approx(4 / 6)  # wrong_result reached the run step; compile_error did not
    assert m["verified_rate"] == pytest.approx(3 / 6)
    assert m["respect_rate"] == pytest.approx(2 / 3)  # the cache-blocking kernel used a forbidden technique
    assert m["ok_respect_rate"] == pytest.approx(2 / 6)
    assert (m["gflops_mean"], m["gflops_median"], m["gflops_max"]) == pytest.approx((5.0, 4.0, 9.0))
    assert sum(m["status_counts"].values()) == 6 and m["status_counts"]["ok"] == 3


def test_dgemm_metrics_without_verified_kernels_is_all_zero_not_an_error() -> None:
    m = dgemm_metrics([BenchResult(status=Status.FORMAT_VIOLATION)] * 3, [[]] * 3)
    assert m["verified_rate"] == m["respect_rate"] == m["gflops_median"] == m["compile_rate"] == 0.0
    assert m["status_counts"]["format_violation"] == 3
    with pytest.raises(ValueError, match="3 results but 1 permitted"):
        dgemm_metrics([BenchResult(status=Status.OK)] * 3, [[]])


EVAL_SIZES = (96, 128)  # the two held-out problems of the workspace ask for these sizes, one each

def _race_eval(family: str) -> list[Record]:
    return [Record(family=family, prompt=messages(None, f"Does program {i} contain a data race?"),
                   completion=assistant(label), answer=label) for i, label in enumerate(("yes", "no", "yes"))]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(data_dir, model_dir): tiny data with labelled race items and 2 eval problems, an untrained saved model."""
    root = tmp_path_factory.mktemp("eval")
    data_dir = make_data(root / "data")
    for family in ("race_c", "race_fortran"):
        write_jsonl(data_dir / family / "eval.jsonl", _race_eval(family))
    write_jsonl(data_dir / "dgemm" / "problems_eval.jsonl",
                [problem_record(p) for p in make_problems("eval", 0, 2, EVAL_SIZES)])
    model, tokenizer = load_policy(make_params().model, data_dir, seed=3)
    model_dir = root / "model"
    model.save_pretrained(str(model_dir))
    tokenizer.save_pretrained(str(model_dir))
    return data_dir, model_dir


def _eval_params(**evaluate: Any) -> Params:
    options = {"samples_per_problem": K, "dgemm_max_new_tokens": 24, "qa_max_new_tokens": 8, "batch_size": 4,
               "seed": 5, "dgemm_plan_vocabulary": "none", **evaluate}  # the workspace has no corpus to hold plans to
    return parse_params({"bench": FAST_BENCH, "evaluate": options})


def test_greedy_generation_is_repeatable_and_independent_of_batching(workspace: tuple[Path, Path]) -> None:
    model, tokenizer = load_model(workspace[1])
    prompts = [messages(None, "Hi"), messages("You are an HPC expert.", "Explain OpenMP schedule(static) in detail."),
               messages(None, "Does this loop race? for (i = 0; i < n; i++) a[i+1] = a[i];")]
    first = generate(model, tokenizer, prompts, temperature=0.0, max_new_tokens=12, batch_size=3)
    assert first == generate(model, tokenizer, prompts, temperature=0.0, max_new_tokens=12, batch_size=3)
    one_by_one = [generate(model, tokenizer, [p], temperature=0.0, max_new_tokens=12)[0] for p in prompts]
    assert first == one_by_one  # left padding: the shorter prompts in the batch answer as they do alone
    assert all(len(group) == 1 and group[0] for group in first)


def test_sampling_is_seeded_and_returns_k_per_prompt(workspace: tuple[Path, Path]) -> None:
    model, tokenizer = load_model(workspace[1])
    prompts = [messages(None, "Write a DGEMM kernel."), messages(None, "Hi")]
    seen: list[tuple[int, int]] = []

    def run(seed: int) -> list[list[str]]:
        return generate(model, tokenizer, prompts, temperature=1.0, max_new_tokens=10, num_return_sequences=3,
                        batch_size=1, seed=seed, progress=lambda done, total: seen.append((done, total)))

    a = run(1)
    assert a == run(1) and a != run(2)
    assert [len(g) for g in a] == [3, 3]
    assert seen[:2] == [(1, 2), (2, 2)]


def test_evaluate_policy_report_is_well_formed(workspace: tuple[Path, Path], bench_dirs: Settings,
                                              tmp_path: Path) -> None:
    data_dir, model_dir = workspace
    lines: list[str] = []
    report = evaluate_policy(model_dir, data_dir, _eval_params(), bench_dirs, progress=lines.append)
    d = report["dgemm"]
    assert d["problems"] == 2 and d["k"] == K and sum(d["status_counts"].values()) == 2 * K == d["samples"]
    for key in ("compile_rate", "verified_rate", "respect_rate", "ok_respect_rate"):
        assert 0.0 <= d[key] <= 1.0, key
    assert d["gflops_median"] >= 0.0 and d["sizes"] == sorted(EVAL_SIZES)
    assert "each kernel benchmarked at its problem's n" in report["meta"]["bench_note"]
    race = report["race"]
    assert race["n"] == 6 and race["n_race_c"] == race["n_race_fortran"] == 3
    assert all(0.0 <= race[k] <= 1.0 for k in ("f1", "precision", "recall"))
    assert 0.0 <= report["mlperf"]["em"] <= report["mlperf"]["avg_score"] <= 1.0 and report["mlperf"]["n"] == 1
    assert -1.0 <= report["plp"]["similarity"] <= 1.0 and report["plp"]["n"] == 1
    meta = report["meta"]
    assert meta["k"] == K and set(meta["seconds"]) == {"dgemm", "race", "mlperf", "plp"} and meta["notes"] == {}
    assert any(line.startswith("dgemm: sampled problems") for line in lines)
    assert any(line.startswith("dgemm: benchmarked kernels 4/4") for line in lines)
    out = tmp_path / "reports" / "sft.json"
    write_report(report, out)
    saved = json.loads(out.read_text())
    for path in ("dgemm.verified_rate", "dgemm.respect_rate", "dgemm.gflops_median", "race.f1", "mlperf.em",
                 "mlperf.avg_score", "plp.similarity"):
        section, key = path.split(".")
        assert isinstance(saved[section][key], float), path
    assert list(out.parent.iterdir()) == [out]  # no temp file left behind


NAIVE = ("```c\nvoid dgemm(int n, const double *A, const double *B, double *C) {\n"
         "  for (int i = 0; i < n; i++)\n    for (int j = 0; j < n; j++) {\n      double s = 0.0;\n"
         "      for (int k = 0; k < n; k++) s += A[i*n+k] * B[k*n+j];\n      C[i*n+j] = s;\n    }\n}\n```")


def test_a_correct_plain_kernel_is_verified_and_respects_every_problem(
        workspace: tuple[Path, Path], bench_dirs: Settings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def fake_generate(model: Any, tokenizer: Any, prompts: list[Any], **kw: Any) -> list[list[str]]:
        return [[NAIVE] * kw.get("num_return_sequences", 1) for _ in prompts]

    monkeypatch.setattr("hpcrl_core.evaluation.runner.generate", fake_generate)

    monkeypatch.setattr("hpcrl_core.evaluation.dgemm.generate", fake_generate)  # DGEMM sampling
    samples = tmp_path / "reports" / "sft_samples.jsonl"
    report = evaluate_policy(workspace[1], workspace[0], _eval_params(), bench_dirs, samples_path=samples)
    d = report["dgemm"]
    assert d["status_counts"]["ok"] == 2 * K, d["status_counts"]
    assert d["compile_rate"] == d["verified_rate"] == d["respect_rate"] == d["ok_respect_rate"] == 1.0
    assert 0.0 < d["gflops_median"] <= d["gflops_max"]
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    dgemm = [r for r in rows if r["family"] == "dgemm"]
    assert len(dgemm) == 2 * K and [r["sample"] for r in dgemm] == list(range(K)) * 2
    assert all(r["status"] == "ok" and r["respects"] is True and r["gflops"] > 0 and r["completion"] == NAIVE
               for r in dgemm)
    race = [r for r in rows if r["family"] in ("race_c", "race_fortran")]
    assert len(race) == 6 and all(r["parsed"] is None and r["correct"] is False for r in race)  # a kernel: no verdict
    assert [r["family"] for r in rows if r["family"] in ("mlperf", "plp")] == ["mlperf", "plp"]
    assert {"exact", "score"} <= rows[-2].keys() and -1.0 <= rows[-1]["similarity"] <= 1.0
    assert report["plp"]["similarity"] == rows[-1]["similarity"]


def test_samples_record_why_a_kernel_failed_and_which_race_answers_were_wrong(
        workspace: tuple[Path, Path], bench_dirs: Settings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    broken = "```c\nvoid dgemm(int n, const double *A, const double *B, double *C) { C[0] = undeclared_x; }\n```"

    def fake_generate(model: Any, tokenizer: Any, prompts: list[Any], **kw: Any) -> list[list[str]]:
        if kw.get("num_return_sequences", 1) > 1:
            return [[broken] * kw["num_return_sequences"] for _ in prompts]
        return [["yes: two threads write the same element."] for _ in prompts]

    monkeypatch.setattr("hpcrl_core.evaluation.runner.generate", fake_generate)

    monkeypatch.setattr("hpcrl_core.evaluation.dgemm.generate", fake_generate)  # DGEMM sampling
    samples = tmp_path / "sft_samples.jsonl"
    report = evaluate_policy(workspace[1], workspace[0], _eval_params(), bench_dirs, samples_path=samples)
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    dgemm = [r for r in rows if r["family"] == "dgemm"]
    assert all(r["status"] == "compile_error" and "undeclared_x" in r["detail"] and r["respects"] is None
               for r in dgemm)
    race = [r for r in rows if r["family"] in ("race_c", "race_fortran")]
    assert {r["parsed"] for r in race} == {"yes"}
    assert [r["correct"] for r in race] == [r["gold"] == "yes" for r in race]
    assert sum(r["correct"] for r in race) == 4 and report["race"]["recall"] == 1.0


def test_missing_eval_files_are_null_with_a_note(workspace: tuple[Path, Path], bench_dirs: Settings,
                                                 tmp_path: Path) -> None:
    data_dir, model_dir = workspace
    partial = tmp_path / "data"
    for family in ("race_c", "race_fortran"):
        write_jsonl(partial / family / "eval.jsonl", _race_eval(family))
    report = evaluate_policy(model_dir, partial, _eval_params(), bench_dirs)
    assert report["dgemm"] is None and report["mlperf"] is None and report["plp"] is None
    assert report["race"]["n"] == 6
    assert "problems_eval.jsonl is missing" in report["meta"]["notes"]["dgemm"]
    assert set(report["meta"]["notes"]) == {"dgemm", "mlperf", "plp"}
    write_report(report, tmp_path / "sft.json")
    assert json.loads((tmp_path / "sft.json").read_text())["plp"] is None


def test_eval_params_defaults_and_bounds() -> None:
    ep = parse_params({}).evaluate
    assert (ep.samples_per_problem, ep.max_problems, ep.temperature) == (4, 80, 0.2)
    assert (ep.dgemm_max_new_tokens, ep.qa_max_new_tokens, ep.batch_size) == (600, 128, 8)
    assert ep.max_items_per_family == 300  # every held-out set of the default data (MLPerf: 273 items)
    with pytest.raises(ConfigError, match=r"evaluate\.samples_per_problem"):
        parse_params({"evaluate": {"samples_per_problem": 0}})
    with pytest.raises(ConfigError, match=r"evaluate\.k: unknown key"):
        parse_params({"evaluate": {"k": 2}})
