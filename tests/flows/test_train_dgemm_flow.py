"""The train-dgemm pipeline flow on a real Prefect engine (test harness) against a real git + DVC repository in
tmp_path with tiny stages: DVC's skip-if-unchanged shows through, a failing stage stops the pipeline with its output
tail, the register subflow is called (substituted here) and the summary reads whatever reports exist.

Run: pytest tests/flows/test_train_dgemm_flow.py
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import yaml

# Prefect's parameter model warns that the flow's `register` parameter shadows pydantic's ABC `register`: harmless.
pytestmark = pytest.mark.filterwarnings(r"ignore:Field name \"register\":UserWarning")

STEP = '''\
import sys
from pathlib import Path

import yaml

name = sys.argv[1]
params = yaml.safe_load(Path("params.yaml").read_text())
if name == "first":
    print("first: writing", params["first"]["value"])
    Path("first.txt").write_text(str(params["first"]["value"]))
elif name == "second":
    Path("second.txt").write_text(str(int(Path("first.txt").read_text()) * params["second"]["factor"]))
else:
    with open("attempts.log", "a") as f:
        f.write("attempt\\n")
    for i in range(60):
        print(f"noise {i}")
    print("boom-marker: the stage failed on purpose")
    sys.exit(3)
'''


def make_dvc_repo(root: Path) -> Path:
    """A git + DVC repository with stages first -> second (params first.value, second.factor) and broken."""
    root.mkdir(parents=True)
    (root / "step.py").write_text(STEP)
    (root / "params.yaml").write_text(yaml.safe_dump({"first": {"value": 3}, "second": {"factor": 2}}))
    py = f'"{sys.executable}" step.py'
    stages = {
        "first": {"cmd": f"{py} first", "deps": ["step.py"], "params": ["first.value"], "outs": ["first.txt"]},
        "second": {"cmd": f"{py} second", "deps": ["step.py", "first.txt"], "params": ["second.factor"],
                   "outs": ["second.txt"]},
        "broken": {"cmd": f"{py} broken", "deps": ["step.py"]},
    }
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}, sort_keys=False))
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=root, check=True)
    return root


def set_param(root: Path, section: str, key: str, value: int) -> None:
    params = yaml.safe_load((root / "params.yaml").read_text())
    params[section][key] = value
    (root / "params.yaml").write_text(yaml.safe_dump(params))


def statuses(summary: dict[str, Any]) -> dict[str, str]:
    return {s["dvc_stage"]: s["status"] for s in summary["dvc_stages"]}


@pytest.fixture
def fake_register(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, str]]:
    """Replace flows.register (another issue's flow) by a subflow that records its arguments."""
    from prefect import flow

    calls: list[dict[str, str]] = []

    @flow(name="register")
    def register(model_dir: str, report: str, data_dir: str, params_path: str) -> dict:
        calls.append({"model_dir": model_dir, "report": report, "data_dir": data_dir, "params_path": params_path})
        return {"name": "hpcrl-dgemm", "version": "7", "aliases": ["challenger"], "promoted": False,
                "champion_version": "5"}

    module = types.ModuleType("flows.register")
    module.register = register  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "flows.register", module)
    return calls


def test_pipeline_runs_skips_reruns_and_stops_at_a_failing_stage(tmp_path: Path, fake_register: list[dict[str, str]],
                                                                  prefect_server: None) -> None:
    from flows.train_dgemm import format_summary, train_dgemm
    from hpcrl_core.dvc_repro import DvcStageError
    from hpcrl_core.errors import ConfigError

    repo = make_dvc_repo(tmp_path / "repo")
    stages = ("first", "second")
    with pytest.raises(ConfigError, match=r"received 'rl_dgemm'; allowed: first, second, broken"):
        train_dgemm(("first", "rl_dgemm"), True, str(repo))  # checked before anything runs
    assert not (repo / "first.txt").exists()
    first = train_dgemm(stages, True, str(repo))
    again = train_dgemm(stages, False, str(repo))
    set_param(repo, "first", "value", 5)  # first changes, and so does second's input
    changed = train_dgemm(stages, False, str(repo))
    set_param(repo, "second", "factor", 10)  # only second depends on it
    second_only = train_dgemm(stages, False, str(repo))
    set_param(repo, "second", "factor", 100)
    with pytest.raises(DvcStageError) as failure:
        train_dgemm(("first", "broken", "second"), True, str(repo))
    assert statuses(first) == {"first": "ran", "second": "ran"}
    assert statuses(again) == {"first": "skipped", "second": "skipped"}
    assert statuses(changed) == {"first": "ran", "second": "ran"}
    assert statuses(second_only) == {"first": "skipped", "second": "ran"}
    assert all(s["seconds"] > 0 for s in first["dvc_stages"])
    assert (repo / "second.txt").read_text() == "50"  # not 500: second did not run after the failure
    err = failure.value
    assert err.dvc_stage == "broken" and err.returncode != 0
    assert "boom-marker: the stage failed on purpose" in str(err) and "noise 59" in str(err)
    assert "noise 0\n" not in str(err)  # a tail, not the whole output
    assert (repo / "attempts.log").read_text().count("attempt") == 1  # a deterministic failure is not retried
    assert len(fake_register) == 1 and fake_register[0]["model_dir"] == str(repo / "checkpoints/rl_dgemm/final")
    assert fake_register[0]["params_path"] == str(repo / "params.yaml")  # the policy of the repository it ran
    assert first["register"]["version"] == "7" and again["register"] is None
    table = format_summary(first)
    assert "version 7" in table and "challenger" in table and "reports/eval_dgemm.json: missing" in table


