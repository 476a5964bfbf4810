"""Held-out DGEMM evaluation of several policies (SFT and RL): sampled kernels benchmarked on this CPU, per-model
rates and GFLOPS, and a per-problem WinRate of each model against a baseline.

For each model, k = ``evaluate.samples_per_problem`` kernels per problem of ``data/dgemm/problems_eval.jsonl``
(first ``evaluate.max_problems``), sampled at ``evaluate.temperature``, benchmarked at ``evaluate.bench_n`` with
short timing on 1-core slots. Per model (``model_block``): ``dgemm_metrics`` (compile/verified/respect rates,
GFLOPS of verified kernels) plus ``gflops_best``, ``best_vs_numpy`` (best / numpy's DGEMM measured now on one
slot at the same n) and ``best_vs_peak`` (best / the node's theoretical 1-core peak; null without a clock).
WinRate (``winrate_vs_<baseline>``): per problem, the model with the higher median GFLOPS over its verified kernels
wins (a problem without verified kernels scores 0), ties 0.5, averaged over problems.

Run: ``python -m hpcrl_core.evaluation.dgemm_eval NAME=MODEL_DIR... [--data data] [--report PATH]``.
Test: ``pytest tests/evaluation/test_dgemm_eval.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hpcrl_core.bench.executor import local_executor
from hpcrl_core.bench.reference import measure_numpy
from hpcrl_core.bench.result import BenchResult
from hpcrl_core.config import Params, Settings, load_params
from hpcrl_core.data.schema import Record, read_jsonl
from hpcrl_core.errors import DataError
from hpcrl_core.evaluation.generate import generate
from hpcrl_core.evaluation.metrics import winrate
from hpcrl_core.evaluation.runner import dgemm_metrics
from hpcrl_core.files import write_text_atomic
from hpcrl_core.models.saved import load_saved_policy

Progress = Callable[[str], None]


def eval_problems(data_dir: Path, limit: int) -> list[Record]:
    """The first ``limit`` held-out problems.

    Raises:
        DataError: the problems file is missing or empty.
    """
    path = data_dir / "dgemm" / "problems_eval.jsonl"
    if not path.is_file():
        raise DataError(f"{path} is missing; run `dvc repro prepare` to create the held-out DGEMM problems")
    problems = [r for _, r in zip(range(limit), read_jsonl(path), strict=False)]
    if not problems:
        raise DataError(f"{path} holds no problems")
    return problems


def sample_kernels(model_dir: Path, problems: Sequence[Record], params: Params,
                   progress: Progress | None = None) -> list[list[str]]:
    """k sampled completions per problem from the policy saved in ``model_dir``."""
    ep = params.evaluate
    model, tokenizer = load_saved_policy(model_dir)
    tick = (lambda done, total: progress(f"{model_dir}: sampled {done}/{total} problems")) if progress else None
    return generate(model, tokenizer, [r.prompt for r in problems], temperature=ep.temperature,
                    max_new_tokens=ep.dgemm_max_new_tokens, num_return_sequences=ep.samples_per_problem,
                    batch_size=ep.batch_size, seed=ep.seed, progress=tick)


def problem_medians(results: Sequence[Sequence[BenchResult]]) -> list[float]:
    """Per problem, the median GFLOPS of its verified kernels (0.0 when none verified)."""
    out = []
    for group in results:
        gflops = [float(r.gflops) for r in group if r.ok and r.gflops is not None]
        out.append(statistics.median(gflops) if gflops else 0.0)
    return out


def model_block(results: Sequence[Sequence[BenchResult]], permitted: Sequence[Sequence[str]],
                numpy_gflops: float, peak_gflops: float | None) -> dict[str, Any]:
    """The report block of one model: ``dgemm_metrics`` over all samples plus best-vs-reference ratios.

    Args:
        results: per problem, its k benchmark results.
        permitted: per problem, its permitted technique names.
        numpy_gflops: numpy's DGEMM on one slot at the evaluation size (> 0).
        peak_gflops: the slot's theoretical peak, or None.
    """
    flat = [r for group in results for r in group]
    allowed = [p for group, p in zip(results, permitted, strict=True) for _ in group]
    block = dgemm_metrics(flat, allowed)
    best = block["gflops_max"]
    block.update({"gflops_best": best, "best_vs_numpy": best / numpy_gflops if numpy_gflops > 0 else 0.0,
                  "best_vs_peak": best / peak_gflops if peak_gflops else None})
    return block


def sample_rows(problems: Sequence[Record], results: Sequence[Sequence[BenchResult]],
                kernels: Sequence[Sequence[str]]) -> list[dict[str, Any]]:
    """One row per sampled kernel (problem id, status, GFLOPS, techniques, code): the evidence behind a block."""
    return [{"problem_id": p.metadata.get("problem_id"), "status": r.status.value, "gflops": r.gflops,
             "techniques": sorted(map(str, r.techniques)), "code": code}
            for p, group, texts in zip(problems, results, kernels, strict=True)
            for r, code in zip(group, texts, strict=True)]


def _bench_all(samples: Mapping[str, list[list[str]]], params: Params, settings: Settings,
               progress: Progress | None) -> tuple[dict[str, list[list[BenchResult]]], float, float | None]:
    ep = params.evaluate
    out: dict[str, list[list[BenchResult]]] = {}
    with local_executor(params.bench.for_many(ep.bench_n), settings, cores_per_slot=1) as ex:
        quantile, lock_dir = ex.engine.params.timing.quantile, ex.engine.locks.folder
        numpy_gflops = ex.submit_on_slot(lambda slot: measure_numpy(
            ep.bench_n, slot, quantile=quantile, lock_dir=lock_dir)).result().gflops
        peak = ex.engine.node.peak_gflops(1)
        for name, groups in samples.items():
            tick = (lambda d, t, name=name: progress(f"{name}: benchmarked {d}/{t} kernels")) if progress else None
            flat = ex.map([c for g in groups for c in g], n=ep.bench_n, progress=tick)
            k = ep.samples_per_problem
            out[name] = [flat[i:i + k] for i in range(0, len(flat), k)]
    return out, numpy_gflops, peak


def evaluate_dgemm(models: Mapping[str, Path], data_dir: Path, params: Params, settings: Settings,
                   baseline: str = "sft", progress: Progress | None = None
                   ) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """Evaluate each named model on the held-out problems; every other model gets ``winrate_vs_<baseline>``.

    Returns:
        The report ``{name: block, ..., "meta": {...}}`` with ``model_block`` blocks (see the module docstring),
        and per model its ``sample_rows``.

    Raises:
        DataError: no held-out problems. ConfigError: a model folder holds no saved model.
    """
    ep = params.evaluate
    problems = eval_problems(data_dir, ep.max_problems)
    permitted = [list(r.metadata.get("permitted") or []) for r in problems]
    samples = {name: sample_kernels(path, problems, params, progress) for name, path in models.items()}
    results, numpy_gflops, peak = _bench_all(samples, params, settings, progress)
    report: dict[str, Any] = {name: model_block(res, permitted, numpy_gflops, peak) for name, res in results.items()}
    if baseline in results:
        base = problem_medians(results[baseline])
        for name, res in results.items():
            if name != baseline:
                report[name][f"winrate_vs_{baseline}"] = winrate(problem_medians(res), base)
    report["meta"] = {"models": {k: str(v) for k, v in models.items()}, "problems": len(problems),
                      "k": ep.samples_per_problem, "bench_n": ep.bench_n, "temperature": ep.temperature,
                      "numpy_gflops": numpy_gflops, "peak_gflops": peak,
                      "bench_note": f"kernels benchmarked at n={ep.bench_n} with short timing on one core"}
    return report, {name: sample_rows(problems, results[name], samples[name]) for name in models}


def write_json(obj: Any, path: Path) -> None:
    """Write ``obj`` as JSON atomically (the DVC metrics file ``reports/eval_dgemm.json``, its samples file)."""
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", help="NAME=MODEL_DIR, e.g. sft=checkpoints/sft/final")
    ap.add_argument("--data", default="data")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--report", default="reports/eval_dgemm.json")
    a = ap.parse_args(argv)
    models = dict(m.split("=", 1) for m in a.models)
    report, rows = evaluate_dgemm({k: Path(v) for k, v in models.items()}, Path(a.data), load_params(a.params),
                                  Settings(), progress=print)
    write_json(report, Path(a.report))
    write_json(rows, Path(a.report).with_name(Path(a.report).stem + "_samples.json"))
    for name, block in report.items():
        if name != "meta":
            print(name, {k: v for k, v in block.items() if k != "status_counts"})


if __name__ == "__main__":
    main(sys.argv[1:])
