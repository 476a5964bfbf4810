"""Race detection from synthetic data alone: what the amount of generated data, the steps and the programs' surface do
to held-out synthetic F1 and to transfer onto programs no generator wrote.

For each run it prepares the race families only (``prepare_race``, C and Fortran, ``--per-pattern`` synthetic pairs
per pattern of each ``--surface``, no TSan pass), trains a race-only SFT policy (``sft.families: [race_c,
race_fortran]``, ``--steps``, ``--layers``), then answers greedily the held-out synthetic items (``eval.jsonl``) and
the labelled programs of each transfer folder (default ``benchmarks/race_transfer``). It prints one line per run: F1
with its 95% bootstrap interval, accuracy, the F1 of answering "yes" to everything, and the minutes each part took.
A run's folder (``--out``/``[surface-]pp<P>-st<S>-l<L>-s<seed>``) keeps its data, checkpoints and ``result.json``;
a finished run is reused (delete the folder to retrain). ``--seeds`` sets both the data and the training seed.

Run: ``.venv/bin/python benchmarks/race_scale.py --per-pattern 40 400 --steps 1200 [--surface narrow wide]
[--grammar-pairs 0 1000] [--reason-first] [--hidden 512] [--lr 3e-4] [--seeds 1 2] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

from hpcrl_core.config import load_params
from hpcrl_core.data.families import prepare_race
from hpcrl_core.data.prepare import write_outputs
from hpcrl_core.data.schema import Record, assistant, read_jsonl, write_jsonl
from hpcrl_core.evaluation.generate import generate
from hpcrl_core.evaluation.race_programs import by_pattern, evaluate_race_programs, score
from hpcrl_core.evaluation.runner import load_model
from hpcrl_core.training.sft import run_sft

ROOT = Path(__file__).resolve().parent
RACE = ["race_c", "race_fortran"]


def _params(base: Path, per_pattern: int, steps: int, layers: int, seed: int, surface: str, grammar: int,
            hidden: int | None = None, lr: float | None = None) -> Any:
    p = load_params(base)
    race = p.prepare.race.model_copy(update={"per_pattern": per_pattern, "tsan": False, "surface": surface,
                                             "grammar_pairs": grammar})
    prepare = p.prepare.model_copy(update={"race": race, "seed": seed})
    sft = p.sft.model_copy(update={"families": RACE, "max_steps": steps, "seed": seed,
                                   **({"learning_rate": lr} if lr else {})})
    width = {"hidden_size": hidden, "intermediate_size": 3 * hidden} if hidden else {}
    tiny = p.model.tiny.model_copy(update={"num_layers": layers, **width})
    model = p.model.model_copy(update={"tiny": tiny})
    return p.model_copy(update={"prepare": prepare, "sft": sft, "model": model})


def reason_first(r: Record) -> Record:
    """The completion with its reason first and the verdict last, in words the race parser reads: "<reason>, so the
    program contains a data race." / "..., so the program is free of data races."."""
    reason = r.response.partition(": ")[2].rstrip(".")
    verdict = "contains a data race" if r.answer == "yes" else "is free of data races"
    return dataclasses.replace(r, completion=assistant(f"{reason}, so the program {verdict}."))


def _synthetic(model_dir: Path, data: Path, seed: int, max_new_tokens: int = 64) -> dict[str, Any]:
    """Greedy answers to the held-out synthetic items of both languages, scored like the transfer folders."""
    records = [r for f in RACE for r in read_jsonl(data / f / "eval.jsonl")]
    model, tokenizer = load_model(model_dir)
    answers = [a[0] for a in generate(model, tokenizer, [r.prompt for r in records], temperature=0.0,
                                      max_new_tokens=max_new_tokens, batch_size=16, seed=seed)]
    return {**score(records, answers, seed), "patterns": by_pattern(records, answers)}


