"""The one DGEMM evaluation: sample kernels for held-out problems, benchmark them on this CPU, score them.

Used by the post-SFT report (``runner.py``, one model) and by the comparison of policies (``evaluate_dgemm``:
SFT and RL, ``reports/eval_dgemm.json``). For each model, k = ``evaluate.samples_per_problem`` kernels per
problem of ``data/dgemm/problems_eval.jsonl`` (first ``evaluate.max_problems``), sampled at
``evaluate.temperature``, each benchmarked at its problem's n (the size its prompt asks for) with
``bench.short_timing`` on 1-core slots.

- ``dgemm_metrics``: compile / verified / respect rates and GFLOPS of verified kernels (definitions there);
- ``model_block`` (comparison): plus ``gflops_best``, ``best_vs_numpy`` (the highest over verified kernels of the
  kernel's GFLOPS over numpy's DGEMM measured in the same run on one slot of the node that timed it, at the kernel's
  n) with ``best_vs_numpy_n`` (that kernel's n), and ``best_vs_peak`` (the node's 1-core peak; null without a clock);
- WinRate (``winrate_vs_<baseline>``): per problem, the model with the higher median GFLOPS over its verified
  kernels wins (a problem without verified kernels scores 0), ties 0.5, averaged over problems;
- the oracle yardstick (``add_yardstick``, definitions in ``oracle.py``): the corpus kernels
  (``data/dgemm/corpus.jsonl``) timed in the same run on the same backend at every problem size; per model
  ``oracle_ratio``,
  ``oracle_ratio_rich``, ``oracle_ratio_held_out``, ``oracle_ratio_drawn``, ``distinct_kernels``, and against
  the baseline ``headroom_closed``; the report's ``oracle`` block holds the per-problem table and the number of
  distinct oracle kernels;
- ``dgemm_rows``: one sample row per kernel, the schema every DGEMM report's samples file uses: ``family``
  ("dgemm"), ``model``, ``id`` (the problem record), ``problem_id``, ``sample``, ``n`` (the size it was timed at:
  its problem's), ``permitted``, ``status``,
  ``detail`` (the compiler's or checker's message), ``techniques``, ``respects``, ``gflops``, ``completion``.

Run: ``python -m hpcrl_core.evaluation.dgemm NAME=MODEL_DIR... [--data data] [--report PATH]``.
Test: ``pytest tests/evaluation/test_dgemm.py tests/evaluation/test_runner.py``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hpcrl_core.bench.executor import BenchBackend, LocalExecutor, bench_backend, map_sized
from hpcrl_core.bench.reference import submit_numpy
from hpcrl_core.bench.result import BenchResult, Status, node_references
from hpcrl_core.config import Params, Settings, load_params
from hpcrl_core.data.dgemm.corpus import CODE_FENCE, plan_openings
from hpcrl_core.data.schema import Record, read_jsonl
from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.evaluation.generate import generate
from hpcrl_core.evaluation.metrics import winrate
from hpcrl_core.evaluation.openings import OpeningVocabulary
from hpcrl_core.evaluation.oracle import (
    RICH,
    CorpusEntry,
    corpus_path,
    corpus_summary,
    distinct_kernels,
    headroom_closed,
    is_held_out,
    oracle_distinct,
    oracle_metrics,
    oracle_table,
    read_corpus,
    select_oracles,
    time_corpus,
)
from hpcrl_core.evaluation.report import samples_path_for, write_report, write_samples
from hpcrl_core.models.saved import load_saved_policy

Progress = Callable[[str], None]
Row = dict[str, Any]
NOT_COMPILED = frozenset({Status.FORMAT_VIOLATION, Status.COMPILE_ERROR})


def _rate(num: float, den: float) -> float:
    return num / den if den else 0.0


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


def problem_sizes(problems: Sequence[Record]) -> list[int]:
    """Per problem, the matrix size its prompt asks for (metadata ``n``): its kernels are timed there.

    Raises:
        DataError: a problem without a whole positive ``n``.
    """
    out = []
    for r in problems:
        n = r.metadata.get("n")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise DataError(f"DGEMM problem {r.id} has no matrix size (metadata n = {n!r}); rerun `dvc repro prepare`")
        out.append(n)
    return out


def permitted_sets(problems: Sequence[Record]) -> list[list[str]]:
    """Per problem, the names of its permitted techniques."""
    return [[str(t) for t in r.metadata.get("permitted") or []] for r in problems]


def sample_kernels(model: Any, tokenizer: Any, problems: Sequence[Record], params: Params,
                   progress: Progress | None = None, label: str = "dgemm",
                   corpus: Path | None = None) -> list[list[str]]:
    """k sampled completions per problem (``evaluate.samples_per_problem``, at ``evaluate.temperature``), each after
    the code fence with ``evaluate.dgemm_fence_given``, its plan line one of ``corpus``'s with
    ``evaluate.dgemm_plan_vocabulary``.

    Raises:
        ConfigError: ``evaluate.dgemm_plan_vocabulary`` without a corpus, or on data without plan lines.
    """
    ep = params.evaluate
    openings = None
    if ep.dgemm_plan_vocabulary != "none":
        if corpus is None:
            raise ConfigError("evaluate.dgemm_plan_vocabulary needs the corpus (data/dgemm/corpus.jsonl) to read the "
                              "plan lines from")
        plan_line, plan_permitted = params.prepare.dgemm.plan_line, params.prepare.dgemm.plan_permitted
        openings = OpeningVocabulary(tokenizer, plan_openings(corpus, plan_line, plan_permitted,
                                                              "evaluate.dgemm_plan_vocabulary",
                                                              ep.dgemm_plan_vocabulary))
    tick = (lambda done, total: progress(f"{label}: sampled problems {done}/{total}")) if progress else None
    return generate(model, tokenizer, [r.prompt for r in problems], temperature=ep.temperature,
                    max_new_tokens=ep.dgemm_max_new_tokens, num_return_sequences=ep.samples_per_problem,
                    batch_size=ep.batch_size, seed=ep.seed, progress=tick,
                    opening=CODE_FENCE if ep.dgemm_fence_given else "", openings=openings)


def sample_model(model_dir: Path, problems: Sequence[Record], params: Params,
                 progress: Progress | None = None, corpus: Path | None = None) -> list[list[str]]:
    """``sample_kernels`` of the model saved in ``model_dir``."""
    model, tokenizer = load_saved_policy(model_dir)
    return sample_kernels(model, tokenizer, problems, params, progress, label=str(model_dir), corpus=corpus)


def evaluation_executor(params: Params, settings: Settings) -> BenchBackend:
    """The backend every DGEMM evaluation benchmarks on (``HPCRL_BENCH_BACKEND``): ``bench.short_timing``, 1-core
    slots, the node's result cache; each kernel is timed at the size it is submitted with; agents attach their node's
    numpy figure at that size."""
    return bench_backend(params.bench.for_many(), settings, cores_per_slot=1, reference="numpy")


def node_figures(ex: BenchBackend, results: Sequence[BenchResult],
                 sizes: Iterable[int]) -> tuple[dict[int, float], float | None, list[str]]:
    """numpy's GFLOPS per size and the 1-core peak the report divides by, and the nodes that timed the kernels.

    Locally: numpy measured now on a slot of this node at every size of ``sizes`` (the best of ``timing.fresh_runs``
    runs apart in time, as a kernel's figure), and its peak. On agents: per size,
    the median over the verified kernels timed at that size of the figures of the node that timed each (a size
    without one is left out; the peak None when no node gave one).
    """
    wanted = sorted(set(sizes))
    if isinstance(ex, LocalExecutor):
        # all sizes queued at once, so each size's next fresh run waits behind the other sizes' runs
        pending = {n: submit_numpy(ex, n) for n in wanted}
        numpy = {n: fut.result().gflops for n, fut in pending.items()}
        return numpy, ex.engine.node.peak_gflops(1), [ex.engine.node.model]
    by_size = node_references(results)
    peaks = [float(r.extra["node_peak_gflops"]) for r in results if r.extra.get("node_peak_gflops")]
    nodes = sorted({str(r.extra["node"]) for r in results if r.extra.get("node")})
    numpy = {n: by_size[n] for n in wanted if n in by_size}
    return numpy, (statistics.median(peaks) if peaks else None), nodes


def benchmark_groups(ex: BenchBackend, groups: Sequence[Sequence[str]], sizes: Sequence[int],
                     progress: Progress | None = None, label: str = "dgemm") -> list[list[BenchResult]]:
    """Benchmark per-problem groups of completions, each group at its problem's size; results in the same shape."""
    tick = (lambda done, total: progress(f"{label}: benchmarked kernels {done}/{total}")) if progress else None
    flat = map_sized(ex, [(c, n) for g, n in zip(groups, sizes, strict=True) for c in g], progress=tick)
    out, i = [], 0
    for g in groups:
        out.append(flat[i:i + len(g)])
        i += len(g)
    return out


def dgemm_metrics(results: Sequence[BenchResult], permitted: Sequence[Iterable[str]]) -> dict[str, Any]:
    """Rates and GFLOPS of benchmarked DGEMM samples.

    Definitions (every rate in [0, 1], 0.0 when its denominator is 0):

    - ``compile_rate``: share of samples that reached the run step, i.e. status neither ``format_violation`` nor
      ``compile_error`` (a kernel that compiled but timed out, crashed or was wrong counts as compiled).
    - ``verified_rate``: share of samples with status ``ok`` (correct at every checked size).
    - ``respect_rate``: share of *verified* kernels whose detected techniques are all permitted by their problem.
    - ``ok_respect_rate``: share of *all* samples that are verified and respect the problem.
    - ``gflops_mean/median/max``: over verified kernels; 0.0 when none verified.

    Args:
        results: one benchmark result per sample.
        permitted: the permitted technique names of each sample's problem, aligned with ``results``.

    Returns:
        The rates, GFLOPS, ``samples``, ``verified``, ``respecting`` and ``status_counts`` (every status, summing
        to ``samples``).

    Raises:
        ValueError: the two sequences differ in length.
    """
    if len(results) != len(permitted):
        raise ValueError(f"dgemm_metrics: {len(results)} results but {len(permitted)} permitted sets; pass one per "
                         "sample (repeat a problem's set k times)")
    counts = Counter(r.status for r in results)
    ok = [(r, allowed) for r, allowed in zip(results, permitted, strict=True) if r.ok]
    respecting = sum(1 for r, allowed in ok if r.respects(allowed))
    gflops = [r.gflops for r, _ in ok if r.gflops is not None]
    n = len(results)
    return {
        "samples": n, "verified": len(ok), "respecting": respecting,
        "compile_rate": _rate(n - sum(counts[s] for s in NOT_COMPILED), n),
        "verified_rate": _rate(len(ok), n), "respect_rate": _rate(respecting, len(ok)),
        "ok_respect_rate": _rate(respecting, n),
        "gflops_mean": statistics.fmean(gflops) if gflops else 0.0,
        "gflops_median": statistics.median(gflops) if gflops else 0.0,
        "gflops_max": max(gflops) if gflops else 0.0,
        "status_counts": {s.value: counts[s] for s in Status},
    }


def grouped_metrics(results: Sequence[Sequence[BenchResult]], permitted: Sequence[Sequence[str]]) -> dict[str, Any]:
    """``dgemm_metrics`` over per-problem groups (each group's results share its problem's permitted set)."""
    flat = [r for group in results for r in group]
    allowed = [p for group, p in zip(results, permitted, strict=True) for _ in group]
    return dgemm_metrics(flat, allowed)


def _per_problem(results: Sequence[Sequence[BenchResult]], stat: Callable[[list[float]], float],
                 permitted: Sequence[Sequence[str]] | None) -> list[float]:
    out = []
    for i, group in enumerate(results):
        gflops = [float(r.gflops) for r in group if r.ok and r.gflops is not None
                  and (permitted is None or r.respects(permitted[i]))]
        out.append(stat(gflops) if gflops else 0.0)
    return out


def problem_medians(results: Sequence[Sequence[BenchResult]],
                    permitted: Sequence[Sequence[str]] | None = None) -> list[float]:
    """Per problem, the median GFLOPS of its verified kernels (0.0 when none verified); with ``permitted`` (per
    problem), of those among them that respect it."""
    return _per_problem(results, statistics.median, permitted)


def problem_bests(results: Sequence[Sequence[BenchResult]],
                  permitted: Sequence[Sequence[str]] | None = None) -> list[float]:
    """Per problem, the highest GFLOPS of its verified kernels (0.0 when none verified); with ``permitted`` (per
    problem), of those among them that respect it."""
    return _per_problem(results, max, permitted)


def model_block(results: Sequence[Sequence[BenchResult]], permitted: Sequence[Sequence[str]],
                numpy: Mapping[int, float], peak_gflops: float | None) -> dict[str, Any]:
    """The comparison's block of one model: ``dgemm_metrics`` over all samples plus best-vs-reference ratios.

    Args:
        results: per problem, its k benchmark results (each timed at its problem's size).
        permitted: per problem, its permitted technique names.
        numpy: numpy's DGEMM on one slot, per size measured (agents' results carry their node's own).
        peak_gflops: the slot's theoretical peak, or None.
    """
    block = grouped_metrics(results, permitted)
    best = block["gflops_max"]
    ratios = [(r.gflops / ref, r.n) for group in results for r in group
              if r.ok and r.gflops is not None and (ref := r.reference(numpy))]
    top = max(ratios, default=(0.0, None))
    block.update({"gflops_best": best, "best_vs_numpy": top[0], "best_vs_numpy_n": top[1],
                  "best_vs_peak": best / peak_gflops if peak_gflops else None})
    return block


def add_yardstick(report: dict[str, Any], problems: Sequence[Record],
                  results: Mapping[str, Sequence[Sequence[BenchResult]]],
                  samples: Mapping[str, Sequence[Sequence[str]]], corpus: Sequence[CorpusEntry] | None,
                  corpus_results: Mapping[int, Sequence[BenchResult]], baseline: str = "sft") -> dict[str, Any]:
    """Add the oracle yardstick (``oracle.py``) to each model's block of ``report``; returns the report's
    ``oracle`` block: corpus counts, problems with and without an oracle, and the per-problem ``table``.

    A model's per-problem median and best count its verified kernels that respect the problem's permitted
    techniques, as the oracle does: a kernel that uses a forbidden technique is not an answer to the problem, so
    it cannot lift a model towards (or past) the best permitted kernel. ``gflops_median`` and WinRate keep
    counting every verified kernel, and ``respect_rate`` says how many did not respect their problem.

    Every model block gains ``oracle_ratio``, ``oracle_ratio_rich``, ``oracle_ratio_held_out``,
    ``oracle_ratio_drawn``, the problem count of each (``oracle_problems``...) and ``distinct_kernels``; every
    model but ``baseline`` (when present) ``headroom_closed``, ``headroom_problems`` and ``headroom_excluded``.

    Args:
        corpus: the corpus kernels, or None when the corpus file is missing (then no problem has an oracle).
        corpus_results: per problem size, their results measured in this run, aligned with ``corpus``.
    """
    permitted = permitted_sets(problems)
    oracles = select_oracles(corpus or [], corpus_results, permitted, problem_sizes(problems))
    medians = {name: problem_medians(res, permitted) for name, res in results.items()}
    bests = {name: problem_bests(res, permitted) for name, res in results.items()}
    for name, res in results.items():
        report[name].update(oracle_metrics(medians[name], oracles, permitted))
        report[name]["distinct_kernels"] = distinct_kernels(res, samples[name])
        if name != baseline and baseline in medians:
            report[name].update(headroom_closed(medians[name], medians[baseline], oracles))
    with_oracle = sum(o.gflops is not None for o in oracles)
    block: dict[str, Any] = {**corpus_summary(corpus or [], corpus_results), "problems_with_oracle": with_oracle,
                             "problems_without_oracle": len(oracles) - with_oracle,
                             "rich_problems": sum(len(set(p)) >= RICH for p in permitted),
                             "held_out_problems": sum(map(is_held_out, permitted)),
                             "distinct_kernels": oracle_distinct(corpus or [], oracles),
                             "table": oracle_table([p.metadata for p in problems], oracles, medians, bests)}
    if corpus is None:
        block["note"] = "data/dgemm/corpus.jsonl is missing: no problem has an oracle; run `dvc repro prepare`"
    return block


def dgemm_rows(model: str, problems: Sequence[Record], results: Sequence[Sequence[BenchResult]],
               completions: Sequence[Sequence[str]]) -> list[Row]:
    """One sample row per kernel, in the schema of the module docstring."""
    rows = []
    for p, group, texts in zip(problems, results, completions, strict=True):
        allowed = sorted(str(t) for t in p.metadata.get("permitted") or [])
        for i, (r, text) in enumerate(zip(group, texts, strict=True)):
            rows.append({"family": "dgemm", "model": model, "id": p.id, "problem_id": p.metadata.get("problem_id"),
                         "sample": i, "n": r.n, "permitted": allowed, "status": r.status.value, "detail": r.detail,
                         "techniques": list(r.techniques), "respects": r.respects(allowed) if r.ok else None,
                         "gflops": r.gflops, "completion": text})
    return rows


def bench_note(params: Params) -> str:
    t = params.bench.short_timing
    return (f"each kernel benchmarked at its problem's n (the size its prompt asks for) on one core with "
            f"bench.short_timing ({t.min_reps}+ calls, {t.min_time_s}-{t.max_time_s} s): a rough figure per kernel")


def evaluate_dgemm(models: Mapping[str, Path], data_dir: Path, params: Params, settings: Settings,
                   baseline: str = "sft", progress: Progress | None = None) -> tuple[dict[str, Any], list[Row]]:
    """Evaluate each named model on the held-out problems; every other model gets ``winrate_vs_<baseline>``.

    Returns:
        The report ``{name: model_block, ..., "oracle": {...}, "meta": {...}}`` (``add_yardstick``: the corpus
        kernels of ``data/dgemm/corpus.jsonl`` are timed on the same backend at every problem size after the models'
        kernels) and the sample rows of every model.

    Raises:
        DataError: no held-out problems, or one without a size. ConfigError: a model folder holds no saved model.
    """
    ep = params.evaluate
    problems = eval_problems(data_dir, ep.max_problems)
    permitted = permitted_sets(problems)
    sizes = problem_sizes(problems)
    distinct_sizes = sorted(set(sizes))
    samples = {name: sample_model(path, problems, params, progress, corpus_path(data_dir))
               for name, path in models.items()}
    with evaluation_executor(params, settings) as ex:
        results = {name: benchmark_groups(ex, groups, sizes, progress, name) for name, groups in samples.items()}
        numpy, peak, nodes = node_figures(ex, [r for res in results.values() for g in res for r in g], sizes)
        corpus = read_corpus(data_dir)
        corpus_results = time_corpus(ex, corpus, distinct_sizes, progress) if corpus else {}
    report: dict[str, Any] = {name: model_block(res, permitted, numpy, peak) for name, res in results.items()}
    if baseline in results:
        base = problem_medians(results[baseline])
        for name, res in results.items():
            if name != baseline:
                report[name][f"winrate_vs_{baseline}"] = winrate(problem_medians(res), base)
    report["oracle"] = add_yardstick(report, problems, results, samples, corpus, corpus_results, baseline)
    report["oracle"]["sizes"] = distinct_sizes
    report["meta"] = {"models": {k: str(v) for k, v in models.items()}, "problems": len(problems),
                      "k": ep.samples_per_problem, "sizes": distinct_sizes, "temperature": ep.temperature,
                      "fence_given": ep.dgemm_fence_given, "plan_vocabulary": ep.dgemm_plan_vocabulary,
                      "numpy_gflops": {str(n): g for n, g in sorted(numpy.items())}, "peak_gflops": peak,
                      "bench_note": bench_note(params),
                      "bench_backend": settings.bench_backend, "nodes": nodes}
    rows = [row for name in models for row in dgemm_rows(name, problems, results[name], samples[name])]
    return report, rows


def rows_by_model(rows: Sequence[Row]) -> dict[str, list[Row]]:
    """Sample rows grouped by their ``model``, in first-seen order."""
    out: dict[str, list[Row]] = {}
    for row in rows:
        out.setdefault(str(row.get("model")), []).append(row)
    return out


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
    write_report(report, Path(a.report))
    write_samples(rows, samples_path_for(Path(a.report)))
    for name in models:
        print(name, {k: v for k, v in report[name].items() if k != "status_counts"})


if __name__ == "__main__":
    main(sys.argv[1:])
