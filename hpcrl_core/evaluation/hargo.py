"""The HARGO comparison's evaluation: greedy answers of the SFT start and of every (method, seed) policy to the
held-out items of race_c, race_fortran, mlperf and plp, scored per item, compared with the SFT answers.

- ``load_items``: the first ``evaluate_hargo.max_items_per_family`` records of ``data/<family>/eval.jsonl``.
- ``answer_items``: greedy answers (``evaluate_hargo.max_new_tokens``, ``batch_size``).
- ``score_items``: one row per item: ``family``, ``id``, ``prediction``, ``gold``, ``score`` (the item's task score:
  race 1.0 when the parsed verdict equals gold, else 0.0, an unreadable verdict is wrong; MLPerf the tiered score
  1 / 0.5 / 0.2 / 0.1 / 0; PLP the all-MiniLM-L6-v2 cosine), ``parsed`` (race), ``exact`` (MLPerf), ``length``
  (characters) and ``degenerate`` (``textstats.is_degenerate``).
- ``method_metrics``: one policy's metrics against the SFT rows (WinRate, pooled race F1 and its counts, MLPerf EM and
  mean score, PLP similarity, per-family accuracy, answer lengths, degenerate shares).
- ``comparison_report``: the dict written to ``reports/eval_hargo.json`` (a DVC metrics file): a block per method and
  one for ``sft``, each headline metric as seed-mean, per-seed values and a bootstrap interval (``bootstrap.py``);
  and ``meta.vs_reference``: HARGO's seed-mean minus every other method's, with the paired interval of that
  difference (``bootstrap.paired_differences``; does it exclude 0?).
- ``markdown_table`` / ``what_one_item_is_worth`` / ``plot_comparison`` (``hargo_report.py``): what people read.

Per-family accuracy: race the share of correct verdicts per language, MLPerf the exact-match share, PLP the share of
answers whose cosine to the reference is >= 0.5 (``bootstrap.PLP_ACCURATE``, a threshold of this project's
choosing; the paper reports PLP only as mean similarity).

Run: ``.venv/bin/python -m hpcrl_core.evaluation.hargo SFT_DIR DATA_DIR OUT_JSON METHOD:SEED=MODEL_DIR...``
(params from ./params.yaml; writes OUT_JSON, its ``_samples.jsonl``, ``.md`` table and ``.png`` plot, prints the
table), or ``... --from-samples SAMPLES_JSONL OUT_JSON``: the report rebuilt from the scored answers of an earlier
one (other ``evaluate_hargo`` interval settings, or a newer report format) without answering again.
Test: ``pytest tests/evaluation/test_hargo.py``.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerBase

from hpcrl_core.config import TASK_FAMILIES, Params, load_params
from hpcrl_core.data.schema import Record
from hpcrl_core.errors import DataError
from hpcrl_core.evaluation.bootstrap import (
    PLP_ACCURATE,
    RACE_FAMILIES,
    STRATA,
    headline_intervals,
    opponent_score,
    paired_differences,
)
from hpcrl_core.evaluation.embeddings import plp_similarity
from hpcrl_core.evaluation.generate import fitting_records, generate
from hpcrl_core.evaluation.hargo_report import markdown_table, read_comparison_samples, write_comparison
from hpcrl_core.evaluation.items import read_eval_items
from hpcrl_core.evaluation.metrics import gold_race_label, parse_race_answer, race_f1, tiered_score, winrate
from hpcrl_core.models.saved import load_saved_config, load_saved_policy
from hpcrl_core.textstats import is_degenerate

Progress = Callable[[str], None]
Row = dict[str, Any]
LONG_ANSWER = 40  # characters; the paper's motivation: 65.9% of its SFT model's MLPerf answers are longer
SFT = "sft"  # the name of the SFT model's block in the report
REFERENCE = "hargo"  # the method every other one is compared with in meta.vs_reference
CI_METHOD = ("percentile bootstrap over items, stratified by family (each resample draws as many items of each "
             "family as it holds, with replacement); the same drawn items for every run and the SFT rows (paired); "
             "interval of the seed-mean; race F1 from the resampled TP/FP/FN counts")


def load_items(data_dir: Path, params: Params, notes: dict[str, str]) -> list[Record]:
    """The held-out items of the task families, family by family: the first ``evaluate_hargo.max_items_per_family``
    records of each ``data_dir/<family>/eval.jsonl``; a missing or empty file adds a note to ``notes`` instead."""
    limit = params.evaluate_hargo.max_items_per_family
    return [r for f in TASK_FAMILIES for r in read_eval_items(data_dir, f, "eval.jsonl", limit, notes)]


def answer_items(model: Any, tokenizer: PreTrainedTokenizerBase, records: Sequence[Record], params: Params,
                 progress: Progress | None = None) -> list[str]:
    """Greedy answers of one model to ``records``' prompts (``evaluate_hargo.max_new_tokens`` and ``batch_size``).

    Args:
        model: a causal LM on CPU (``runner.load_model`` / ``load_saved_policy``).
        tokenizer: its tokenizer, with a chat template.
        records: the items; their ``prompt`` is what the model sees.
        params: validated params; ``evaluate_hargo`` is read.
        progress: called with a line such as ``"answered 16/600"`` after each batch.

    Returns:
        One answer per record, in order.
    """
    ticker = None if progress is None else (lambda done, total: progress(f"answered {done}/{total}"))
    ep = params.evaluate_hargo
    answers = generate(model, tokenizer, [r.prompt for r in records], temperature=0.0,
                       max_new_tokens=ep.max_new_tokens, batch_size=ep.batch_size, seed=ep.seed, progress=ticker)
    return [group[0] for group in answers]


def score_items(records: Sequence[Record], answers: Sequence[str]) -> list[Row]:
    """One row per item with its task score (see the module docstring for the keys).

    Args:
        records: items of the task families (race_c, race_fortran, mlperf, plp).
        answers: one answer per record, in order.

    Returns:
        Rows in record order; PLP cosines come from one embedding pass over all PLP items.

    Raises:
        ValueError: lengths differ, a record is of another family (dgemm), or a race record's answer is not yes/no.
    """
    if len(records) != len(answers):
        raise ValueError(f"score_items: {len(records)} records but {len(answers)} answers; pass one answer per record")
    others = sorted({r.family for r in records} - set(TASK_FAMILIES))
    if others:
        raise ValueError(f"score_items: records of families {others}; allowed: {', '.join(TASK_FAMILIES)} "
                         "(DGEMM kernels are scored by benchmarking, in evaluation/dgemm.py)")
    rows: list[Row] = []
    for i, (record, answer) in enumerate(zip(records, answers, strict=True)):
        row: Row = {"family": record.family, "id": record.id, "prediction": answer,
                    "gold": record.answer or record.response, "length": len(answer),
                    "degenerate": is_degenerate(answer)}
        if record.family in RACE_FAMILIES:
            row["gold"] = gold_race_label(record.answer, i)
            row["parsed"] = parse_race_answer(answer)
            row["score"] = 1.0 if row["parsed"] == row["gold"] else 0.0
        elif record.family == "mlperf":
            row["score"] = tiered_score(answer, record)
            row["exact"] = row["score"] == 1.0  # exact match is the tiered score's 1.0 tier
        rows.append(row)
    plp = [row for row in rows if row["family"] == "plp"]
    if plp:
        cosines = plp_similarity([r["prediction"] for r in plp], [r["gold"] for r in plp])["cosines"]
        for row, cosine in zip(plp, cosines, strict=True):
            row["score"] = float(cosine)
    return rows


def fitting_items(model_dir: Path, records: Sequence[Record], params: Params, notes: dict[str, str]) -> list[Record]:
    """The items a comparison asks: those whose prompt, with ``evaluate_hargo.max_new_tokens``, fits the positions of
    the model in ``model_dir`` (the SFT start every policy is compared with); the others are skipped and counted in
    ``notes["too_long"]`` (``generate.fitting_records``). Only the model's config and tokenizer are read."""
    config, tokenizer = load_saved_config(model_dir)
    return fitting_records(config, tokenizer, records, params.evaluate_hargo.max_new_tokens, notes)


