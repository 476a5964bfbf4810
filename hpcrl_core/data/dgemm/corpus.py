"""The DGEMM SFT corpus: benchmark generated variants, keep the verified ones, pair them with train problems.

1. ``benchmark_variants``: every variant goes through the benchmark engine (``LocalExecutor.map``); only ``ok``
   results are kept, as ``CorpusKernel`` with the techniques the engine *detected* (not the intended ones). A
   report counts failures by status and lists every kernel whose detected techniques differ from the intended.
2. ``sft_records``: each kernel is paired with up to ``per_kernel`` train problems whose permitted set contains all
   its detected techniques (never one that forbids a technique it uses). First come ``min_per_kernel`` coverage
   rounds: each round gives every kernel one more problem (the free one with the fewest permitted techniques that
   allows it), the kernels with the fewest eligible problems first, so slow kernels stay in the mix and kernels that
   use many techniques, which only the scarce rich prompts fit, are shown more than once or twice. Then every
   remaining problem draws one of its allowed kernels with the weight of the kernel's generator kind
   (``kind_weights``, ``prepare.dgemm.kind_weights``: faster kinds more often). No timing enters the pairing and
   every draw is keyed by kernel and problem names (``hpcrl_core.data.stable``), so two nodes that verify the same
   kernels pair them with the same prompts however their timings differ. A problem is used at most once, so the
   train problem count bounds the records (a warning names kernels left without any).
   With ``plan`` each completion opens with ``plan_line``, the kernel's kind and parameters, so a policy picks the
   design first (docs/data.md).
3. ``gflops_distribution``: numbers for the data card (the short timings are recorded there, not used).

Run (about 2 minutes on 2 cores): ``python -m hpcrl_core.data.dgemm.corpus [COUNT] [N]`` benchmarks a batch at
size N with short timings and prints the report and the distribution.
Test: ``pytest tests/data/dgemm/test_corpus.py`` (``-m integration`` runs a real engine).
"""

from __future__ import annotations

import logging
import math
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from hpcrl_core.bench.executor import LocalExecutor
from hpcrl_core.bench.techniques import ALL_TECHNIQUES, Technique, parse_techniques
from hpcrl_core.config.model import PlanVocabulary
from hpcrl_core.data.dgemm.problems import (
    HELD_OUT_PERMITTED,
    Problem,
    problem_metadata,
    problem_prompt,
    split_and_seed,
)
from hpcrl_core.data.dgemm.variants import Variant
from hpcrl_core.data.schema import Record, assistant
from hpcrl_core.data.stable import stable_unit, weighted_key
from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.files import json_lines

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CorpusKernel:
    """A verified kernel: ``techniques`` as detected by the engine, ``intended`` as the generator meant them,
    ``kind`` the generator kind that drew it."""

    name: str
    kind: str
    code: str
    techniques: frozenset[Technique]
    gflops: float
    cv: float
    intended: frozenset[Technique]
    n: int


def _names(techs: frozenset[Technique]) -> list[str]:
    return sorted(t.value for t in techs)


BenchReport = dict[str, Any]


