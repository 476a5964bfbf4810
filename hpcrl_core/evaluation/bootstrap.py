"""Confidence intervals of the HARGO comparison: a paired, stratified percentile bootstrap over items, in numpy.

What varies is *which items* the held-out set happens to hold; the interval says how far a method's seed-mean
could move under another draw of items of the same families. One resample draws, in each family (race_c,
race_fortran, mlperf, plp: the strata), as many items as it holds, uniformly with replacement, so every resample
keeps the family sizes (and race F1 stays pooled over the same C/Fortran mix). The *same* drawn item indices are
used for every run, the SFT rows included: every seed of a method, every method, and the SFT answers it is
compared with, so WinRate stays paired item by item and differences between methods are not blurred by
independent draws. On each resample a metric is computed per run, averaged over the method's seeds, and the
interval is the (1 - confidence)/2 and (1 + confidence)/2 quantiles of those seed-means (numpy's linear
interpolation). Race F1 on a resample is computed from the resampled TP/FP/FN counts (F1 = 2TP / (2TP + FP + FN),
0 when TP = 0, which is ``metrics.race_f1``'s F1), not by averaging per-item values.

Vectorised: a resample is a row of draw counts per item (``resample_counts``, shape ``(B + 1, n)``, row 0 all ones
= the observed sample), and every count-weighted sum of every run is one matrix product per family. 2000 resamples
x 600 items x 16 runs take well under a second.

Test: ``pytest tests/evaluation/test_bootstrap.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hpcrl_core.evaluation.metrics import gold_race_label

Row = Mapping[str, Any]
STRATA: tuple[str, ...] = ("race_c", "race_fortran", "mlperf", "plp")
RACE_FAMILIES: tuple[str, ...] = ("race_c", "race_fortran")
PLP_ACCURATE = 0.5  # a PLP answer counts as accurate (accuracy_plp) when its cosine to the reference is >= this

# Per-item columns, one value per item and run. ``acc`` is the family's own accuracy: race correct (the task score),
# MLPerf exact match, PLP cosine >= PLP_ACCURATE.
_COLUMNS = ("win", "score", "tp", "fp", "fn", "exact", "acc", "degenerate", "length")
_C = {name: i for i, name in enumerate(_COLUMNS)}

# headline metric -> (families it averages over, column); race_f1 is computed from counts instead
_MEANS: dict[str, tuple[tuple[str, ...], str]] = {
    "winrate": (STRATA, "win"),
    "plp_similarity": (("plp",), "score"),
    "mlperf_em": (("mlperf",), "exact"),
    "mlperf_avg_score": (("mlperf",), "score"),
    **{f"accuracy_{f}": ((f,), "acc") for f in STRATA},
    "degenerate_share": (STRATA, "degenerate"),
    "mlperf_length_mean": (("mlperf",), "length"),
}
HEADLINE: tuple[str, ...] = ("winrate", "race_f1", "plp_similarity", "mlperf_em", "mlperf_avg_score",
                             *(f"accuracy_{f}" for f in STRATA), "degenerate_share", "mlperf_length_mean")


def opponent_score(row: Row, sft_row: Row) -> float:
    """The SFT score a policy's answer to an item is compared with for WinRate.

    The SFT row's ``score``, except when both answered the very same text: then the policy's own score, a tie by
    definition (the same text embedded in another batch can differ in the last bits of its cosine, which would
    otherwise turn a tie into a win or a loss).
    """
    return float(row["score"] if row["prediction"] == sft_row["prediction"] else sft_row["score"])


def _win(row: Row, sft_row: Row) -> float:
    mine, theirs = float(row["score"]), opponent_score(row, sft_row)
    return 1.0 if mine > theirs else 0.5 if mine == theirs else 0.0


def _item_columns(row: Row, sft_row: Row, index: int) -> list[float]:
    family, score = row["family"], float(row["score"])
    tp = fp = fn = 0.0
    if family in RACE_FAMILIES:
        gold_yes = gold_race_label(str(row["gold"]), index) == "yes"
        tp, fp, fn = float(gold_yes and score == 1.0), float(not gold_yes and score != 1.0), \
            float(gold_yes and score != 1.0)
        acc = score
    elif family == "mlperf":
        acc = float(bool(row["exact"]))
    else:
        acc = float(score >= PLP_ACCURATE)
    return [_win(row, sft_row), score, tp, fp, fn, float(bool(row.get("exact", False))), acc,
            float(bool(row["degenerate"])), float(row["length"])]


def resample_counts(sizes: Sequence[int], resamples: int, seed: int) -> list[np.ndarray]:
    """How often each item is drawn in each resample, per stratum.

    Stratum k of ``n_k`` items gets ``n_k`` draws with replacement per resample; the generator is
    ``numpy.random.default_rng(seed)``, drawn stratum by stratum in the given order, so the same sizes, resamples and
    seed give the same counts.

    Args:
        sizes: items per stratum (0 allowed: a stratum without items).
        resamples: B, the number of resamples (>= 1).
        seed: the generator's seed.

    Returns:
        One float array per stratum of shape ``(B + 1, n_k)``: row 0 is all ones (the observed sample), row b the
        draw counts of resample b (each row sums to ``n_k``).

    Raises:
        ValueError: ``resamples`` below 1 or a size below 0.
    """
    if resamples < 1 or any(n < 0 for n in sizes):
        raise ValueError(f"resample_counts: resamples={resamples} must be >= 1 and sizes={list(sizes)} >= 0")
    rng = np.random.default_rng(seed)
    out = []
    for n in sizes:
        counts = np.ones((resamples + 1, n))
        if n:
            idx = rng.integers(0, n, size=(resamples, n))  # (B, n): the drawn item indices
            flat = (idx + n * np.arange(resamples)[:, None]).ravel()  # offset each resample into its own block
            counts[1:] = np.bincount(flat, minlength=resamples * n).reshape(resamples, n)
        out.append(counts)
    return out


def percentile_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    """The two-sided percentile interval of bootstrap values (shape ``(B,)``) at ``confidence`` in (0, 1)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"percentile_interval: confidence={confidence}; it must lie in (0, 1), e.g. 0.95")
    lo, hi = np.quantile(values, [(1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0])
    return float(lo), float(hi)


def _stratum_sums(sft: Sequence[Row], runs: list[Sequence[Row]], resamples: int, seed: int
                  ) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Count-weighted column sums per stratum: ``{family: (B + 1, R, C)}``, and the items per family."""
    positions = {f: [i for i, r in enumerate(sft) if r["family"] == f] for f in STRATA}
    unknown = {r["family"] for r in sft} - set(STRATA)
    if unknown:
        raise ValueError(f"bootstrap: rows of unknown families {sorted(unknown)}; allowed: {', '.join(STRATA)}")
    columns = np.array([[_item_columns(rows[i], sft[i], i) for i in range(len(sft))] for rows in runs])  # (R, N, C)
    counts = resample_counts([len(positions[f]) for f in STRATA], resamples, seed)
    sums = {}
    for f, weights in zip(STRATA, counts, strict=True):
        n_f, width = len(positions[f]), len(runs) * len(_COLUMNS)
        block = columns[:, positions[f], :].transpose(1, 0, 2).reshape(n_f, width)  # (n_f, R * C)
        sums[f] = (weights @ block).reshape(resamples + 1, len(runs), len(_COLUMNS))
    return sums, {f: len(p) for f, p in positions.items()}


def _metric(name: str, sums: Mapping[str, np.ndarray], sizes: Mapping[str, int]) -> np.ndarray | None:
    """A headline metric of every run on every resample, shape ``(B + 1, R)``; None when it has no items."""
    if name == "race_f1":
        if not sum(sizes[f] for f in RACE_FAMILIES):
            return None
        race = np.sum([sums[f] for f in RACE_FAMILIES], axis=0)  # (B + 1, R, C)
        tp, fp, fn = (race[..., _C[c]] for c in ("tp", "fp", "fn"))
        den = 2 * tp + fp + fn
        return np.divide(2 * tp, den, out=np.zeros_like(den), where=den > 0)
    families, column = _MEANS[name]
    n = sum(sizes[f] for f in families)
    if not n:
        return None
    return np.sum([sums[f][..., _C[column]] for f in families], axis=0) / n


def headline_intervals(sft: Sequence[Row], groups: Mapping[str, Mapping[Any, Sequence[Row]]], *, resamples: int,
                       confidence: float, seed: int) -> dict[str, dict[str, dict[str, Any] | None]]:
    """Seed-mean, per-seed values and the bootstrap interval of every ``HEADLINE`` metric of every group.

    Args:
        sft: the SFT model's scored rows (``hargo.score_items``): the items, in the order every run follows.
        groups: ``{method: {seed: rows}}``, each run's rows aligned with ``sft`` (same (family, id), same order;
            ``hargo.align_rows``). The SFT model itself may be a group (``{"sft": {"sft": sft}}``): its WinRate is
            0.5 on every resample.
        resamples: B.
        confidence: the interval's level, e.g. 0.95.
        seed: the resampling seed (``evaluate_hargo.seed``).

    Returns:
        ``{method: {metric: {"mean": float, "seeds": {str(seed): float}, "ci": [lo, hi]} | None}}``; a metric is
        None when its families have no items. ``mean`` and ``seeds`` are the observed values (row 0).

    Raises:
        ValueError: no SFT rows, a run is not aligned with ``sft``, a group has no runs, or a row's family is
            unknown.
    """
    flat, values = _seed_means(sft, groups, resamples, seed)
    out: dict[str, dict[str, dict[str, Any] | None]] = {m: {} for m in groups}
    for name in HEADLINE:
        for method in groups:
            entry = values[name]
            if entry is None:
                out[method][name] = None
                continue
            seed_mean, per_run = entry[method]
            lo, hi = percentile_interval(seed_mean[1:], confidence)
            out[method][name] = {"mean": float(seed_mean[0]), "ci": [lo, hi],
                                 "seeds": {flat[i][1]: float(v) for i, v in per_run.items()}}
    return out


def paired_differences(sft: Sequence[Row], groups: Mapping[str, Mapping[Any, Sequence[Row]]], reference: str, *,
                       resamples: int, confidence: float, seed: int) -> dict[str, dict[str, dict[str, Any] | None]]:
    """``reference``'s seed-mean minus every other method's, per ``HEADLINE`` metric, with its paired interval.

    The same resampled items serve both methods (module docstring), so the interval is that of the per-item
    difference: it excludes 0 only when ``reference`` is ahead (or behind) under most draws of the items.

    Args:
        sft, groups, resamples, confidence, seed: as ``headline_intervals``.
        reference: the method compared with all others (e.g. ``hargo``); a key of ``groups``.

    Returns:
        ``{method: {metric: {"diff": float, "ci": [lo, hi], "excludes_zero": bool} | None}}`` for every method but
        ``reference``; a metric is None when its families have no items.

    Raises:
        ValueError: as ``headline_intervals``, or ``reference`` is not a method of ``groups``.
    """
    if reference not in groups:
        raise ValueError(f"paired_differences: reference {reference!r} is not among the methods "
                         f"{', '.join(groups)}")
    _, values = _seed_means(sft, groups, resamples, seed)
    out: dict[str, dict[str, dict[str, Any] | None]] = {m: {} for m in groups if m != reference}
    for name in HEADLINE:
        entry = values[name]
        for method in out:
            if entry is None:
                out[method][name] = None
                continue
            diff = entry[reference][0] - entry[method][0]  # (B + 1,): row 0 observed
            lo, hi = percentile_interval(diff[1:], confidence)
            out[method][name] = {"diff": float(diff[0]), "ci": [lo, hi], "excludes_zero": bool(lo > 0 or hi < 0)}
    return out


SeedMeans = dict[str, tuple[np.ndarray, dict[int, float]]]


def _seed_means(sft: Sequence[Row], groups: Mapping[str, Mapping[Any, Sequence[Row]]], resamples: int, seed: int
                ) -> tuple[list[tuple[str, str, Sequence[Row]]], dict[str, SeedMeans | None]]:
    """The runs in order, and per metric and method: the seed-mean on every resample (``(B + 1,)``, row 0 the
    observed) and each run's observed value by its index in the runs; None for a metric without items."""
    if not sft:
        raise ValueError("bootstrap: no SFT rows; score at least one item")
    keys = [(r["family"], r["id"]) for r in sft]
    flat: list[tuple[str, str, Sequence[Row]]] = []
    for method, seeds in groups.items():
        if not seeds:
            raise ValueError(f"bootstrap: method {method!r} has no runs; give it at least one seed's rows")
        for s, rows in seeds.items():
            if [(r["family"], r["id"]) for r in rows] != keys:
                raise ValueError(f"bootstrap: rows of {method!r} seed {s} are not aligned with the SFT rows; "
                                 "pass them through hargo.align_rows first")
            flat.append((method, str(s), rows))
    sums, sizes = _stratum_sums(sft, [rows for _, _, rows in flat], resamples, seed)
    out: dict[str, SeedMeans | None] = {}
    for name in HEADLINE:
        values = _metric(name, sums, sizes)  # (B + 1, R) or None
        if values is None:
            out[name] = None
            continue
        per_method: SeedMeans = {}
        for method in groups:
            cols = [i for i, (m, _, _) in enumerate(flat) if m == method]
            per_method[method] = (values[:, cols].mean(axis=1), {i: float(values[0, i]) for i in cols})
        out[name] = per_method
    return flat, out
