"""Post-SFT evaluation: sample kernels for held-out DGEMM problems and benchmark them, answer the task families.

``evaluate_policy`` loads a saved model (``checkpoints/sft/final``) and returns a nested report:

- ``dgemm``: the first ``evaluate.max_problems`` problems of ``data/dgemm/problems_eval.jsonl``, k =
  ``evaluate.samples_per_problem`` kernels each (sampled at ``evaluate.temperature``), benchmarked by the engine at
  their problem's n (the size the prompt asks for) with ``bench.short_timing``: the one DGEMM evaluation of
  ``dgemm.py`` (rates: ``dgemm_metrics``).
- ``race`` (race_c + race_fortran pooled), ``mlperf``, ``plp``: greedy answers to the first
  ``evaluate.max_items_per_family`` items of ``data/<family>/eval.jsonl``, scored by ``metrics.py`` and
  ``embeddings.py``. A family whose eval file is missing or empty is ``null``, with a note in ``meta.notes``.

``report.write_report`` writes it atomically as JSON (``reports/sft.json``, a DVC metrics file). With
``samples_path`` every evaluated item is also written, one JSON object per line (``reports/sft_samples.jsonl``), so a
failure can be read without generating again: DGEMM rows in the schema of ``dgemm.dgemm_rows`` (the same rows as
``reports/eval_dgemm_samples.jsonl``); for the task families ``family``, ``id``, the ``prediction``, the ``gold``
answer and its score (``parsed`` and ``correct`` for race, ``exact`` and ``score`` for MLPerf, ``similarity`` for
PLP).

Run: ``.venv/bin/python -m hpcrl_core.evaluation.runner [MODEL_DIR] [DATA_DIR] [REPORT] [PARAMS]``
(defaults ``checkpoints/sft/final data reports/sft.json params.yaml``).
Test: ``pytest tests/evaluation/test_runner.py``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerBase

from hpcrl_core.config import Params, Settings, load_params
from hpcrl_core.data.schema import Record
from hpcrl_core.evaluation.dgemm import (
    bench_note,
    benchmark_groups,
    dgemm_rows,
    evaluation_executor,
    grouped_metrics,
    permitted_sets,
    problem_sizes,
    sample_kernels,
)
from hpcrl_core.evaluation.embeddings import plp_similarity
from hpcrl_core.evaluation.generate import fitting_records, generate
from hpcrl_core.evaluation.items import read_eval_items
from hpcrl_core.evaluation.metrics import (
    exact_match,
    gold_race_label,
    mlperf_scores,
    parse_race_answer,
    race_f1,
    tiered_score,
)
from hpcrl_core.evaluation.oracle import corpus_path
from hpcrl_core.evaluation.report import samples_path_for, write_report, write_samples
from hpcrl_core.models.saved import load_saved_policy

Progress = Callable[[str], None]
Rows = list[dict[str, Any]]
RACE_FAMILIES = ("race_c", "race_fortran")


def load_model(model_dir: Path) -> tuple[Any, PreTrainedTokenizerBase]:
    """The model and tokenizer saved in ``model_dir`` (local files only, CPU, eval mode); a LoRA adapter folder
    (``adapter_config.json``) is loaded on its base model with peft.

    Raises:
        ConfigError: the folder is missing, or holds no loadable model or tokenizer with a chat template.
    """
    return load_saved_policy(model_dir)


def _ticker(progress: Progress | None, label: str) -> Callable[[int, int], None] | None:
    if progress is None:
        return None
    return lambda done, total: progress(f"{label} {done}/{total}")


def _eval_dgemm(model: Any, tokenizer: PreTrainedTokenizerBase, data_dir: Path, params: Params, settings: Settings,
                notes: dict[str, str], progress: Progress | None, rows: Rows, name: str) -> dict[str, Any] | None:
    ep = params.evaluate
    problems = read_eval_items(data_dir, "dgemm", "problems_eval.jsonl", ep.max_problems, notes)
    if not problems:
        return None
    sizes = problem_sizes(problems)  # a problem without a size is refused before any sampling
    samples = sample_kernels(model, tokenizer, problems, params, progress, corpus=corpus_path(data_dir))
    with evaluation_executor(params, settings) as ex:
        results = benchmark_groups(ex, samples, sizes, progress)
    rows.extend(dgemm_rows(name, problems, results, samples))
    return {**grouped_metrics(results, permitted_sets(problems)), "problems": len(problems),
            "k": ep.samples_per_problem, "sizes": sorted(set(sizes)), "temperature": ep.temperature,
            "fence_given": ep.dgemm_fence_given, "plan_vocabulary": ep.dgemm_plan_vocabulary}


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
        parts = {f: read_eval_items(data_dir, f, "eval.jsonl", limit, notes) for f in RACE_FAMILIES}
        records = [r for f in RACE_FAMILIES for r in parts[f]]
    else:
        records = read_eval_items(data_dir, family, "eval.jsonl", limit, notes)
    records = fitting_records(model, tokenizer, records, params.evaluate.qa_max_new_tokens, notes,
                              f"{family}_too_long")
    if family == "race":
        parts = {f: [r for r in records if r.family == f] for f in RACE_FAMILIES}
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
                    progress: Progress | None = None, samples_path: Path | None = None,
                    name: str = "sft") -> dict[str, Any]:
    """Evaluate the model saved in ``model_dir`` on the held-out data under ``data_dir`` (see the module docstring).

    Args:
        model_dir: a folder holding the model and its tokenizer (``checkpoints/sft/final``).
        data_dir: the prepared data (``data/``).
        params: validated params; ``evaluate`` and ``bench`` are read.
        settings: cache and scratch folders of the benchmark engine.
        progress: called with a line of text as sampling and benchmarking advance.
        samples_path: where to write every evaluated item as JSON lines (see the module docstring); None: not kept.
        name: the model's name in the sample rows.

    Returns:
        ``{"dgemm": {...} | None, "race": {...} | None, "mlperf": {...} | None, "plp": {...} | None,
        "meta": {model_dir, k, bench_note, seconds per part, notes}}``.

    Raises:
        ConfigError: ``model_dir`` holds no loadable model or tokenizer.
    """
    model, tokenizer = load_model(model_dir)
    notes: dict[str, str] = {}
    seconds: dict[str, float] = {}
    report: dict[str, Any] = {}
    rows: Rows = []
    t0 = time.monotonic()
    report["dgemm"] = _eval_dgemm(model, tokenizer, data_dir, params, settings, notes, progress, rows, name)
    seconds["dgemm"] = time.monotonic() - t0
    for family in ("race", "mlperf", "plp"):
        t0 = time.monotonic()
        report[family] = _eval_qa(family, model, tokenizer, data_dir, params, notes, progress, rows)
        seconds[family] = time.monotonic() - t0
    ep = params.evaluate
    report["meta"] = {"model_dir": str(model_dir), "k": ep.samples_per_problem,
                      "bench_note": bench_note(params),
                      "seconds": {k: round(v, 3) for k, v in seconds.items()}, "notes": notes}
    if samples_path is not None:
        write_samples(rows, samples_path)
    return report


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
