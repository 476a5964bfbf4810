"""The oracle yardstick of the DGEMM evaluation: per held-out problem, the fastest verified corpus kernel that the
problem permits, timed in the same run as the models' kernels; and what the models reach of it.

Definitions (``docs/sqd.md``, "The held-out evaluation"):

- **oracle** of a problem: among the kernels of ``data/dgemm/corpus.jsonl``, timed now by the evaluation's backend
  at the problem's n (each distinct source once per problem size, reused by every problem of that size), the
  fastest there that is verified now and whose techniques *detected now* are all permitted by the problem
  (``BenchResult.respects``, the rule rewards and evaluation use for models' kernels). A problem no corpus kernel
  fits has no oracle: it is counted and left out of every ratio, never given a number.
- **oracle ratio** of a model on a problem: its median GFLOPS there (``dgemm.problem_medians`` with the problem's
  permitted set: median over its *verified* kernels that *respect the problem*, like the oracle; 0.0 when there
  are none; failed samples and kernels using a forbidden technique are not counted as 0 inside the median) over
  the oracle's GFLOPS. ``oracle_ratio`` is the median of that over the problems with an oracle; ``oracle_ratio_rich``
  the same over those that permit at least ``RICH`` (4) of the 5 techniques; ``oracle_ratio_held_out`` over the
  problems whose permitted set is one of the six no training problem is generated with
  (``problems.HELD_OUT_PERMITTED``: half of the default eval problems, never in SFT data) and ``oracle_ratio_drawn``
  over the rest, so a report says whether a model falls short on technique combinations it never saw or on those
  it did.
- **headroom closed** (a model against the baseline, SFT): per problem with an oracle faster than the baseline's
  median, (model median - baseline median) / (oracle - baseline median); mean over those problems. Not clipped:
  below 0 the model lost ground, above 1 it beat the oracle. Problems where the oracle is not faster are counted
  (``headroom_excluded``) and left out. One problem whose oracle is barely above the baseline dominates the mean
  (oracle 5.65, SFT 5.59, model 0 gives -84), so ``headroom_closed_median`` is reported beside it, and
  ``headroom_closed_measurable``: the mean over the problems whose gap (oracle - baseline median) is at least
  ``MEASURABLE_GAP`` (5%) of the oracle, the spread within which the engine's figures repeat (docs/bench.md): below
  it the baseline already sits at the oracle within the timing's noise and the sign of the gap is noise too
  (``headroom_unmeasurable`` counts them). A 5% cut still leaves a problem with a 6% gap weighing as much as one
  with a 90% gap, so ``headroom_closed_weighted`` weighs each counted problem's share by its gap, in units of its
  oracle: sum((model - baseline) / oracle) / sum((oracle - baseline) / oracle), the share of the summed headroom the
  model closed. A problem with no headroom to speak of then moves it by what the model gained or lost there, as a
  fraction of the oracle, not by that over a near-zero gap. Kernels that compile to the same object share one figure
  (docs/bench.md, "Cache"), so two models that wrote one kernel in two spellings tie instead of differing by the
  timing's noise; different kernels of nearly equal speed still differ by it.
- **distinct kernels**: distinct verified sources over all samples of a model, compared as the engine's cache does
  (``normalise_code``: comments dropped, whitespace collapsed). The oracle block's ``distinct_kernels`` counts the
  distinct oracle kernels over the problems: a policy that wrote exactly the oracle everywhere would count that many.

Test: ``pytest tests/evaluation/test_oracle.py``.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcrl_core.bench.executor import BenchBackend, map_sized
from hpcrl_core.bench.extract import kernel_identity, normalise_code
from hpcrl_core.bench.result import BenchResult
from hpcrl_core.data.dgemm.problems import HELD_OUT_PERMITTED
from hpcrl_core.errors import DataError
from hpcrl_core.files import json_lines

RICH = 4  # a problem permitting at least this many of the five techniques is "rich"
MEASURABLE_GAP = 0.05  # a gap below this share of the oracle is within the engine's spread (docs/bench.md)
_HELD_OUT = frozenset(frozenset(str(t) for t in s) for s in HELD_OUT_PERMITTED)  # eval-only permitted sets
Progress = Callable[[str], None]


@dataclass(frozen=True)
class CorpusEntry:
    """One kernel of the SFT corpus: its ``name`` (the kernel id) and C ``code``."""

    name: str
    code: str


@dataclass(frozen=True)
class Oracle:
    """A problem's oracle: the corpus kernel's name, its GFLOPS and techniques as measured now; ``kernel`` and
    ``gflops`` are None when no corpus kernel fits the problem."""

    kernel: str | None = None
    gflops: float | None = None
    techniques: tuple[str, ...] = ()


def corpus_path(data_dir: Path) -> Path:
    return data_dir / "dgemm" / "corpus.jsonl"


def read_corpus(data_dir: Path) -> list[CorpusEntry] | None:
    """The corpus kernels written by the prepare stage, or None when ``data/dgemm/corpus.jsonl`` is missing.

    Raises:
        DataError: a line is not JSON or lacks a string ``name`` or ``code``.
    """
    path = corpus_path(data_dir)
    if not path.is_file():
        return None
    out = []
    for i, row in json_lines(path, hint="; rerun `dvc repro prepare`"):
        if not isinstance(row, dict) or not isinstance(row.get("name"), str) or not isinstance(row.get("code"), str):
            raise DataError(f"{path}:{i} lacks a string 'name' or 'code'; rerun `dvc repro prepare`")
        out.append(CorpusEntry(row["name"], row["code"]))
    return out


def time_corpus(ex: BenchBackend, corpus: Sequence[CorpusEntry], sizes: Sequence[int],
                progress: Progress | None = None) -> dict[int, list[BenchResult]]:
    """Benchmark every corpus kernel at every size of ``sizes``, each distinct source (``normalise_code``) once per
    size, all submitted at once.

    Returns:
        Per size, one result per entry, in corpus order (entries with the same source share one result).
    """
    distinct: dict[str, int] = {}
    for entry in corpus:
        distinct.setdefault(normalise_code(entry.code), len(distinct))
    codes = [""] * len(distinct)
    for entry in corpus:
        codes[distinct[normalise_code(entry.code)]] = entry.code

    def tick(done: int, total: int) -> None:
        if progress is not None and (done == total or done % 25 == 0):  # a few lines, not one per kernel
            progress(f"oracle: benchmarked corpus kernels {done}/{total}")

    sizes = list(dict.fromkeys(sizes))
    flat = map_sized(ex, [(code, n) for n in sizes for code in codes], progress=tick)
    out = {}
    for i, n in enumerate(sizes):
        results = flat[i * len(codes):(i + 1) * len(codes)]
        out[n] = [results[distinct[normalise_code(entry.code)]] for entry in corpus]
    return out


def select_oracles(corpus: Sequence[CorpusEntry], results: Mapping[int, Sequence[BenchResult]],
                   permitted: Sequence[Sequence[str]], sizes: Sequence[int]) -> list[Oracle]:
    """Per problem, the fastest corpus kernel verified now at the problem's size whose detected techniques it
    permits.

    Args:
        corpus: the corpus kernels.
        results: per size, their results measured now, aligned with ``corpus``.
        permitted: per problem, its permitted technique names.
        sizes: per problem, its n; a size with no results gives its problems no oracle.

    Returns:
        One ``Oracle`` per problem; an empty one where no kernel fits. Ties go to the first name in sort order.
    """
    ranked = {n: sorted(((r.gflops, e.name, r) for e, r in zip(corpus, res, strict=True)
                         if r.ok and r.gflops is not None and r.gflops > 0), key=lambda t: (-t[0], t[1]))
              for n, res in results.items()}
    out = []
    for allowed, n in zip(permitted, sizes, strict=True):
        best = next(((g, name, r) for g, name, r in ranked.get(n, []) if r.respects(allowed)), None)
        out.append(Oracle(best[1], best[0], tuple(best[2].techniques)) if best else Oracle())
    return out


def problem_ratios(medians: Sequence[float], oracles: Sequence[Oracle]) -> list[float | None]:
    """Per problem, the model's median GFLOPS over the oracle's; None where there is no oracle."""
    return [m / o.gflops if o.gflops else None for m, o in zip(medians, oracles, strict=True)]


def _median(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def oracle_metrics(medians: Sequence[float], oracles: Sequence[Oracle],
                   permitted: Sequence[Sequence[str]]) -> dict[str, Any]:
    """``oracle_ratio``, ``oracle_ratio_rich``, ``oracle_ratio_held_out`` and ``oracle_ratio_drawn`` of one model
    (None when no problem counts) and the number of problems each is the median over (``oracle_problems``,
    ``oracle_problems_rich``, ``oracle_problems_held_out``, ``oracle_problems_drawn``)."""
    ratios = problem_ratios(medians, oracles)
    subsets = {"": [True] * len(ratios), "_rich": [len(set(allowed)) >= RICH for allowed in permitted],
               "_held_out": [is_held_out(allowed) for allowed in permitted]}
    subsets["_drawn"] = [not h for h in subsets["_held_out"]]
    out: dict[str, Any] = {}
    for suffix, keep in subsets.items():
        kept = [r for r, k in zip(ratios, keep, strict=True) if k]
        out[f"oracle_ratio{suffix}"] = _median(kept)
        out[f"oracle_problems{suffix}"] = sum(r is not None for r in kept)
    return out


def is_held_out(permitted: Sequence[str]) -> bool:
    """Whether a permitted set is one of the eval-only sets no training problem is generated with."""
    return frozenset(permitted) in _HELD_OUT


def headroom_closed(medians: Sequence[float], base: Sequence[float], oracles: Sequence[Oracle]) -> dict[str, Any]:
    """The share of the gap between the baseline's median and the oracle that a model closed (module docstring).

    Returns:
        ``headroom_closed`` (mean over the counted problems; None when none counts), ``headroom_closed_median``
        (their median), ``headroom_closed_measurable`` (mean over the counted problems with a gap of at least
        ``MEASURABLE_GAP`` of the oracle), ``headroom_closed_weighted`` (each counted problem weighed by its gap
        over its oracle), ``headroom_problems`` (counted), ``headroom_excluded`` (problems with an oracle not faster
        than the baseline's median) and ``headroom_unmeasurable`` (counted, gap below 5%).
    """
    closed, measurable, excluded = [], [], 0
    gained = gap = 0.0  # summed over the counted problems, in units of each problem's oracle
    for m, b, o in zip(medians, base, oracles, strict=True):
        if o.gflops is None:
            continue
        if o.gflops > b:
            closed.append((m - b) / (o.gflops - b))
            gained += (m - b) / o.gflops
            gap += (o.gflops - b) / o.gflops
            if o.gflops - b >= MEASURABLE_GAP * o.gflops:
                measurable.append(closed[-1])
        else:
            excluded += 1
    return {"headroom_closed": statistics.fmean(closed) if closed else None,
            "headroom_closed_median": statistics.median(closed) if closed else None,
            "headroom_closed_measurable": statistics.fmean(measurable) if measurable else None,
            "headroom_closed_weighted": gained / gap if closed else None,
            "headroom_problems": len(closed), "headroom_excluded": excluded,
            "headroom_unmeasurable": len(closed) - len(measurable)}


def distinct_kernels(results: Sequence[Sequence[BenchResult]], completions: Sequence[Sequence[str]]) -> int:
    """The number of distinct verified kernel sources over all samples of a model (``normalise_code``)."""
    seen = set()
    for group, texts in zip(results, completions, strict=True):
        for r, text in zip(group, texts, strict=True):
            if r.ok:
                seen.add(kernel_identity(text))
    return len(seen)


def oracle_distinct(corpus: Sequence[CorpusEntry], oracles: Sequence[Oracle]) -> int:
    """The number of distinct oracle kernel sources (``normalise_code``) over the problems."""
    code = {e.name: normalise_code(e.code) for e in corpus}
    return len({code[o.kernel] for o in oracles if o.kernel is not None})


def corpus_summary(corpus: Sequence[CorpusEntry], results: Mapping[int, Sequence[BenchResult]]) -> dict[str, int]:
    """Counts over the timed corpus: ``corpus_kernels`` (entries), ``corpus_distinct`` (distinct sources, each timed
    once per size), of those ``corpus_verified`` (ok now at every size timed), and over the timings
    (``corpus_timings``: distinct sources x sizes) ``corpus_cached`` (served by the engine's result cache)."""
    distinct = {n: {normalise_code(e.code): r for e, r in zip(corpus, res, strict=True)} for n, res in results.items()}
    codes = {normalise_code(e.code) for e in corpus}
    return {"corpus_kernels": len(corpus), "corpus_distinct": len(codes),
            "corpus_verified": sum(all(d[c].ok for d in distinct.values()) for c in codes) if distinct else 0,
            "corpus_timings": sum(len(d) for d in distinct.values()),
            "corpus_cached": sum(r.cached for d in distinct.values() for r in d.values())}


def oracle_table(problems: Sequence[Mapping[str, Any]], oracles: Sequence[Oracle],
                 medians: Mapping[str, Sequence[float]], bests: Mapping[str, Sequence[float]]) -> list[dict[str, Any]]:
    """One row per problem: ``problem_id``, ``n``, ``permitted``, ``oracle_kernel``, ``oracle_gflops``,
    ``oracle_techniques``, and per model ``<name>_median``, ``<name>_best`` and ``<name>_ratio`` (None without an
    oracle).

    Args:
        problems: per problem, a mapping with ``problem_id`` and ``permitted`` (a record's metadata).
        oracles: per problem, its oracle.
        medians, bests: per model name, its per-problem median and best GFLOPS (0.0 when none verified).
    """
    rows = []
    for i, (meta, o) in enumerate(zip(problems, oracles, strict=True)):
        row: dict[str, Any] = {"problem_id": meta.get("problem_id"), "n": meta.get("n"),
                               "permitted": sorted(meta.get("permitted") or []),
                               "oracle_kernel": o.kernel, "oracle_gflops": o.gflops,
                               "oracle_techniques": list(o.techniques)}
        for name in medians:
            row[f"{name}_median"], row[f"{name}_best"] = medians[name][i], bests[name][i]
            row[f"{name}_ratio"] = medians[name][i] / o.gflops if o.gflops else None
        rows.append(row)
    return rows
