"""The prepare flow end to end on a real Prefect engine (test harness), small sizes, real engine and MLflow.

Run: pytest tests/flows/test_prepare_flow.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from hpcrl_core.config import Settings
from hpcrl_core.data.race.generator import PATTERNS
from hpcrl_core.data.schema import FAMILIES, read_jsonl
from tests.conftest import FAST_BENCH

pytestmark = pytest.mark.integration

SMALL = {
    "bench": FAST_BENCH,
    "prepare": {
        "seed": 7,
        "dgemm": {"train_problems": 40, "eval_problems": 8, "variants": 12, "bench_n": 64, "per_kernel": 2},
        "race": {"per_pattern": 2, "tsan": True, "eval_pairs": 0, "rl_pairs": 1},
        "mlperf": {"paraphrases": 1},
        "plp": {"paraphrases": 1},
    },
}


def test_prepare_flow_writes_every_family_and_logs_to_mlflow(tmp_path: Path, bench_dirs: Settings,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              prefect_server: None) -> None:
    import mlflow
    from flows.prepare import prepare

    monkeypatch.setenv("HPCRL_CACHE_DIR", str(bench_dirs.cache_dir))
    monkeypatch.setenv("HPCRL_SCRATCH_DIR", str(bench_dirs.scratch_dir))
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(SMALL))
    out = tmp_path / "data"
    summary = prepare(str(params), str(out))
    again, quiet = tmp_path / "again", tmp_path / "again.yaml"
    quiet.write_text(yaml.safe_dump({**SMALL, "prepare": {**SMALL["prepare"], "race": {**SMALL["prepare"]["race"],
                                                                                          "tsan": False}}}))
    prepare(str(quiet), str(again))  # warm result cache, TSan off (it only reports): the same data, byte for byte
    for name in ("dgemm/train.jsonl", "dgemm/eval.jsonl", "race_c/train.jsonl", "mlperf/eval.jsonl"):
        assert (out / name).read_bytes() == (again / name).read_bytes(), name
    assert set(summary["families"]) == set(FAMILIES)
    for family in FAMILIES:
        assert (out / family / "card.json").exists() and (out / family / "card.md").exists()
        train = list(read_jsonl(out / family / "train.jsonl"))
        assert train and all(r.family == family for r in train)
    problems = list(read_jsonl(out / "dgemm" / "problems_eval.jsonl"))
    assert len(problems) == 8 and all(r.completion == [] for r in problems)
    dgemm = json.loads((out / "dgemm" / "card.json").read_text())["extra"]
    assert dgemm["variants_requested"] == 12 and dgemm["corpus"]["total"] == 12
    card = json.loads((out / "race_c" / "card.json").read_text())
    assert "tsan" in card["extra"]
    verdicts = [json.loads(line) for line in (out / "race_c" / "tsan.jsonl").read_text().splitlines()]
    assert card["counts"]["rl"] == 2 * len(PATTERNS) and len(verdicts) == card["counts"]["total"]
    assert {v["tsan"] for v in verdicts} <= {"race", "no_race", "error"}
    runs = mlflow.search_runs(experiment_names=["hpcrl"], filter_string="tags.`hpcrl.stage` = 'prepare'")
    assert len(runs) == 2 and runs.iloc[0]["metrics.race_c.train"] > 0
