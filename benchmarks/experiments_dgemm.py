"""The DGEMM experiments of docs/experiments.md: GRPO (GFLOPS reward) vs the SFT baseline, and GRPO + SQD vs GRPO
without SQD, over several RL seeds and several SFT seeds.

SFT seeds (``--sft-seeds``): the params' own ``sft.seed`` uses the SFT policy at ``--sft`` (``dvc repro sft``);
every other seed trains one (``run_sft`` with that ``sft.seed``, same data and params) into
``experiments/dgemm/sft-s<seed>/`` (resumed if interrupted). For each variant, SFT seed and RL seed: ``run_rl`` from
that SFT policy into ``experiments/dgemm/<variant>-sft<S>-s<seed>/`` (resumed if interrupted), then the held-out
evaluation of SFT and that RL policy (``evaluate_dgemm``: same problems, same k, same temperature). A finished run
folder is reused only if its recorded settings (RL, reward and evaluation params; data and SFT paths) match this
invocation's. Per variant it reports the mean and spread (population std over all runs) of the RL verified rate,
median GFLOPS of verified kernels, its ratio to SFT's, the best GFLOPS and WinRate vs SFT; the oracle yardstick
(oracle ratio of RL and SFT, RL's on problems permitting 4-5 techniques, headroom closed, best vs numpy, distinct
kernels); and per run when its training first sampled a fast kernel and whether it kept it
(``hpcrl_core/evaluation/discovery.py``) and whether it meets issue 24's bars (``hpcrl_core/evaluation/targets.py``).
Variants: ``sqd`` = params.yaml as is; ``nosqd`` = ``rl_dgemm.sqd.enabled: false`` (problems keep their
generated stage); ``share`` = ``reward.duplicate_penalty`` set to ``--share-penalty`` (docs/sqd.md, "Duplicate
sharing"); ``noshare`` = ``reward.duplicate_penalty: 0`` (params.yaml shares duplicates by default); ``vocab`` =
``rl_dgemm.plan_vocabulary`` and ``evaluate.dgemm_plan_vocabulary`` ``corpus`` (plan lines held to the corpus's,
in RL and in the evaluation of both policies; params.yaml's default); ``fields`` = both ``fields`` (the corpus's
plan fields recombined within a kind); ``novocab`` = both ``none`` (plan lines free); ``trainsizes`` and
``span`` = ``rl_dgemm.visit_sizes`` ``train`` and ``span`` (each visit draws the n it asks for: docs/sqd.md).

Prints the table and writes it to docs/experiments.md (between markers), with every run's figures in
``experiments/dgemm/results.json`` (``--no-write``: prints only).

Run: ``.venv/bin/python benchmarks/experiments_dgemm.py [--seeds 1 2 3] [--sft-seeds 1234 7]
[--variants sqd nosqd share noshare vocab fields novocab trainsizes span] [--share-penalty 10] [--steps N]``
(needs ``dvc repro sft``; each run takes rl_dgemm.max_steps RL steps plus one evaluation, each further SFT seed one
SFT training, ``sft.max_steps`` steps).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.doc_sections import write_section  # noqa: E402
from hpcrl_core.config import Params, Settings, load_params  # noqa: E402
from hpcrl_core.errors import DataError  # noqa: E402
from hpcrl_core.evaluation.dgemm import evaluate_dgemm  # noqa: E402
from hpcrl_core.evaluation.discovery import Discovery, describe, discovery, read_history  # noqa: E402
from hpcrl_core.evaluation.oracle import MEASURABLE_GAP  # noqa: E402
from hpcrl_core.evaluation.report import samples_path_for, write_report, write_samples  # noqa: E402
from hpcrl_core.evaluation.targets import HEADROOM_CLOSED, missed_bars  # noqa: E402
from hpcrl_core.training.rl import run_rl  # noqa: E402
from hpcrl_core.training.sft import run_sft  # noqa: E402

DOC = ROOT / "docs" / "experiments.md"
KEYS = ("verified_rate", "gflops_median", "gflops_best", "best_vs_numpy")


VARIANTS = ("sqd", "nosqd", "share", "noshare", "vocab", "fields", "novocab", "trainsizes", "span")


def variant_params(params: Params, variant: str, seed: int, steps: int | None,
                   share_penalty: float = 10.0) -> Params:
    rp, reward, ep = params.rl_dgemm, params.reward, params.evaluate
    update: dict[str, Any] = {"seed": seed}
    if steps:
        update["max_steps"] = steps
    if variant == "nosqd":
        update["sqd"] = rp.sqd.model_copy(update={"enabled": False})
    elif variant == "share":
        reward = reward.model_copy(update={"duplicate_penalty": share_penalty})
    elif variant == "noshare":
        reward = reward.model_copy(update={"duplicate_penalty": 0.0})
    elif variant in ("vocab", "fields", "novocab"):
        update["plan_vocabulary"] = {"vocab": "corpus", "fields": "fields", "novocab": "none"}[variant]
        ep = ep.model_copy(update={"dgemm_plan_vocabulary": update["plan_vocabulary"]})
    elif variant in ("trainsizes", "span"):
        update["visit_sizes"] = {"trainsizes": "train", "span": "span"}[variant]
    elif variant != "sqd":
        raise SystemExit(f"unknown variant {variant!r}; allowed: {', '.join(VARIANTS)}")
    return params.model_copy(update={"rl_dgemm": rp.model_copy(update=update), "reward": reward, "evaluate": ep})


def run_settings(p: Params, data: Path, sft: Path) -> dict[str, Any]:
    """What a run's result depends on besides chance: the RL, reward and evaluation params, the sizes RL visits draw,
    the data and SFT paths."""
    return {"rl_dgemm": p.rl_dgemm.model_dump(mode="json"), "reward": p.reward.model_dump(mode="json"),
            "train_sizes": list(p.prepare.dgemm.train_sizes), "eval_sizes": list(p.prepare.dgemm.eval_sizes),
            "evaluate": p.evaluate.model_dump(mode="json"), "data": str(data.resolve()), "sft": str(sft.resolve())}


def settings_differences(saved: dict[str, Any], now: dict[str, Any], prefix: str = "") -> list[str]:
    """One ``key: saved -> now`` line per leaf that differs between two ``run_settings``."""
    lines = []
    for key in sorted(set(saved) | set(now)):
        old, new = saved.get(key), now.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            lines += settings_differences(old, new, f"{prefix}{key}.")
        elif old != new:
            lines.append(f"{prefix}{key}: {old!r} -> {new!r}")
    return lines


def sft_policy(params: Params, sft_seed: int, default: Path, data: Path, out: Path) -> Path:
    """The SFT policy of ``sft_seed``: ``default`` for the params' own seed, else one trained (or resumed) into
    ``out/sft-s<seed>/`` with only ``sft.seed`` changed."""
    if sft_seed == params.sft.seed:
        return default
    folder = out / f"sft-s{sft_seed}"
    print(f"== SFT seed {sft_seed} -> {folder}")
    p = params.model_copy(update={"sft": params.sft.model_copy(update={"seed": sft_seed})})
    return Path(run_sft(p, data, folder, report_to=[])["final_dir"])


def one_run(params: Params, variant: str, seed: int, out: Path, data: Path, sft: Path,
            steps: int | None, sft_seed: int, share_penalty: float = 10.0) -> dict[str, Any]:
    folder = out / f"{variant}-sft{sft_seed}-s{seed}"
    report_path = folder / "eval_dgemm.json"
    p = variant_params(params, variant, seed, steps, share_penalty)
    settings = run_settings(p, data, sft)
    if report_path.is_file():  # finished earlier: reuse it, but only if it was run with these settings
        report: dict[str, Any] = json.loads(report_path.read_text())
        saved = report["meta"].get("settings")
        if saved is None:
            print(f"   reusing {folder}: it predates recorded settings, so they cannot be checked")
        elif diffs := settings_differences(saved, settings):
            raise SystemExit(f"{folder} holds a run with other settings; delete or move it to redo the run:\n  "
                             + "\n  ".join(diffs))
        return report
    trained = run_rl(p, data, sft, folder / "rl", report_to=[], settings=Settings())
    report, rows = evaluate_dgemm({"sft": sft, "rl": Path(trained["final_dir"])}, data, p, Settings(),
                                  progress=print)
    report["meta"]["rl_run"] = {k: v for k, v in trained.items() if isinstance(v, int | float | str)}
    report["meta"]["rl_run"]["discovery"] = dataclasses.asdict(discovery(read_history(Path(trained["final_dir"]))))
    report["meta"]["settings"] = settings
    report["meta"]["sft_seed"], report["meta"]["rl_seed"] = sft_seed, seed
    write_samples(rows, samples_path_for(report_path))
    write_report(report, report_path)
    return report


def _spread(values: list[float]) -> str:
    if not values:
        return "–"
    mean = statistics.fmean(values)
    sd = statistics.pstdev(values) if len(values) > 1 else 0.0
    return f"{mean:.3g} ± {sd:.2g}"


def median_ratio(report: dict[str, Any]) -> float | None:
    """RL's median GFLOPS of verified kernels over SFT's; None when SFT verified no kernel."""
    sft = report["sft"]["gflops_median"]
    return report["rl"]["gflops_median"] / sft if sft > 0 else None


def table(results: dict[str, list[dict[str, Any]]]) -> list[str]:
    lines = ["| variant | seeds | RL verified | SFT verified | RL median GFLOPS | RL/SFT median | RL best GFLOPS "
             "| WinRate vs SFT |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for variant, reports in results.items():
        rl = [r["rl"] for r in reports]
        sft = [r["sft"] for r in reports]
        ratio = [r for r in map(median_ratio, reports) if r is not None]
        lines.append(f"| {variant} | {len(reports)} | {_spread([x['verified_rate'] for x in rl])} | "
                     f"{_spread([x['verified_rate'] for x in sft])} | {_spread([x['gflops_median'] for x in rl])} | "
                     f"{_spread(ratio)} | {_spread([x['gflops_best'] for x in rl])} | "
                     f"{_spread([x['winrate_vs_sft'] for x in rl])} |")
    return lines


def _present(blocks: list[dict[str, Any]], key: str) -> list[float]:
    return [float(b[key]) for b in blocks if b.get(key) is not None]


def yardstick_table(results: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Per variant, mean ± std over seeds of the oracle yardstick (docs/sqd.md, "The held-out evaluation"); a run
    whose report predates it, or has no problem with an oracle, is left out of that column."""
    columns = (("rl", "oracle_ratio"), ("sft", "oracle_ratio"), ("rl", "oracle_ratio_rich"),
               ("rl", "oracle_ratio_held_out"), ("rl", "oracle_ratio_drawn"), ("rl", "headroom_closed"),
               ("rl", "best_vs_numpy"), ("rl", "distinct_kernels"), ("sft", "distinct_kernels"),
               ("oracle", "distinct_kernels"))
    lines = ["| variant | RL oracle ratio | SFT oracle ratio | RL ratio, 4-5 techniques | RL ratio, held-out sets "
             "| RL ratio, drawn sets | headroom closed | RL best vs numpy | RL distinct kernels "
             "| SFT distinct kernels | oracle distinct kernels |",
             "|---|" + "---:|" * len(columns)]
    for variant, reports in results.items():
        cells = [_spread(_present([r.get(model, {}) for r in reports], key)) for model, key in columns]
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    return lines