def evaluate_model(model_dir: Path, records: Sequence[Record], params: Params,
                   progress: Progress | None = None) -> list[Row]:
    """``score_items`` of the greedy answers of the model saved in ``model_dir`` (full model or LoRA adapter).

    Raises:
        ConfigError: ``model_dir`` holds no loadable model or tokenizer.
    """
    model, tokenizer = load_saved_policy(model_dir)
    return score_items(records, answer_items(model, tokenizer, records, params, progress))


def align_rows(rows: Sequence[Row], sft_rows: Sequence[Row]) -> list[Row]:
    """``rows`` reordered to follow ``sft_rows``, matching items by (family, id).

    Raises:
        DataError: either side repeats an item, or the item sets differ (the message counts both differences and
            names a few items of each).
    """
    def index(side: Sequence[Row], name: str) -> dict[tuple[str, str], Row]:
        keyed = {(r["family"], r["id"]): r for r in side}
        if len(keyed) != len(side):
            raise DataError(f"align_rows: the {name} rows repeat items ({len(side)} rows, {len(keyed)} distinct "
                            "(family, id)); score each item once")
        return keyed

    mine, theirs = index(rows, "policy"), index(sft_rows, "SFT")
    missing, extra = sorted(theirs.keys() - mine.keys()), sorted(mine.keys() - theirs.keys())
    if missing or extra:
        raise DataError(f"align_rows: the item sets differ: {len(missing)} SFT items have no policy row (e.g. "
                        f"{missing[:3]}), {len(extra)} policy items have no SFT row (e.g. {extra[:3]}); evaluate "
                        "every model on the same items (the same data/ and evaluate_hargo.max_items_per_family)")
    return [mine[key] for key in theirs]


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def method_metrics(rows: Sequence[Row], sft_rows: Sequence[Row]) -> dict[str, Any]:
    """The metrics of one policy (one seed), its items matched with the SFT model's by (family, id).

    Args:
        rows: the policy's ``score_items`` rows.
        sft_rows: the SFT model's rows on the same items (any order).

    Returns:
        Headline scalars (``bootstrap.HEADLINE``; None when their family has no items): ``winrate`` (vs SFT by each
        item's task score: win 1, tie 0.5; the same answer text is a tie), ``race_f1`` (pooled over C and Fortran,
        positive = race), ``plp_similarity`` (mean cosine), ``mlperf_em``, ``mlperf_avg_score``,
        ``accuracy_<family>`` for each family, ``degenerate_share`` (all items), ``mlperf_length_mean``
        (characters); and details: ``race`` (``metrics.race_f1``: tp, fp, tn, fn, precision, recall, f1,
        accuracy, unreadable, n), ``n`` (items per family and ``all``), ``length_by_family`` (``mean``,
        ``median``, ``over_40_share``), ``degenerate_by_family``.

    Raises:
        DataError: the item sets differ or repeat items (``align_rows``).
    """
    rows = align_rows(rows, sft_rows)  # now rows[i] and sft_rows[i] are the same item
    if not rows:
        raise DataError("method_metrics: no rows; score at least one item")
    by_family = {f: [r for r in rows if r["family"] == f] for f in STRATA if any(r["family"] == f for r in rows)}
    race = [r for f in RACE_FAMILIES for r in by_family.get(f, [])]
    race_counts = race_f1([r["prediction"] for r in race], [r["gold"] for r in race]) if race else None
    mlperf, plp = by_family.get("mlperf", []), by_family.get("plp", [])
    accuracy = {"race_c": lambda r: r["score"], "race_fortran": lambda r: r["score"],
                "mlperf": lambda r: float(r["exact"]), "plp": lambda r: float(r["score"] >= PLP_ACCURATE)}
    return {
        "winrate": winrate([r["score"] for r in rows],
                           [opponent_score(r, s) for r, s in zip(rows, sft_rows, strict=True)]),
        "race_f1": race_counts["f1"] if race_counts else None,
        "plp_similarity": _mean([r["score"] for r in plp]),
        "mlperf_em": _mean([float(r["exact"]) for r in mlperf]),
        "mlperf_avg_score": _mean([r["score"] for r in mlperf]),
        **{f"accuracy_{f}": _mean([accuracy[f](r) for r in by_family.get(f, [])]) for f in STRATA},
        "degenerate_share": statistics.fmean(float(r["degenerate"]) for r in rows),
        "mlperf_length_mean": _mean([r["length"] for r in mlperf]),
        "race": race_counts,
        "n": {**{f: len(v) for f, v in by_family.items()}, "all": len(rows)},
        "length_by_family": {f: _lengths(v) for f, v in by_family.items()},
        "degenerate_by_family": {f: statistics.fmean(float(r["degenerate"]) for r in v) for f, v in by_family.items()},
    }