def benchmark_variants(variants: Sequence[Variant], executor: LocalExecutor, n: int,
                       progress: Callable[[int, int], None] | None = None) -> tuple[list[CorpusKernel], BenchReport]:
    """Benchmark variants at size ``n`` and keep the verified ones.

    Args:
        variants: kernels to benchmark.
        executor: the caller's executor (its Engine fixes flags, timing and sandbox).
        n: matrix size of the timed runs.
        progress: ``progress(done, total)`` as results arrive.

    Returns:
        The verified kernels in input order, and a report: ``total``, ``verified``, ``failed`` (status -> count),
        ``failures`` ([name, status, first line of detail]), ``mismatched`` (verified kernels whose detected
        techniques differ from the intended), ``mismatches`` ([name, intended, detected]) and ``agreement`` (share
        of verified kernels without a mismatch; None when none verified), ``compile_s`` and ``run_s`` (seconds summed
        over the results, as recorded in them). Mismatches are also logged as warnings.

    Raises:
        BenchInfraError: the benchmark machinery failed (never for a kernel's fault).
    """
    results = executor.map([v.code for v in variants], n, progress)
    kernels: list[CorpusKernel] = []
    failed: Counter[str] = Counter()
    failures: list[list[str]] = []
    mismatches: list[list[Any]] = []
    compile_s = sum(r.compile_s for r in results)
    run_s = sum(r.run_s for r in results)
    for v, r in zip(variants, results, strict=True):
        if not r.ok or r.gflops is None:
            failed[r.status.value] += 1
            failures.append([v.name, r.status.value, (r.detail.splitlines() or [""])[0][:300]])
            continue
        detected = parse_techniques(r.techniques)
        if detected != v.intended:
            mismatches.append([v.name, _names(v.intended), _names(detected)])
            log.warning("%s: detected techniques %s differ from the intended %s", v.name, _names(detected),
                        _names(v.intended))
        kernels.append(CorpusKernel(v.name, v.kind, v.code, detected, r.gflops, r.cv or 0.0,
                                    v.intended, n))
    report = {"total": len(variants), "verified": len(kernels), "failed": dict(failed), "failures": failures,
              "mismatched": len(mismatches), "mismatches": mismatches,
              "agreement": round(1 - len(mismatches) / len(kernels), 4) if kernels else None,
              "compile_s": round(compile_s, 1), "run_s": round(run_s, 1)}
    return kernels, report


def _check_train(problems: Sequence[Problem]) -> None:
    for p in problems:
        if p.permitted in HELD_OUT_PERMITTED or split_and_seed(p.id)[0] == "eval":
            raise DataError(f"problem {p.id} looks like an eval problem (permitted {_names(p.permitted)}); "
                            "pair kernels with train problems only (make_problems('train', ...))")


def _assign(kernels: Sequence[CorpusKernel], problems: Sequence[Problem], seed: int, per_kernel: int,
            kind_weights: Mapping[str, float], min_per_kernel: int = 1) -> dict[int, int]:
    """Problem index -> kernel index (see the module docstring for the two phases).

    Every choice is a ``stable_unit`` / ``weighted_key`` of the names involved, never a position in a random stream,
    so a kernel more or less on another node changes only the choices that involve that kernel (and those that follow
    from its quota), not the whole pairing; timings are not read at all.
    """
    eligible = [[pi for pi, p in enumerate(problems) if k.techniques <= p.permitted] for k in kernels]
    used: Counter[int] = Counter()
    chosen: dict[int, int] = {}
    if per_kernel < 1:
        return chosen
    # coverage: round r gives every kernel with fewer than r prompts one more, the kernels with the fewest eligible
    # problems (those using the most techniques) first, so the scarce rich prompts go to the kernels only they fit
    order = sorted(range(len(kernels)), key=lambda i: (len(eligible[i]), kernels[i].name))
    for _ in range(min(min_per_kernel, per_kernel)):
        for ki in order:
            free = [pi for pi in eligible[ki] if pi not in chosen]
            if free:
                tightest = min(len(problems[pi].permitted) for pi in free)
                pick = min((pi for pi in free if len(problems[pi].permitted) == tightest),
                           key=lambda pi: stable_unit("dgemm-sft-cover", seed, kernels[ki].name, problems[pi].id))
                chosen[pick] = ki
                used[ki] += 1
    allowed: dict[int, list[int]] = {}
    for ki, pis in enumerate(eligible):
        for pi in pis:
            allowed.setdefault(pi, []).append(ki)
    rest = sorted((pi for pi in range(len(problems)) if pi not in chosen and pi in allowed),
                  key=lambda pi: stable_unit("dgemm-sft-order", seed, problems[pi].id))
    for pi in rest:  # preference: faster kernels more often
        options = [ki for ki in allowed[pi] if used[ki] < per_kernel]
        if options:
            ki = max(options, key=lambda i: weighted_key(kind_weights[kernels[i].kind], "dgemm-sft-pick", seed,
                                                         problems[pi].id, kernels[i].name))
            chosen[pi] = ki
            used[ki] += 1
    return chosen


