"""Race-detection transfer: a saved policy's race F1 on folders of programs it was never trained on.

The default folder is ``benchmarks/race_transfer`` (programs written for this project in the style of real
micro-benchmark suites and kept out of every training source); pass a DataRaceBench checkout (or any folder laid
out like it) to check the policy on the real suite. Prints one line per folder and language with precision, recall,
F1 and its 95% bootstrap interval, accuracy and the F1 of answering "yes" to everything, the per-pattern counts with
``--patterns``, and the run's time and peak memory; ``--json`` keeps the whole report (every answer included).

Run: ``.venv/bin/python benchmarks/race_transfer.py --model checkpoints/sft/final [FOLDER ...] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hpcrl_core.evaluation.race_programs import evaluate_race_programs, summary_lines

DEFAULT = Path(__file__).resolve().parent / "race_transfer"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="*", type=Path, default=[DEFAULT], help="folders of labelled programs")
    ap.add_argument("--model", type=Path, default=Path("checkpoints/sft/final"), help="a saved policy folder")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--patterns", action="store_true", help="also print right answers per pattern name")
    ap.add_argument("--json", type=Path, help="write the whole report here")
    a = ap.parse_args(argv)
    report = evaluate_race_programs(a.model, a.folders, max_new_tokens=a.max_new_tokens, batch_size=a.batch_size,
                                    seed=a.seed)
    print("\n".join(summary_lines(report)))
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
