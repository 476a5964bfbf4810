"""The HARGO start point under overrides: train an SFT policy with ``sft_hargo`` params (plus the overrides given)
on a prepared data folder, score it on the held-out items with the start point's report, and append one JSON line
of figures to ``experiments/start_point/results.jsonl``.

Run: ``.venv/bin/python benchmarks/experiments_start_point.py NAME [--data data] [--set JSON]``, e.g.
``--set '{"sft_hargo": {"repeats": {"mlperf": 4, "plp": 4}, "max_steps": 3000}}'`` (the JSON is merged into
params.yaml's sections, one level deep). Prints the bars line and the JSON line. Each NAME trains into
``experiments/start_point/NAME`` (an interrupted run resumes there).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from hpcrl_core.config import parse_params
from hpcrl_core.evaluation.hargo import evaluate_model, load_items
from hpcrl_core.evaluation.start_point import bars_line, start_point_report
from hpcrl_core.training.sft import run_sft
from hpcrl_core.training.start_point import start_point_params

OUT = Path("experiments/start_point")


def merged(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``base`` with each section of ``overrides`` merged into it (keys of a section replace, others stay)."""
    out = dict(base)
    for section, values in overrides.items():
        out[section] = {**(out.get(section) or {}), **values} if isinstance(values, dict) else values
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name")
    ap.add_argument("--data", default="data")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--set", default="{}", help="JSON overrides by section")
    a = ap.parse_args(argv)
    overrides = json.loads(a.set)
    params = parse_params(merged(yaml.safe_load(Path(a.params).read_text()) or {}, overrides))
    t0 = time.monotonic()
    result = run_sft(start_point_params(params), Path(a.data), OUT / a.name, report_to=[])
    t1 = time.monotonic()
    notes: dict[str, str] = {}
    rows = evaluate_model(Path(result["final_dir"]), load_items(Path(a.data), params, notes), params)
    report = start_point_report(rows)
    line = {"name": a.name, "set": overrides, "train_s": round(t1 - t0), "eval_s": round(time.monotonic() - t1),
            "train_loss": result["train_loss"], "eval_loss": result["eval_loss"], "n": report["n"],
            **{k: report[k] for k in ("race_f1", "mlperf_em", "mlperf_avg_score", "plp_similarity",
                                      "degenerate_share", "mlperf_length_mean")}, "meets_all": report["meets_all"]}
    OUT.mkdir(parents=True, exist_ok=True)
    with (OUT / "results.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
    print(bars_line(report))
    print(json.dumps(line))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
