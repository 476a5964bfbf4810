"""Flow names in one style, Prefect's own (the function name with ``-`` for ``_``): a stage's flow is named after
its DVC stage (``rl-dgemm`` runs ``rl_dgemm``), and the pipeline stays ``train-dgemm``, the name in the deployment
users run (``prefect deployment run 'train-dgemm/train-dgemm'``).

Run: pytest tests/flows/test_names.py
"""

from __future__ import annotations

import importlib
import shlex
from pathlib import Path

import pytest
import yaml
from prefect import Flow

ROOT = Path(__file__).resolve().parents[2]


def _flows() -> dict[str, Flow]:  # type: ignore[type-arg]
    found = {}
    for path in sorted((ROOT / "flows").glob("*.py")):
        module = importlib.import_module(f"flows.{path.stem}")
        found |= {f"flows.{path.stem}": obj for obj in vars(module).values()
                  if isinstance(obj, Flow) and obj.fn.__module__ == module.__name__}
    return found


FLOWS = _flows()


@pytest.mark.parametrize("module", sorted(FLOWS))
def test_a_flow_is_named_like_its_function(module: str) -> None:
    fn = FLOWS[module].fn.__name__
    assert FLOWS[module].name == fn.replace("_", "-"), f"{module}: flow {fn} is named {FLOWS[module].name!r}"


def test_a_stage_flow_is_named_after_its_dvc_stage() -> None:
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    checked = 0
    for dvc_stage, spec in stages.items():
        words = shlex.split(spec["cmd"])
        if "-m" in words and (module := words[words.index("-m") + 1]).startswith("flows."):
            assert FLOWS[module].name == dvc_stage.replace("_", "-"), f"{module} runs stage {dvc_stage}"
            checked += 1
    # prepare, sft, rl_dgemm, evaluate_dgemm, sft_hargo, hpcgpt, rl_hargo and offline (matrices), preferences,
    # evaluate_hargo
    assert checked == 10


def test_the_deployment_users_run_keeps_its_name() -> None:
    from flows import deploy

    path, function = deploy.ENTRYPOINT.split(":")
    flow = getattr(importlib.import_module(path.removesuffix(".py").replace("/", ".")), function)
    assert f"{flow.name}/{deploy.DEPLOYMENT}" == "train-dgemm/train-dgemm"
