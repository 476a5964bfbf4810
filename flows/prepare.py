"""The ``prepare`` stage: build DGEMM problems and corpus, race, MLPerf and PLP data; clean, split, card, write
``data/``; log counts and cards to MLflow.

Run: ``python -m flows.prepare [--params params.yaml] [--out data]`` (what ``dvc repro prepare`` runs).
Test: ``pytest tests/flows/test_prepare_flow.py``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from prefect import flow

from flows.stage import flow_run_tags
from hpcrl_core import tracking
from hpcrl_core.config import Settings, load_params
from hpcrl_core.data.prepare import check_families
from tasks.prepare import prepare_dgemm, prepare_qa, prepare_race, write_outputs


@flow(name="prepare", log_prints=True)
def prepare(params_path: str = "params.yaml", out_dir: str = "data") -> dict:
    """Prepare every family's data; returns the summary written to ``data/summary.json``."""
    t0 = time.monotonic()
    params = load_params(params_path)
    p = params.prepare
    # families run one after another: each uses every core (benchmark slots, ThreadSanitizer jobs)
    outputs = [prepare_dgemm(p, params.bench, Settings()), prepare_race("c", p), prepare_race("fortran", p),
               prepare_qa("mlperf", p), prepare_qa("plp", p)]
    check_families(outputs)
    summary = write_outputs(outputs, Path(out_dir))
    summary["seconds"] = round(time.monotonic() - t0, 1)
    tags = flow_run_tags()
    with tracking.dvc_stage_run("prepare", params={"prepare": p.model_dump()}, tags=tags):
        for family, counts in summary["families"].items():
            tracking.log_metrics({f"{family}.{k}": v for k, v in counts.items()})
        tracking.log_metrics({"prepare_seconds": summary["seconds"]})
        for o in outputs:
            tracking.log_dict(o.card, f"cards/{o.family}.json")
    print(f"prepare: wrote {out_dir}/ in {summary['seconds']} s: " +
          ", ".join(f"{f} {c['train']}+{c['eval']}" for f, c in summary["families"].items()))
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--out", default="data")
    a = ap.parse_args(argv)
    prepare(a.params, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