def headroom_line(results: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Per variant, the mean headroom closed over its runs against its bar (``targets.HEADROOM_CLOSED``)."""
    lines = []
    for variant, reports in results.items():
        values = _present([r["rl"] for r in reports], "headroom_closed")
        mean = statistics.fmean(values) if values else None
        verdict = ("no runs with a figure" if mean is None
                   else f"{mean:.3f} ({'meets' if mean >= HEADROOM_CLOSED else 'below'} {HEADROOM_CLOSED})")
        measurable = _present([r["rl"] for r in reports], "headroom_closed_measurable")
        if measurable:  # reports written before the figure existed lack it
            verdict += (f"; over the problems with a gap of at least {MEASURABLE_GAP:.0%} of the oracle: "
                        f"{statistics.fmean(measurable):.3f} ({len(measurable)} runs)")
        weighted = _present([r["rl"] for r in reports], "headroom_closed_weighted")
        if weighted:
            verdict += f"; gap-weighted: {statistics.fmean(weighted):.3f} ({len(weighted)} runs)"
        lines.append(f"- {variant}: mean headroom closed over {len(values)} runs: {verdict}")
    return lines


def training_found(report: dict[str, Any]) -> str:
    """When the run's training first sampled a kernel of 0.8x numpy and whether it kept it
    (``hpcrl_core/evaluation/discovery.py``): recorded in the report, else read from the run's final folder; "-"
    when neither is there."""
    run = report["meta"].get("rl_run", {})
    if "discovery" in run:
        return describe(Discovery(**run["discovery"]))
    try:
        return describe(discovery(read_history(Path(run.get("final_dir") or "/nonexistent"))))
    except DataError:
        return "-"


def per_run(results: dict[str, list[dict[str, Any]]]) -> list[str]:
    lines = ["| variant | SFT seed | RL seed | SFT verified | RL verified | points | SFT median | RL median | RL/SFT "
             "| WinRate | promotions | fast kernel in training | issue 24 bars |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for variant, reports in results.items():
        for r in reports:
            rl, sft = r["rl"], r["sft"]
            ratio = median_ratio(r)
            shown = "-" if ratio is None else f"{ratio:.2f}x"
            run = r["meta"].get("rl_run", {})
            missed = missed_bars(r)
            lines.append(f"| {variant} | {r['meta'].get('sft_seed', '-')} | {r['meta'].get('rl_seed', '-')} | "
                         f"{sft['verified_rate']:.1%} | {rl['verified_rate']:.1%} | "
                         f"{100 * (rl['verified_rate'] - sft['verified_rate']):+.1f} | {sft['gflops_median']:.2f} | "
                         f"{rl['gflops_median']:.2f} | {shown} | {rl['winrate_vs_sft']:.3f} | "
                         f"{run.get('promotions', '-')} | {training_found(r)} | "
                         f"{'met' if not missed else 'missed: ' + '; '.join(missed)} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="RL seeds")
    ap.add_argument("--sft-seeds", type=int, nargs="+", default=None,
                    help="SFT seeds (default: the params' sft.seed alone, the policy at --sft)")
    ap.add_argument("--variants", nargs="+", default=["sqd", "nosqd"], choices=VARIANTS)
    ap.add_argument("--share-penalty", type=float, default=10.0,
                    help="reward.duplicate_penalty of the share variant (reward units)")
    ap.add_argument("--steps", type=int, default=None, help="override rl_dgemm.max_steps")
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    ap.add_argument("--data", default=str(ROOT / "data"))
    ap.add_argument("--sft", default=str(ROOT / "checkpoints" / "sft" / "final"))
    ap.add_argument("--out", default=str(ROOT / "experiments" / "dgemm"))
    ap.add_argument("--no-write", action="store_true",
                    help="print only; leave docs/experiments.md and <out>/results.json alone (runs are still kept)")
    a = ap.parse_args()
    params, out = load_params(a.params), Path(a.out)
    sft_seeds = a.sft_seeds or [params.sft.seed]
    policies = {s: sft_policy(params, s, Path(a.sft), Path(a.data), out) for s in sft_seeds}
    missing = [str(path) for path in policies.values() if not path.is_dir()]
    if missing:
        raise SystemExit(f"no SFT policy at {', '.join(missing)}; run `dvc repro sft` (or pass --sft)")
    results: dict[str, list[dict[str, Any]]] = {}
    for variant in a.variants:
        for sft_seed, policy in policies.items():
            for seed in a.seeds:
                print(f"== {variant} SFT seed {sft_seed} RL seed {seed}")
                results.setdefault(variant, []).append(
                    one_run(params, variant, seed, out, Path(a.data), policy, a.steps, sft_seed, a.share_penalty))
    first = next(iter(results.values()))[0]["meta"]
    lines = [f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC with `benchmarks/experiments_dgemm.py --seeds "
             f"{' '.join(map(str, a.seeds))} --sft-seeds {' '.join(map(str, sft_seeds))} "
             f"--variants {' '.join(a.variants)}"
             f"{f' --share-penalty {a.share_penalty:g}' if 'share' in a.variants else ''}"
             f"{f' --steps {a.steps}' if a.steps else ''}`: {first['problems']} held-out problems, k={first['k']}, "
             f"T={first['temperature']}, n={','.join(map(str, first['sizes']))} (each problem's own); "
             "mean ± std over all runs (SFT seeds x RL seeds).", "", *table(results),
             "", "Against the oracle (the fastest corpus kernel each problem permits, timed in the same run):", "",
             *yardstick_table(results),
             "", *headroom_line(results),
             "", "Per run (issue 24's bars: RL oracle ratio ≥ 0.85, rich ≥ 0.6, best ≥ 0.8x numpy, verified at most 5 "
             "points below SFT, distinct kernels ≥ half of SFT's):", "", *per_run(results)]
    print("\n".join(lines))
    if not a.no_write:
        write_report(results, out / "results.json")
        write_section(DOC, "experiments_dgemm", "\n".join(lines), "## Results", "# Experiments")
    return 0


if __name__ == "__main__":
    sys.exit(main())
