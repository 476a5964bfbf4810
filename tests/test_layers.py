"""Imports point down only: flows -> tasks -> hpcrl_core; bench knows nothing of RL, rewards nothing of MLflow or
Prefect, config nothing of data.

Run: pytest tests/test_layers.py
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)  # ``from hpcrl_core import data``
    return names


def _py_files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", _py_files("hpcrl_core"), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_never_imports_orchestration(path: Path) -> None:
    bad = _imports(path) & {"prefect", "tasks", "flows"}
    assert not bad, f"{path} imports {bad}: hpcrl_core must stay plain Python"


@pytest.mark.parametrize("path", _py_files("hpcrl_core/bench"), ids=lambda p: str(p.relative_to(ROOT)))
def test_bench_knows_nothing_of_rl(path: Path) -> None:
    bad = {m for m in _imports(path) if m.startswith(("hpcrl_core.rewards", "hpcrl_core.algorithms",
                                                      "hpcrl_core.training", "torch", "trl", "mlflow"))}
    assert not bad, f"{path} imports {bad}"


@pytest.mark.parametrize("path", _py_files("tasks"), ids=lambda p: str(p.relative_to(ROOT)))
def test_tasks_never_import_flows(path: Path) -> None:
    assert "flows" not in _imports(path), f"{path} imports flows: tasks sit below flows"


@pytest.mark.parametrize("path", _py_files("hpcrl_core/rewards"), ids=lambda p: str(p.relative_to(ROOT)))
def test_rewards_know_nothing_of_tracking_or_orchestration(path: Path) -> None:
    bad = _imports(path) & {"mlflow", "prefect"}
    assert not bad, f"{path} imports {bad}: rewards are plain functions; runs are logged by flows and tracking.py"


@pytest.mark.parametrize("path", _py_files("hpcrl_core/config"), ids=lambda p: str(p.relative_to(ROOT)))
def test_config_never_imports_data(path: Path) -> None:
    bad = {m for m in _imports(path) if m == "hpcrl_core.data" or m.startswith("hpcrl_core.data.")}
    assert not bad, f"{path} imports {bad}: the params schema must load without the data code"


def test_layer_scan_detects_an_upward_import(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text("from prefect import flow\nimport tasks.bench\n\ndef lazy():\n    from hpcrl_core import data\n")
    assert {"prefect", "tasks", "hpcrl_core.data"} <= _imports(f)


def test_no_init_in_mlflow_folder() -> None:
    assert not (ROOT / "mlflow" / "__init__.py").exists(), "mlflow/__init__.py would shadow the mlflow package"


def test_dvc_stages_name_existing_deps_and_known_params() -> None:
    import yaml

    from hpcrl_core.config import Params

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    params = Params().model_dump()
    produced = {next(iter(o)) if isinstance(o, dict) else o for s in stages.values() for o in s.get("outs", [])}
    for name, stage in stages.items():
        for dep in stage.get("deps", []):
            # made by a stage: an out itself, inside an out, or a folder holding outs (a matrix stage's runs)
            made = any(dep == out or dep.startswith(out.rstrip("/") + "/") or out.startswith(dep.rstrip("/") + "/")
                       for out in produced)
            assert (ROOT / dep).exists() or made, f"stage {name}: dependency {dep} is missing and no stage makes it"
        for key in stage.get("params", []):
            node = params
            for part in key.split("."):
                assert part in node, f"stage {name}: params key {key} is not in params.yaml's schema"
                node = node[part]
