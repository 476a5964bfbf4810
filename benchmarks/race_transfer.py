"""Race-detection transfer: a saved policy's race F1 on folders of programs it was never trained on.

The default folder is ``benchmarks/race_transfer`` (programs written for this project in the style of real
micro-benchmark suites and kept out of every training source); pass a DataRaceBench checkout (or any folder laid
out like it) to check the policy on the real suite. Prints one line per folder and language with precision, recall,
F1 and its 95% bootstrap interval, accuracy and the F1 of answering "yes" to everything, the per-pattern counts with
``--patterns``, and the run's time and peak memory; ``--json`` keeps the whole report (every answer included).
Each line also gives how far the policy's verdict score separates racy from race-free programs (AUC, and the best
F1 any threshold on it reaches: ``hpcrl_core.evaluation.race_scores``); ``--synthetic DATA`` adds the same two
figures on the held-out synthetic items of a prepared data folder, for comparison.

Run: ``.venv/bin/python benchmarks/race_transfer.py --model checkpoints/sft/final [FOLDER ...] [--synthetic data]
[--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerBase

from hpcrl_core.data.schema import read_jsonl
from hpcrl_core.evaluation.race_programs import evaluate_race_programs, summary_lines
from hpcrl_core.evaluation.race_scores import separation, verdict_scores
from hpcrl_core.evaluation.runner import RACE_FAMILIES
from hpcrl_core.models.saved import load_saved_policy

DEFAULT = Path(__file__).resolve().parent / "race_transfer"


def synthetic_files(data: Path) -> list[Path]:
    """Each race family's held-out items under ``data``; exits naming the first that is missing."""
    paths = [data / family / "eval.jsonl" for family in RACE_FAMILIES]
    for path in paths:
        if not path.is_file():
            raise SystemExit(f"{path} is missing; pass the data folder the policy was prepared from")
    return paths


def synthetic_separation(model: Any, tokenizer: PreTrainedTokenizerBase, data: Path) -> dict[str, dict[str, float]]:
    """AUC and best-threshold F1 of the verdict score on each language's held-out synthetic items."""
    out = {}
    for family, path in zip(RACE_FAMILIES, synthetic_files(data), strict=True):
        records = list(read_jsonl(path))
        out[family] = separation(verdict_scores(model, tokenizer, [r.prompt for r in records]),
                                 [r.answer == "yes" for r in records])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="*", type=Path, default=[DEFAULT], help="folders of labelled programs")
    ap.add_argument("--model", type=Path, default=Path("checkpoints/sft/final"), help="a saved policy folder")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--patterns", action="store_true", help="also print right answers per pattern name")
    ap.add_argument("--synthetic", type=Path, help="a prepared data folder: also score its held-out race items")
    ap.add_argument("--json", type=Path, help="write the whole report here")
    a = ap.parse_args(argv)
    if a.synthetic:
        synthetic_files(a.synthetic)  # before the long evaluation, not after it
    policy = load_saved_policy(a.model)  # once, for the folders and the synthetic items
    report = evaluate_race_programs(a.model, a.folders, max_new_tokens=a.max_new_tokens, batch_size=a.batch_size,
                                    seed=a.seed, policy=policy)
    print("\n".join(summary_lines(report)))
    if a.synthetic:
        report["synthetic"] = synthetic_separation(*policy, a.synthetic)
        for family, s in report["synthetic"].items():
            print(f"held-out synthetic {family:<13} n {s['n']:>4}  AUC {s['auc']:.2f}  best-threshold F1 "
                  f"{s['best_threshold_f1']:.2f}  F1 at the model's boundary {s['f1_at_zero']:.2f}")
    if a.patterns:
        for root, part in report["folders"].items():
            print(f"\n{root}")
            for name, c in part["patterns"].items():
                print(f"  {name:<40} {c['right']}/{c['n']} right ({c['racy']} racy)")
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