CODE_FENCE = "```c\n"  # what every SFT completion opens with, before the plan line and the code


def plan_prefix(kind: str) -> str:
    """An SFT completion's opening up to the end of the kind's name (the code fence, then ``// plan: packed``; no
    kind's name begins another's): what RL's plan novelty forces a completion to open with
    (``hpcrl_core/algorithms/exploration.py``). It stops before the colon, which the tokenizer joins to the space
    after it in SFT text."""
    return f"{CODE_FENCE}// plan: {kind}"


def plan_line(kind: str, name: str) -> str:
    """The comment an SFT completion opens with: the kernel's kind and the parameters the generator drew for it
    (``// plan: packed: packed-ext8-12x16-kc384-mc64-u2-omp``), from its name ``NNNN:kind:parameters``."""
    return plan_text(kind, plan_parameters(name))


def plan_parameters(name: str) -> str:
    """The parameters part of a corpus kernel's name ``NNNN:kind:parameters``."""
    return name.split(":", 2)[-1]


def plan_text(kind: str, parameters: str) -> str:
    """The plan line of a kind and its parameters, newline included (``plan_line`` of a kernel's name)."""
    return f"// plan: {kind}: {parameters}\n"


def corpus_rows(corpus: Path, fields: Mapping[str, type]) -> list[tuple[int, dict[str, Any]]]:
    """The rows of ``data/dgemm/corpus.jsonl`` with their line numbers, each with ``fields`` (name -> type).

    Raises:
        DataError: the corpus is missing or empty, or a line is not an object with those fields.
    """
    if not corpus.is_file():
        raise DataError(f"{corpus} is missing; run `dvc repro prepare` to create the DGEMM corpus")
    rows = []
    for i, row in json_lines(corpus, hint="; rerun `dvc repro prepare`"):
        if not isinstance(row, dict) or any(not isinstance(row.get(k), t) for k, t in fields.items()):
            wanted = " or ".join(f"a {t.__name__} {k!r}" for k, t in fields.items())
            raise DataError(f"{corpus}:{i} lacks {wanted}; rerun `dvc repro prepare`")
        rows.append((i, row))
    if not rows:
        raise DataError(f"{corpus} holds no kernels; rerun `dvc repro prepare`")
    return rows


PLAN_VOCABULARIES: tuple[str, ...] = get_args(PlanVocabulary)


