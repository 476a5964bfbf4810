"""Tests of the `hpcrl` command line (run in-process through ``main``). Run: pytest tests/test_cli.py"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from hpcrl_core.bench.reference import NumpyMeasure
from hpcrl_core.cli import main
from hpcrl_core.config import Settings
from tests.bench.test_adversarial import GOOD
from tests.conftest import FAST_BENCH

REQUIRED = {"status", "reward", "gflops", "cv", "techniques", "isolation", "compile_s", "run_s", "detail"}


@pytest.fixture()
def project(tmp_path: Path, bench_dirs: Settings, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPCRL_CACHE_DIR", str(bench_dirs.cache_dir))
    monkeypatch.setenv("HPCRL_SCRATCH_DIR", str(bench_dirs.scratch_dir))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"bench": FAST_BENCH}))
    return tmp_path


def test_help_on_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["bench", "--help"], ["config", "--help"], ["config", "check", "--help"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 0
        assert "usage: hpcrl" in capsys.readouterr().out


@pytest.mark.integration
def test_bench_files_json(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = project / "good.c", project / "bad.md"
    good.write_text(GOOD)
    bad.write_text("Here you go:\n```c\n#include <stdio.h>\n" + GOOD + "\n```\n")
    code = main(["bench", str(good), str(bad), "--json", "--params", str(project / "params.yaml"), "--no-cache"])
    assert code == 1  # one kernel failed
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert len(rows) == 2 and all(set(r) >= REQUIRED for r in rows)
    assert rows[0]["status"] == "ok" and rows[0]["reward"] > 0 and rows[0]["gflops"] > 0
    assert rows[1]["status"] == "format_violation" and rows[1]["reward"] == -100 and "stdio.h" in rows[1]["detail"]


@pytest.mark.integration
def test_bench_table_shows_every_fresh_run(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "params.yaml").write_text(yaml.safe_dump(
        {"bench": {**FAST_BENCH, "timing": {**FAST_BENCH["timing"], "fresh_runs": 2}}}))
    good = project / "good.c"
    good.write_text(GOOD)
    assert main(["bench", str(good), "--params", str(project / "params.yaml"), "--no-cache"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "fresh runs:" in x)
    runs = [float(g) for g in line.split("fresh runs:")[1].split("GFLOPS")[0].split(",")]
    assert len(runs) == 2 and all(g > 0 for g in runs)
    assert main(["bench", str(good), "--json", "--params", str(project / "params.yaml"), "--no-cache"]) == 0
    row = next(json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{"))
    assert len(row["gflops_runs"]) == 2 and row["gflops"] in row["gflops_runs"]


@pytest.mark.integration
def test_bench_says_when_a_kernel_took_the_figure_of_its_machine_code(
        project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCRL_CACHE_DIR", str(tmp_path / "own-cache"))  # no figure from another test
    first, second = project / "first.c", project / "second.c"
    first.write_text(GOOD)
    second.write_text("#include <stddef.h>\n" + GOOD)  # an include that compiles to nothing
    assert main(["bench", str(first), str(second), "--json", "--params", str(project / "params.yaml")]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    # both are built at once on two slots: whichever claims the object first is timed, the other takes its figure
    timed, took = sorted(rows, key=lambda r: r["same_object"] is not None)
    assert timed["same_object"] is None and took["same_object"] and took["cached"]
    assert took["gflops"] == timed["gflops"]
    (project / "third.c").write_text("#include <string.h>\n" + GOOD)
    assert main(["bench", str(project / "third.c"), "--params", str(project / "params.yaml")]) == 0
    assert "same machine code as a kernel timed before" in capsys.readouterr().out


@pytest.mark.integration
def test_bench_reference_table(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = project / "reports" / "node_reference.json"
    assert main(["bench", "--reference", "--params", str(project / "params.yaml"), "--report", str(report)]) == 0
    out = capsys.readouterr().out
    for needle in ("naive kernel", "packed kernel", "numpy (OpenBLAS)", "peak (estimate)", "%peak"):
        assert needle in out
    data = json.loads(report.read_text())
    assert data["n"] == 64 and data["naive_gflops"] > 0 and data["numpy_gflops"] > 0
    assert data["best_kernel_gflops"] > data["naive_gflops"]


@pytest.mark.integration
def test_bench_reference_is_the_best_of_fresh_runs_as_rewards_take_it(
        project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "params.yaml").write_text(yaml.safe_dump(
        {"bench": {**FAST_BENCH, "timing": {**FAST_BENCH["timing"], "fresh_runs": 3}}}))
    figures = iter([25.6, 43.0, 41.0])  # the first run in a slow phase of the host
    monkeypatch.setattr("hpcrl_core.bench.reference.measure_numpy",
                        lambda n, cores, **kw: NumpyMeasure(next(figures), 0.01, 5, {"blas": "fake"}))
    report = project / "node_reference.json"
    assert main(["bench", "--reference", "--params", str(project / "params.yaml"), "--report", str(report)]) == 0
    assert json.loads(report.read_text())["numpy_gflops"] == 43.0
    assert "best of 3 runs" in capsys.readouterr().err


def test_bench_errors(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--params", str(project / "params.yaml")]) == 2
    assert main(["bench", "--ladder", "--report", "x.json"]) == 2
    assert main(["bench", str(project / "nope.c"), "--params", str(project / "params.yaml")]) == 1
    assert "no such kernel file" in capsys.readouterr().err
