"""Builders of each family's data from its configured sources (called by the prepare stage).

Each returns a ``FamilyOutput`` (records split 9:1 with hygiene applied, and the family's data card). Records of a
file source that cannot be read or labelled are quarantined and listed in the card's ``quarantine`` section; more
than ``prepare.max_quarantine_share`` of one source's records stops the family (``hpcrl_core.data.quarantine``).

Test: ``pytest tests/data/test_prepare.py``.
"""

from __future__ import annotations

import time
from pathlib import Path

from hpcrl_core.bench.executor import local_executor
from hpcrl_core.config import BenchParams, PrepareParams, Settings
from hpcrl_core.data.dgemm.corpus import benchmark_variants, gflops_distribution, sft_records
from hpcrl_core.data.dgemm.problems import make_problems, problem_record
from hpcrl_core.data.dgemm.variants import generate_variants
from hpcrl_core.data.prepare import FamilyOutput, Progress, finish, sources_of
from hpcrl_core.data.qa.mlperf import generate_mlperf_items, load_hpcgpt_mlperf
from hpcrl_core.data.qa.plp import generate_plp_items, load_hpcgpt_plp
from hpcrl_core.data.quarantine import Quarantine, Quarantined
from hpcrl_core.data.race.generator import generate_race_items
from hpcrl_core.data.race.loaders import NOTICE_FILE, dataracebench_notice, load_dataracebench, load_hpcgpt_race
from hpcrl_core.data.race.tsan import check_with_tsan, tsan_agreement, tsan_available
from hpcrl_core.data.schema import Record


def _say(progress: Progress | None, text: str) -> None:
    if progress:
        progress(text)


def prepare_race(language: str, p: PrepareParams, progress: Progress | None = None) -> FamilyOutput:
    """Race detection items in one language, TSan-checked (C) and labelled by construction or by file name."""
    t0 = time.monotonic()
    family = f"race_{language}"
    records: list[Record] = []
    drb_roots: list[Path] = []
    quarantine = Quarantine(p.max_quarantine_share)
    for kind, path in sources_of(p, family):
        if kind == "synthetic":
            records += generate_race_items(language, p.race.per_pattern, p.seed, p.race.eval_pairs, p.race.rl_pairs,
                                          p.race.surface, p.race.grammar_pairs)
            continue
        held: list[Quarantined] = []  # records of this source that cannot be read or labelled
        if kind == "dataracebench":
            drb_roots.append(Path(str(path)))
            got = load_dataracebench(drb_roots[-1], language, quarantine=held)
        else:
            got = load_hpcgpt_race(Path(str(path)), language, quarantine=held)
        quarantine.admit(f"{kind}:{path}", len(got), held)
        records += got
    out = finish(family, records, p, key=_race_stratum, group=_race_group, strip=True, t0=t0,
                 rl_fraction=p.rl_fraction)
    if quarantine.sources:
        out.card["quarantine"] = quarantine.as_dict()
    if drb_roots:  # the licence notice travels with the data: written next to it, named in the card
        out.text_files[NOTICE_FILE] = dataracebench_notice(drb_roots, language)
        out.card["notices"] = {NOTICE_FILE: "DataRaceBench's licence notice; it applies to the dataracebench records "
                                            "and goes with every copy of them"}
    if language == "c" and p.race.tsan:
        _tsan_report(out, progress)
    return out


def _race_stratum(r: Record) -> str:
    """Split stratum: the pattern, and the label unless the item is half of a minimal pair (a pair holds both)."""
    return f"{r.metadata.get('pattern')}|{'pair' if r.provenance.get('pair') else r.answer}"


def _race_group(r: Record) -> str:
    """Both halves of a synthetic minimal pair go to the same side of the split; other items are their own group."""
    return str(r.provenance.get("pair") or r.id)


def _tsan_report(out: FamilyOutput, progress: Progress | None) -> None:
    """Run the final C items under ThreadSanitizer; agreement into the card, verdicts into ``tsan.jsonl``.

    The verdicts stay out of the records: TSan depends on thread scheduling (a lone task may run on its creator)
    and can differ between runs, while the data must not.
    """
    if not tsan_available():
        out.card["extra"] = {"tsan": "not run: clang with libomp is not installed (make setup installs it)"}
        return
    items = [r for split in ("train.jsonl", "eval.jsonl", "rl.jsonl") for r in out.files[split]]
    _say(progress, f"{out.family}: checking {len(items)} programs with ThreadSanitizer")
    checked = check_with_tsan(items, progress=lambda done, total: _say(progress, f"{out.family}: TSan checked "
                                                                                 f"{done}/{total} programs"))
    out.card["extra"] = {"tsan": tsan_agreement(checked)}
    out.extra_files["tsan.jsonl"] = [{"id": r.id, "pattern": r.metadata.get("pattern"), "label": r.answer,
                                      "tsan": r.metadata.get("tsan"), "tsan_error": r.metadata.get("tsan_error")}
                                     for r in checked]