def recombined_plans(plans: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
    """Per kind, every parameter string whose hyphen-separated fields follow, position by position, steps some plan
    of that kind takes: the first field one of a plan's first, each next field one that follows the field before it
    at that position in some plan, the end where some plan ends there. ``(kind, parameters)`` pairs in, the same out;
    the input is part of the output. ``packed-ext8-8x24-kc256-mc128-u2`` is in it when the corpus has
    ``ext8-8x24-kc256`` in one kernel and ``kc256-mc128-u2`` (at the same positions) in others; a parameter string
    that joins two kinds' fields (``tile-vec4-ext-64-loops``: 64 is a blocked kernel's field) never is."""
    fields: dict[str, set[tuple[str, ...]]] = {}
    for kind, parameters in plans:
        fields.setdefault(kind, set()).add(tuple(parameters.split("-")))
    out = set()
    for kind, seqs in fields.items():
        steps: dict[tuple[int, str], set[str | None]] = {}
        for seq in seqs:
            for i, field in enumerate(seq):
                steps.setdefault((i, field), set()).add(seq[i + 1] if i + 1 < len(seq) else None)
        todo = sorted({seq[:1] for seq in seqs})
        while todo:
            path = todo.pop()
            for nxt in steps[(len(path) - 1, path[-1])]:
                if nxt is None:
                    out.add((kind, "-".join(path)))
                else:
                    todo.append((*path, nxt))
    return out


def plan_openings(corpus: Path, with_plan: bool, plan_permitted: bool, key: str,
                  vocabulary: str = "corpus") -> list[str]:
    """The texts a DGEMM completion may open with under ``key`` (``evaluate.dgemm_plan_vocabulary``,
    ``rl_dgemm.plan_vocabulary``; ``hpcrl_core/evaluation/openings.py``): the code fence and a plan line, newline
    included, as ``sft_records`` writes them; sorted, without repeats. ``vocabulary`` ``corpus``: the plan lines of
    the kernels of ``corpus`` (``data/dgemm/corpus.jsonl``); ``fields``: those recombined field by field within
    each kind (``recombined_plans``); ``none``: no constraint, [] (nothing read or checked). ``with_plan`` and
    ``plan_permitted`` are the data's ``prepare.dgemm.plan_line`` and ``plan_permitted``.

    Raises:
        ConfigError: SFT completions that do not open with the fence and the plan line (no plan line, or the
            permitted line before it), or an unknown ``vocabulary``.
        DataError: the corpus is missing or empty, or a line lacks a string ``kind`` or ``name``.
    """
    if vocabulary not in PLAN_VOCABULARIES:
        raise ConfigError(f"{key}: {vocabulary!r} is no plan vocabulary; one of {', '.join(PLAN_VOCABULARIES)}")
    if vocabulary == "none":
        return []
    if not with_plan or plan_permitted:
        raise ConfigError(f"{key} holds each plan line to the corpus's, and SFT completions open with the code fence "
                          "and a plan line only with prepare.dgemm.plan_line: true and plan_permitted: false (got "
                          f"plan_line {with_plan}, plan_permitted {plan_permitted}); set {key}: none or prepare "
                          "the data with those")
    plans = {(row["kind"], plan_parameters(row["name"])) for _, row in corpus_rows(corpus, {"kind": str, "name": str})}
    if vocabulary == "fields":
        plans = recombined_plans(plans)
    return sorted(CODE_FENCE + plan_text(kind, parameters) for kind, parameters in plans)


def permitted_line(problem: Problem) -> str:
    """The comment that restates the prompt's permitted techniques, in the prompt's order, before the plan line
    (``// permitted: loop_reorder cache_blocking openmp``, or ``// permitted: none``): the kind is then chosen next
    to a short copy of what the prompt allows instead of from a list spread over ~300 prompt tokens."""
    names = [t.value for t in ALL_TECHNIQUES if t in problem.permitted]
    return f"// permitted: {' '.join(names) or 'none'}\n"


def sft_records(kernels: Sequence[CorpusKernel], problems: Sequence[Problem], seed: int, per_kernel: int,
                kind_weights: Mapping[str, float], plan: bool = False, plan_permitted: bool = False,
                min_per_kernel: int = 1) -> list[Record]:
    """Pair verified kernels with train problems that permit every technique they use.

    Args:
        kernels: verified kernels (``benchmark_variants``).
        problems: train problems (``make_problems("train", ...)``); each is used at most once.
        seed: makes the pairing deterministic.
        per_kernel: at most this many problems per kernel.
        kind_weights: generator kind -> positive draw weight (``prepare.dgemm.kind_weights``).
        plan: open each completion with ``plan_line`` (``prepare.dgemm.plan_line``).
        plan_permitted: put ``permitted_line`` first (``prepare.dgemm.plan_permitted``).
        min_per_kernel: coverage rounds: every kernel gets up to this many problems (capped at ``per_kernel``)
            before the weighted fill (``prepare.dgemm.min_per_kernel``).

    Returns:
        Records in problem order: the problem's prompt, the kernel in one ```c block as completion. Nothing in them
        depends on a timing, so the same kernels give the same records on every node.

    Raises:
        DataError: a problem with a held-out permitted set or an eval id, or a kernel whose kind has no positive
            finite weight.
    """
    _check_train(problems)
    bad = sorted({k.kind for k in kernels if not (kind_weights.get(k.kind, 0) > 0
                                                      and math.isfinite(kind_weights[k.kind]))})
    if bad:
        raise DataError(f"kernel kinds without a positive weight in prepare.dgemm.kind_weights: {', '.join(bad)}")
    chosen = _assign(kernels, problems, seed, per_kernel, kind_weights, min_per_kernel)
    unused = len(kernels) - len(set(chosen.values()))
    if unused:
        log.warning("%d of %d kernels found no free train problem that permits their techniques; "
                    "generate more train problems to use them all", unused, len(kernels))
    out = []
    for pi in sorted(chosen):
        p, k = problems[pi], kernels[chosen[pi]]
        if not k.techniques <= p.permitted:  # the invariant of the whole corpus; never let a bug break it
            raise AssertionError(f"{k.name} uses {_names(k.techniques)}, {p.id} permits {_names(p.permitted)}")
        meta = problem_metadata(p, {"kernel_name": k.name, "kernel_kind": k.kind,
                                    "kernel_techniques": _names(k.techniques)})
        body = (permitted_line(p) if plan_permitted else "") + (plan_line(k.kind, k.name) if plan else "") + k.code
        out.append(Record(family="dgemm", prompt=problem_prompt(p), completion=assistant(CODE_FENCE + body + "```"),
                          answer="", metadata=meta,
                          provenance={"source": "synthetic:dgemm-corpus@1", "seed": seed, "variant": k.name}))
    return out


def _percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile of sorted values, q in [0, 1]."""
    pos = q * (len(values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def gflops_distribution(kernels: Sequence[CorpusKernel]) -> dict[str, Any]:
    """GFLOPS summary (count, min, p10, median, p90, max, mean), the median per generator kind and kernel counts per
    detected technique set."""
    vals = sorted(k.gflops for k in kernels)
    by_set = Counter("+".join(_names(k.techniques)) or "none" for k in kernels)
    stats: dict[str, Any] = {"count": len(vals)}
    for key, q in (("min", 0.0), ("p10", 0.1), ("median", 0.5), ("p90", 0.9), ("max", 1.0)):
        stats[key] = round(_percentile(vals, q), 3) if vals else None
    stats["mean"] = round(statistics.fmean(vals), 3) if vals else None
    by_kind: dict[str, list[float]] = {}
    for k in kernels:
        by_kind.setdefault(k.kind, []).append(k.gflops)
    stats["median_by_kind"] = {kind: round(statistics.median(v), 3) for kind, v in sorted(by_kind.items())}
    stats["by_techniques"] = dict(sorted(by_set.items(), key=lambda kv: (-kv[1], kv[0])))
    return stats


def main(argv: list[str]) -> None:
    """Benchmark a batch with short timings in private folders under /tmp and print the report."""
    import json
    import os
    import shutil
    import tempfile
    import time
    from pathlib import Path

    from hpcrl_core.bench.engine import Engine
    from hpcrl_core.config import BenchParams, Settings
    from hpcrl_core.data.dgemm.variants import generate_variants

    count, n = (int(argv[0]) if argv else 400), (int(argv[1]) if len(argv) > 1 else 256)
    bench = BenchParams().for_many(n)
    root = Path(tempfile.mkdtemp(prefix="hpcrl-dgemm-corpus-"))
    os.chmod(root, 0o755)
    try:
        engine = Engine(bench, Settings(cache_dir=root / "cache", scratch_dir=root / "scratch"))
        variants = generate_variants(0, count)
        start = time.monotonic()
        with LocalExecutor(engine) as ex:
            kernels, report = benchmark_variants(variants, ex, n)
        report["wall_s"] = round(time.monotonic() - start, 1)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({k: v for k, v in report.items() if k not in ("failures", "mismatches")}, indent=1))
    for row in report["failures"] + report["mismatches"]:
        print(row)
    print(json.dumps(gflops_distribution(kernels), indent=1))


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