def run_one(base: Path, out: Path, per_pattern: int, steps: int, layers: int, seed: int, surface: str,
            folders: list[Path], grammar: int = 0, first_reason: bool = False, hidden: int | None = None,
            lr: float | None = None) -> dict[str, Any]:
    params = _params(base, per_pattern, steps, layers, seed, surface, grammar, hidden, lr)
    data, ckpt = out / "data", out / "sft"
    times: dict[str, float] = {}
    t0 = time.monotonic()
    if not (data / "race_fortran" / "train.jsonl").is_file():
        write_outputs([prepare_race(lang, params.prepare) for lang in ("c", "fortran")], data)
        if first_reason:
            for f in RACE:
                write_jsonl(data / f / "train.jsonl", [reason_first(r) for r in read_jsonl(data / f / "train.jsonl")])
    times["prepare_min"] = (time.monotonic() - t0) / 60
    train_items = sum(1 for f in RACE for _ in read_jsonl(data / f / "train.jsonl"))
    t0 = time.monotonic()
    run_sft(params, data, ckpt, report_to=[])
    times["sft_min"] = (time.monotonic() - t0) / 60
    t0 = time.monotonic()
    synthetic = _synthetic(ckpt / "final", data, seed, 128 if first_reason else 64)
    transfer = evaluate_race_programs(ckpt / "final", folders, seed=seed)
    times["eval_min"] = (time.monotonic() - t0) / 60
    return {"surface": surface, "per_pattern": per_pattern, "grammar_pairs": grammar, "reason_first": first_reason,
            "hidden": params.model.tiny.hidden_size, "learning_rate": params.sft.learning_rate, "steps": steps,
            "layers": layers, "seed": seed,
            "train_items": train_items,
            "synthetic": synthetic, "transfer": {k: v["pooled"] for k, v in transfer["folders"].items()},
            "transfer_patterns": {k: v["patterns"] for k, v in transfer["folders"].items()},
            "minutes": {k: round(v, 2) for k, v in times.items()}}


def line(r: dict[str, Any]) -> str:
    def f(s: dict[str, Any]) -> str:
        lo, hi = s["f1_interval"]
        return f"F1 {s['f1']:.3f} [{lo:.2f}, {hi:.2f}] acc {s['accuracy']:.3f} (all-yes {s['always_yes_f1']:.2f})"
    head = "reason-first " if r.get("reason_first") else ""
    parts = [f"{head}{r['surface']} per_pattern {r['per_pattern']:>4} grammar {r.get('grammar_pairs', 0):>5} "
             f"steps {r['steps']:>5} layers {r['layers']} hidden {r.get('hidden', 256)} lr {r.get('learning_rate')} "
             f"seed {r['seed']} ({r['train_items']} train items)", f"synthetic {f(r['synthetic'])}"]
    pats = r["synthetic"].get("patterns", {})
    for name, rows in (("grammar", [c for k, c in pats.items() if k == "grammar"]),
                       ("templates", [c for k, c in pats.items() if k != "grammar"])):
        if rows:
            parts.append(f"{name} acc {sum(c['right'] for c in rows) / sum(c['n'] for c in rows):.3f}")
    parts += [f"{Path(k).name} {f(v)}" for k, v in r["transfer"].items()]
    parts.append(" ".join(f"{k} {v}" for k, v in r["minutes"].items()))
    return " | ".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-pattern", type=int, nargs="+", default=[40])
    ap.add_argument("--steps", type=int, nargs="+", default=[1200])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, help="model.tiny.hidden_size (intermediate size 3x); default: params.yaml")
    ap.add_argument("--lr", type=float, help="sft.learning_rate; default: params.yaml")
    ap.add_argument("--surface", nargs="+", default=["narrow"], choices=["narrow", "wide"],
                    help="prepare.race.surface of the generated items")
    ap.add_argument("--grammar-pairs", type=int, nargs="+", default=[0],
                    help="prepare.race.grammar_pairs: pairs of grammar nests per language")
    ap.add_argument("--reason-first", action="store_true",
                    help="train completions that give the reason first and the verdict last")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1234])
    ap.add_argument("--params", type=Path, default=Path("params.yaml"))
    ap.add_argument("--folders", type=Path, nargs="+", default=[ROOT / "race_transfer"])
    ap.add_argument("--out", type=Path, default=Path("experiments/race_scale"))
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    results = []
    for seed in a.seeds:
        for surface in a.surface:
            for per_pattern in a.per_pattern:
                for grammar in a.grammar_pairs:
                    for steps in a.steps:
                        tag = ("" if surface == "narrow" else f"{surface}-") + (f"g{grammar}-" if grammar else "") \
                            + ("rf-" if a.reason_first else "") + (f"h{a.hidden}-" if a.hidden else "") \
                            + (f"lr{a.lr:g}-" if a.lr else "")
                        out = a.out / f"{tag}pp{per_pattern}-st{steps}-l{a.layers}-s{seed}"
                        r = run_one(a.params, out, per_pattern, steps, a.layers, seed, surface, a.folders, grammar,
                                    a.reason_first, a.hidden, a.lr)
                        (out / "result.json").write_text(json.dumps(r, indent=1) + "\n")
                        print(line(r), flush=True)
                        results.append(r)
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