def test_summary_reads_reports_and_says_what_is_missing(tmp_path: Path) -> None:
    from flows.train_dgemm import format_summary, read_reports

    (tmp_path / "reports").mkdir()
    sft = {"dgemm": {"verified_rate": 0.25, "gflops_median": 3.5, "gflops_max": 9.0}, "race": {"f1": 0.5},
           "meta": {"model_dir": "x"}}
    (tmp_path / "reports" / "sft.json").write_text(json.dumps(sft))
    reports = read_reports(tmp_path)
    assert reports["sft"]["report"] == sft and not reports["rl"]["found"]
    summary = {"repo_root": str(tmp_path), "dvc_stages": [], "register": None, "reports": reports}
    text = format_summary(summary)
    assert "reports/eval_dgemm.json: missing" in text
    assert "race F1" in text and "0.500" in text and "9.0" in text  # SFT's best from sft.json without the comparison
    rl = {"sft": {"verified_rate": 0.3, "gflops_median": 4.0, "gflops_best": 5.0},
          "rl": {"verified_rate": 0.6, "gflops_median": 8.0, "gflops_best": 20.0, "winrate_vs_sft": 0.7,
                 "oracle_ratio": 0.74, "headroom_closed": 0.51, "distinct_kernels": 17}}
    (tmp_path / "reports" / "eval_dgemm.json").write_text(json.dumps(rl))
    lines = format_summary({**summary, "reports": read_reports(tmp_path)}).splitlines()
    row = {ln.split()[0] + " " + ln.split()[1]: ln.split()[2:] for ln in lines if ln.startswith("  ") and
           len(ln.split()) >= 4}
    # SFT comes from the comparison's own sft block (same problems, same samples), by fixed keys
    assert row["verified rate"] == ["0.300", "0.600"] and row["best GFLOPS"] == ["5.000", "20.0"]
    assert row["WinRate vs"] == ["SFT", "-", "0.700"]
    by_label = {ln[2:22].strip(): ln[22:].split() for ln in lines if ln.startswith("  ")}
    assert by_label["oracle ratio"] == ["-", "0.740"] and by_label["oracle ratio (rich)"] == ["-", "-"]
    assert by_label["headroom closed"] == ["-", "0.510"] and by_label["distinct kernels"] == ["-", "17"]
    assert any("oracle: none in this report" in ln for ln in lines)
    assert len(lines) < 29  # a short table (15 headline rows, 4 task rows), not every key of both reports
    (tmp_path / "reports" / "eval_dgemm.json").write_text("{not json")
    assert "unreadable" in format_summary({**summary, "reports": read_reports(tmp_path)})


def test_lock_contention_is_a_retryable_stage_error(tmp_path: Path) -> None:
    import zc.lockfile
    from prefect.states import Failed

    from hpcrl_core.dvc_repro import DvcStageError, DvcStageLockedError, run_dvc_stage
    from tasks import pipeline

    repo = make_dvc_repo(tmp_path / "repo")
    (repo / ".dvc" / "tmp").mkdir(exist_ok=True)
    lock = zc.lockfile.LockFile(str(repo / ".dvc" / "tmp" / "lock"))  # what a concurrent `dvc repro` holds
    try:
        with pytest.raises(DvcStageLockedError) as locked:
            run_dvc_stage("first", repo, on_line=lambda line: None)
    finally:
        lock.close()
    assert not (repo / "first.txt").exists()
    copy = pickle.loads(pickle.dumps(locked.value))
    assert isinstance(copy, DvcStageLockedError) and str(copy) == str(locked.value)
    retry = pipeline.run_dvc_stage.retry_condition_fn
    assert retry is not None and retry(None, None, Failed(data=locked.value))
    assert not retry(None, None, Failed(data=DvcStageError("broken", 3, 1.0, ["boom"], repo)))
    assert run_dvc_stage("first", repo, on_line=lambda line: None).status == "ran"  # lock gone: runs


def test_a_matrix_target_takes_the_status_of_its_members() -> None:
    from hpcrl_core.dvc_repro import target_status

    assert target_status("offline", ["offline@dpo-1"], ["prepare", "offline@kto-1"]) == "ran"
    assert target_status("offline", [], ["offline@dpo-1", "offline@kto-1"]) == "skipped"
    assert target_status("prepare", ["prepare"], []) == "ran"
    assert target_status("rl", ["rl_hargo@grpo-1"], ["rl_dgemm"]) == "unknown"  # a prefix of another name is not it