def prepare_qa(family: str, p: PrepareParams, progress: Progress | None = None) -> FamilyOutput:
    """MLPerf or PLP question answering from the shipped facts tables and/or HPC-GPT files."""
    t0 = time.monotonic()
    qa = p.mlperf if family == "mlperf" else p.plp
    generate, load = ((generate_mlperf_items, load_hpcgpt_mlperf) if family == "mlperf"
                      else (generate_plp_items, load_hpcgpt_plp))
    records: list[Record] = []
    quarantine = Quarantine(p.max_quarantine_share)
    # under hold_out "fact", eval's facts are unseen: no held-out wordings, and no RL wordings (a fact RL asks could be
    # one eval holds out); the RL split then comes from prepare.rl_fraction, drawn by whole facts
    eval_phrasings = qa.eval_phrasings if qa.hold_out == "phrasing" else 0
    rl_phrasings = qa.rl_phrasings if qa.hold_out == "phrasing" else 0
    for kind, path in sources_of(p, family):
        if kind == "synthetic":  # held-out phrasings only with hold_out "phrasing": under "fact", facts are held out
            records += generate(p.seed, qa.paraphrases, eval_phrasings=eval_phrasings, rl_phrasings=rl_phrasings)
            continue
        held: list[Quarantined] = []
        got = load(Path(str(path)), quarantine=held)
        quarantine.admit(f"{kind}:{path}", len(got), held)
        records += got
    _say(progress, f"{family}: {len(records)} items")
    by_fact = qa.hold_out == "fact"  # else each phrasing is its own item: eval questions are unseen wordings
    out = finish(family, records, p, key=lambda r: str(r.metadata.get("topic")),
                 group=(lambda r: str(r.metadata.get("fact_id") or r.id)) if by_fact else None,
                 extra={"hold_out": qa.hold_out, "eval_phrasings": eval_phrasings, "rl_phrasings": rl_phrasings},
                 t0=t0, rl_fraction=p.rl_fraction)
    if quarantine.sources:
        out.card["quarantine"] = quarantine.as_dict()
    return out


def prepare_dgemm(p: PrepareParams, bench: BenchParams, settings: Settings,
                  progress: Progress | None = None) -> FamilyOutput:
    """DGEMM problems (train / held-out eval) and the verified SFT corpus paired with train prompts."""
    t0 = time.monotonic()
    d = p.dgemm
    train_problems = make_problems("train", p.seed, d.train_problems, d.train_sizes)
    eval_problems = make_problems("eval", p.seed, d.eval_problems, d.eval_sizes)
    variants = generate_variants(p.seed, d.variants, d.vary_names, d.vary_layout, d.naive_transposed,
                                 d.fit_registers, d.derived_nr, d.uniform_includes)

    def tick(done: int, total: int) -> None:
        if done == total or done % 20 == 0:
            _say(progress, f"dgemm: benchmarked {done}/{total} kernel variants")

    # Benchmarking only decides which kernels are verified (and records their short timings); the pairing never
    # reads a timing. The result cache makes a rerun on this node take seconds.
    with local_executor(bench.for_many(d.bench_n), settings) as ex:
        kernels, bench_report = benchmark_variants(variants, ex, d.bench_n, progress=tick)
    records = sft_records(kernels, train_problems, p.seed, d.per_kernel, d.kind_weights, d.plan_line,
                          d.plan_permitted, d.min_per_kernel)
    # the house layout can generate fewer variants (corpus.total) than asked for: small variant kinds run out
    extra = {"variants_requested": d.variants, "corpus": bench_report, "gflops": gflops_distribution(kernels),
             "bench_n": d.bench_n, "train_problems": len(train_problems), "eval_problems": len(eval_problems),
             "train_sizes": list(d.train_sizes), "eval_sizes": list(d.eval_sizes)}
    out = finish("dgemm", records, p, key=lambda r: ",".join(r.metadata.get("permitted") or []),
                 group=lambda r: str(r.metadata.get("kernel_name")), extra=extra, t0=t0)
    out.files["problems_train.jsonl"] = [problem_record(q, "train", p.seed) for q in train_problems]
    out.files["problems_eval.jsonl"] = [problem_record(q, "eval", p.seed) for q in eval_problems]
    # corpus.jsonl holds nothing timed, so two nodes that verify the same kernels write the same file; the short
    # timings (which depend on the node and its load) go to their own file
    out.extra_files["corpus.jsonl"] = [{"name": k.name, "kind": k.kind, "techniques": sorted(k.techniques),
                                        "code": k.code} for k in kernels]
    out.extra_files["corpus_timing.jsonl"] = [{"name": k.name, "n": k.n, "gflops": k.gflops, "cv": k.cv}
                                              for k in kernels]
    return out
