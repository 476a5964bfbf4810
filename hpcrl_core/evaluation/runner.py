"""Post-SFT evaluation: sample kernels for held-out DGEMM problems and benchmark them, answer the task families.

``evaluate_policy`` loads a saved model (``checkpoints/sft/final``) and returns a nested report:

- ``dgemm``: the first ``evaluate.max_problems`` problems of ``data/dgemm/problems_eval.jsonl``, k =
  ``evaluate.samples_per_problem`` kernels each (sampled at ``evaluate.temperature``), benchmarked by the engine at
  ``evaluate.bench_n`` with ``bench.short_timing``, so GFLOPS are a rough comparison, not a
  measurement at each problem's own n. See ``dgemm_metrics`` for the rates.
- ``race`` (race_c + race_fortran pooled), ``mlperf``, ``plp``: greedy answers to the first
  ``evaluate.max_items_per_family`` items of ``data/<family>/eval.jsonl``, scored by ``metrics.py`` and
  ``embeddings.py``. A family whose eval file is missing or empty is ``null``, with a note in ``meta.notes``.

``write_report`` writes it atomically as JSON (``reports/sft.json``, a DVC metrics file). With ``samples_path``
every evaluated item is also written, one JSON object per line (``reports/sft_samples.jsonl``), so a failure can be
read without generating again: ``family``, ``id`` and, for DGEMM, ``sample``, ``permitted``, ``status``, ``detail``
(the compiler's or checker's message), ``techniques``, ``respects``, ``gflops`` and the ``completion``; for the task
families the ``prediction``, the ``gold`` answer and its score (``parsed`` and ``correct`` for race, ``exact`` and
``score`` for MLPerf, ``similarity`` for PLP).

Run: ``.venv/bin/python -m hpcrl_core.evaluation.runner [MODEL_DIR] [DATA_DIR] [REPORT] [PARAMS]``
(defaults ``checkpoints/sft/final data reports/sft.json params.yaml``).
Test: ``pytest tests/evaluation/test_runner.py``.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerBase

from hpcrl_core.bench.executor import local_executor
from hpcrl_core.bench.result import BenchResult, Status
from hpcrl_core.config import Params, Settings, load_params
from hpcrl_core.data.qa.mlperf import exact_match, tiered_score
from hpcrl_core.data.schema import Record, read_jsonl
from hpcrl_core.evaluation.embeddings import plp_similarity
from hpcrl_core.evaluation.generate import generate
from hpcrl_core.evaluation.metrics import gold_race_label, mlperf_scores, parse_race_answer, race_f1
from hpcrl_core.files import write_text_atomic
from hpcrl_core.models.saved import load_saved_policy

Progress = Callable[[str], None]
Rows = list[dict[str, Any]]
NOT_COMPILED = frozenset({Status.FORMAT_VIOLATION, Status.COMPILE_ERROR})
RACE_FAMILIES = ("race_c", "race_fortran")


def _rate(num: float, den: float) -> float:
    return num / den if den else 0.0


def respects(result: BenchResult, permitted: Iterable[str]) -> bool:
    """Whether every technique the engine detected in ``result`` is in ``permitted``."""
    return set(result.techniques) <= {str(t) for t in permitted}


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
    respecting = sum(1 for r, allowed in ok if respects(r, allowed))
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


def load_model(model_dir: Path) -> tuple[Any, PreTrainedTokenizerBase]:
    """The model and tokenizer saved in ``model_dir`` (local files only, CPU, eval mode); a LoRA adapter folder
    (``adapter_config.json``) is loaded on its base model with peft.

    Raises:
        ConfigError: the folder is missing, or holds no loadable model or tokenizer with a chat template.
    """
    return load_saved_policy(model_dir)


def _eval_items(data_dir: Path, family: str, name: str, limit: int, notes: dict[str, str]) -> list[Record]:
    """The first ``limit`` records of ``data_dir/family/name``; none (and a note) when the file is missing."""
    path = data_dir / family / name
    if not path.is_file():
        notes[family] = f"{path} is missing; run `dvc repro prepare` to create it"
        return []
    records = [r for _, r in zip(range(limit), read_jsonl(path), strict=False)]
    if not records:
        notes[family] = f"{path} holds no records"
    return records


def _ticker(progress: Progress | None, label: str) -> Callable[[int, int], None] | None:
    if progress is None:
        return None
    return lambda done, total: progress(f"{label} {done}/{total}")


def _eval_dgemm(model: Any, tokenizer: PreTrainedTokenizerBase, data_dir: Path, params: Params, settings: Settings,
                notes: dict[str, str], progress: Progress | None, rows: Rows) -> dict[str, Any] | None:
    ep = params.evaluate
    problems = _eval_items(data_dir, "dgemm", "problems_eval.jsonl", ep.max_problems, notes)
    if not problems:
        return None
    samples = generate(model, tokenizer, [r.prompt for r in problems], temperature=ep.temperature,
                       max_new_tokens=ep.dgemm_max_new_tokens, num_return_sequences=ep.samples_per_problem,
                       batch_size=ep.batch_size, seed=ep.seed, progress=_ticker(progress, "dgemm: sampled problems"))
    completions = [text for group in samples for text in group]
    permitted = [r.metadata.get("permitted") or [] for r in problems for _ in range(ep.samples_per_problem)]
    with local_executor(params.bench.for_many(ep.bench_n), settings) as ex:
        results = ex.map(completions, n=ep.bench_n, progress=_ticker(progress, "dgemm: benchmarked kernels"))
    k = ep.samples_per_problem
    for i, (text, res, allowed) in enumerate(zip(completions, results, permitted, strict=True)):
        rows.append({"family": "dgemm", "id": problems[i // k].id, "sample": i % k, "permitted": sorted(allowed),
                     "status": res.status.value, "detail": res.detail, "techniques": list(res.techniques),
                     "respects": respects(res, allowed) if res.ok else None,
                     "gflops": res.gflops, "completion": text})
    return {**dgemm_metrics(results, permitted), "problems": len(problems), "k": ep.samples_per_problem,
            "bench_n": ep.bench_n, "temperature": ep.temperature}


def _greedy(model: Any, tokenizer: PreTrainedTokenizerBase, records: Sequence[Record], params: Params,
            label: str, progress: Progress | None) -> list[str]:
    ep = params.evaluate
    answers = generate(model, tokenizer, [r.prompt for r in records], temperature=0.0,
                       max_new_tokens=ep.qa_max_new_tokens, batch_size=ep.batch_size, seed=ep.seed,
                       progress=_ticker(progress, f"{label}: answered"))
    return [a[0] for a in answers]


def _eval_qa(family: str, model: Any, tokenizer: PreTrainedTokenizerBase, data_dir: Path, params: Params,
             notes: dict[str, str], progress: Progress | None, rows: Rows) -> dict[str, Any] | None:
    """Greedy answers to one task family (``race`` pools race_c and race_fortran), scored by its metric."""
    limit = params.evaluate.max_items_per_family
    if family == "race":
        parts = {f: _eval_items(data_dir, f, "eval.jsonl", limit, notes) for f in RACE_FAMILIES}
        records = [r for f in RACE_FAMILIES for r in parts[f]]
    else:
        records = _eval_items(data_dir, family, "eval.jsonl", limit, notes)
    if not records:
        return None
    answers = _greedy(model, tokenizer, records, params, family, progress)
    base: Rows = [{"family": r.family, "id": r.id, "prediction": a, "gold": r.answer or r.response}
                   for r, a in zip(records, answers, strict=True)]
    if family == "race":
        for i, row in enumerate(base):
            row["parsed"] = parse_race_answer(row["prediction"])
            row["correct"] = row["parsed"] == gold_race_label(row["gold"], i)
        rows.extend(base)
        return {**race_f1(answers, [r.answer for r in records]), **{f"n_{f}": len(parts[f]) for f in RACE_FAMILIES}}
    if family == "mlperf":
        scores = mlperf_scores(answers, records)
        for row, r in zip(base, records, strict=True):
            row["exact"], row["score"] = exact_match(row["prediction"], r), tiered_score(row["prediction"], r)
        rows.extend(base)
        return {"em": scores["exact_match"], "avg_score": scores["tiered_score"], "n": scores["n"]}
    sim = plp_similarity(answers, [row["gold"] for row in base])
    for row, cos in zip(base, sim["cosines"], strict=True):
        row["similarity"] = cos
    rows.extend(base)
    # Cosine similarity lies in [-1, 1]; the mean is reported as is (sentence embeddings rarely go negative).
    return {"similarity": sim["mean"], "median": sim["median"], "n": sim["n"]}


def evaluate_policy(model_dir: Path, data_dir: Path, params: Params, settings: Settings,
                    progress: Progress | None = None, samples_path: Path | None = None) -> dict[str, Any]:
    """Evaluate the model saved in ``model_dir`` on the held-out data under ``data_dir`` (see the module docstring).

    Args:
        model_dir: a folder holding the model and its tokenizer (``checkpoints/sft/final``).
        data_dir: the prepared data (``data/``).
        params: validated params; ``evaluate`` and ``bench`` are read.
        settings: cache and scratch folders of the benchmark engine.
        progress: called with a line of text as sampling and benchmarking advance.
        samples_path: where to write every evaluated item as JSON lines (see the module docstring); None: not kept.

    Returns:
        ``{"dgemm": {...} | None, "race": {...} | None, "mlperf": {...} | None, "plp": {...} | None,
        "meta": {model_dir, bench_n, k, seconds per part, notes}}``.

    Raises:
        ConfigError: ``model_dir`` holds no loadable model or tokenizer.
    """
    model, tokenizer = load_model(model_dir)
    notes: dict[str, str] = {}
    seconds: dict[str, float] = {}
    report: dict[str, Any] = {}
    rows: Rows = []
    t0 = time.monotonic()
    report["dgemm"] = _eval_dgemm(model, tokenizer, data_dir, params, settings, notes, progress, rows)
    seconds["dgemm"] = time.monotonic() - t0
    for family in ("race", "mlperf", "plp"):
        t0 = time.monotonic()
        report[family] = _eval_qa(family, model, tokenizer, data_dir, params, notes, progress, rows)
        seconds[family] = time.monotonic() - t0
    ep = params.evaluate
    report["meta"] = {"model_dir": str(model_dir), "bench_n": ep.bench_n, "k": ep.samples_per_problem,
                      "bench_note": f"kernels benchmarked at n={ep.bench_n} with short timing, not at each "
                                    f"problem's n: GFLOPS compare models, they do not measure the kernels",
                      "seconds": {k: round(v, 3) for k, v in seconds.items()}, "notes": notes}
    if samples_path is not None:
        write_text_atomic(samples_path, "".join(json.dumps(row, allow_nan=False) + "\n" for row in rows))
    return report


def write_report(report: dict[str, Any], path: Path) -> None:
    """Write the report as JSON atomically (temp file + rename), creating the folder.

    Raises:
        ValueError: the report holds NaN or infinity (not valid JSON).
    """
    write_text_atomic(path, json.dumps(report, indent=2, allow_nan=False) + "\n")


def samples_path_for(report: Path) -> Path:
    """Where the per-item samples of ``report`` go: ``reports/sft.json`` -> ``reports/sft_samples.jsonl``."""
    return report.with_name(report.stem + "_samples.jsonl")


def main(argv: list[str]) -> None:
    defaults = ["checkpoints/sft/final", "data", "reports/sft.json", "params.yaml"]
    if argv[:1] in (["-h"], ["--help"]) or len(argv) > len(defaults):
        print(__doc__)
        return
    model_dir, data_dir, out, params_path = (Path(a) for a in argv + defaults[len(argv):])
    report = evaluate_policy(model_dir, data_dir, load_params(params_path), Settings(),
                             progress=lambda line: print(line, file=sys.stderr, flush=True),
                             samples_path=samples_path_for(out))
    write_report(report, out)
    print(json.dumps({k: v for k, v in report.items() if k != "meta"}, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