def _lengths(rows: Sequence[Row]) -> dict[str, float]:
    lengths = [r["length"] for r in rows]
    return {"mean": statistics.fmean(lengths), "median": float(statistics.median(lengths)),
            f"over_{LONG_ANSWER}_share": statistics.fmean(float(n > LONG_ANSWER) for n in lengths)}


def one_item_worth(items: Mapping[str, int]) -> dict[str, float]:
    """How much one item moves a rate of one run, per family (1/n): ``race`` for pooled race accuracy and
    ``all`` for WinRate and the degenerate share. A seed-mean over k seeds moves by a k-th of that."""
    sizes = {**{f: items[f] for f in STRATA if items.get(f)}, "race": sum(items.get(f, 0) for f in RACE_FAMILIES),
             "all": sum(items.get(f, 0) for f in STRATA)}
    return {k: 1.0 / n for k, n in sizes.items() if n}


def comparison_report(sft_rows: Sequence[Row], runs: Mapping[str, Mapping[int, Sequence[Row]]],
                      params: Params, notes: Mapping[str, str] | None = None,
                      provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The comparison written to ``reports/eval_hargo.json``.

    Args:
        sft_rows: the SFT start's ``score_items`` rows: the items every run is compared on.
        runs: ``{method: {seed: rows}}``, e.g. ``{"hargo": {1: rows, 2: rows, 3: rows}, "grpo": {...}}``.
        params: validated params; ``evaluate_hargo`` (``bootstrap_resamples``, ``confidence``, ``seed``) is read.
        notes: why families have no items (``load_items``' notes), kept as ``meta.notes``.
        provenance: the runs' shared start and rewards (``training.run_record.check_runs``), kept as
            ``meta.provenance`` (None when the runs were not checked, e.g. a report rebuilt from samples).

    Returns:
        ``{"sft": block, <method>: block, ..., "meta": {...}}``. A block is ``{"seeds": [...], "metrics": {name:
        {"mean", "seeds": {seed: value}, "ci": [lo, hi]} | None for name in bootstrap.HEADLINE}, "runs": {seed:
        method_metrics}}``; the SFT block's one run is keyed ``"sft"`` and its WinRate is 0.5 with interval
        [0.5, 0.5] by definition (kept so every block has the same keys). ``meta``: ``items`` per family and
        ``all``, ``one_item`` (``one_item_worth``), ``resamples``, ``confidence``, ``seed``, ``seeds`` per method,
        ``ci_method``, ``rules``, ``notes``, ``provenance``, ``reference`` (``hargo``, or None when it is not among
        the runs or is alone) and ``vs_reference``: ``{method: {metric: {"diff", "ci", "excludes_zero"} | None}}``, the
        reference minus each other method ({} without a reference).

    Raises:
        DataError: a run's items differ from the SFT rows'.
        ValueError: a method is named ``sft`` or ``meta``, or has no seeds.
    """
    clash = sorted(set(runs) & {SFT, "meta"})
    empty = sorted(m for m, seeds in runs.items() if not seeds)
    if clash or empty:
        raise ValueError(f"comparison_report: methods {clash} clash with the report's own blocks (sft, meta) and "
                         f"methods {empty} have no seeds; name methods otherwise and give each its runs' rows")
    details = {m: {str(s): method_metrics(rows, sft_rows) for s, rows in sorted(seeds.items())}
               for m, seeds in runs.items()}
    groups: dict[str, dict[Any, Sequence[Row]]] = {SFT: {SFT: list(sft_rows)}}
    groups |= {m: {s: align_rows(rows, sft_rows) for s, rows in sorted(seeds.items())} for m, seeds in runs.items()}
    ep = params.evaluate_hargo
    intervals = headline_intervals(sft_rows, groups, resamples=ep.bootstrap_resamples, confidence=ep.confidence,
                                   seed=ep.seed)
    report: dict[str, Any] = {SFT: {"seeds": [SFT], "metrics": intervals[SFT],
                                    "runs": {SFT: method_metrics(sft_rows, sft_rows)}}}
    for m, seeds in runs.items():
        report[m] = {"seeds": sorted(seeds), "metrics": intervals[m], "runs": details[m]}
    items = {**{f: sum(r["family"] == f for r in sft_rows) for f in STRATA}, "all": len(sft_rows)}
    versus = {m: groups[m] for m in runs}  # the SFT block is no method to compare HARGO with
    vs = (paired_differences(sft_rows, versus, REFERENCE, resamples=ep.bootstrap_resamples,
                             confidence=ep.confidence, seed=ep.seed) if REFERENCE in runs and len(runs) > 1 else {})
    report["meta"] = {
        "items": items, "one_item": one_item_worth(items), "resamples": ep.bootstrap_resamples,
        "confidence": ep.confidence, "seed": ep.seed, "seeds": {m: sorted(s) for m, s in runs.items()},
        "ci_method": CI_METHOD, "notes": dict(notes or {}), "reference": REFERENCE if vs else None,
        "vs_reference": vs, "provenance": None if provenance is None else dict(provenance),
        "rules": {"winrate": "per item, the policy's task score vs the SFT answer's: win 1, tie 0.5 (same text: tie)",
                  "accuracy": f"race: correct verdicts; mlperf: exact match; plp: cosine >= {PLP_ACCURATE}",
                  "long_answer_chars": LONG_ANSWER,
                  "degenerate": "textstats.is_degenerate: no letter or digit, or > 0.3 of word trigrams repeated"},
    }
    return report


def _run_spec(arg: str) -> tuple[str, int, Path]:
    """``METHOD:SEED=MODEL_DIR`` -> (method, seed, model_dir)."""
    spec, sep, folder = arg.partition("=")
    method, colon, seed = spec.partition(":")
    if not (sep and colon and method and folder and seed.isdigit()):
        raise ValueError(f"run argument {arg!r}; expected METHOD:SEED=MODEL_DIR, e.g. "
                         "hargo:1=checkpoints/rl_hargo/hargo-1/final")
    return method, int(seed), Path(folder)


def main(argv: list[str]) -> None:
    """``SFT_DIR DATA_DIR OUT_JSON METHOD:SEED=MODEL_DIR...``: evaluate, write report, samples and plot, print the
    table. Sample rows carry ``model`` (``sft`` or the method) and ``seed``."""
    if argv[:1] == ["--from-samples"] and len(argv) == 3:
        sft_back, runs_back = read_comparison_samples(Path(argv[1]))
        rebuilt = comparison_report(sft_back, runs_back, load_params())
        write_comparison(rebuilt, sft_back, runs_back, Path(argv[2]))
        print(markdown_table(rebuilt))
        return
    if len(argv) < 4 or argv[0] in ("-h", "--help"):
        print(__doc__)
        return
    sft_dir, data_dir, out = Path(argv[0]), Path(argv[1]), Path(argv[2])
    specs = [_run_spec(a) for a in argv[3:]]
    params = load_params()
    notes: dict[str, str] = {}
    records = load_items(data_dir, params, notes)
    for family, note in notes.items():
        print(f"{family}: {note}", file=sys.stderr)

    def progress(label: str) -> Progress:
        return lambda line: print(f"{label}: {line}", file=sys.stderr, flush=True)

    sft_rows = evaluate_model(sft_dir, records, params, progress(SFT))
    runs: dict[str, dict[int, list[Row]]] = {}
    for method, seed, folder in specs:
        runs.setdefault(method, {})[seed] = evaluate_model(folder, records, params, progress(f"{method}:{seed}"))
    report = comparison_report(sft_rows, runs, params, notes)
    write_comparison(report, sft_rows, runs, out)
    print(markdown_table(report))


if __name__ == "__main__":
    main(sys.argv[1:])
