"""The ``register`` flow: register the RL model in MLflow; make it champion only if it beats the champion.

The model folder becomes a new version of the registered model (``registry.model_name`` in params.yaml,
``hpcrl-dgemm``) with alias ``challenger``, its held-out metrics, data hash and git commit; alias ``champion`` moves
to it only if it beats the current champion on the held-out suite (``hpcrl_core.evaluation.promotion``, with the
metrics and slack of ``registry``). The ``train-dgemm`` pipeline runs it after its DVC stages; it is no DVC stage.

The data hash is ``hpcrl_core.provenance.data_hash``: sha256 over the sorted files of the policy's ``data_files``
(``<data>/dgemm/*.jsonl`` for hpcrl-dgemm, the task families' files for hpcrl-hargo; not DVC's hash from
``dvc.lock``). ``--policy registry_hargo`` registers the HARGO policy with its own rule (WinRate vs the SFT
start). Inputs are checked before anything is registered.

Run: ``python -m flows.register [--model checkpoints/rl_dgemm/final] [--report reports/eval_dgemm.json]
[--data data] [--name hpcrl-dgemm] [--params params.yaml]``.  Test: ``pytest tests/flows/test_register_flow.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from flows.stage import flow_run_tags
from hpcrl_core import provenance
from hpcrl_core.config import Params, RegistryParams, load_params
from hpcrl_core.errors import ConfigError
from hpcrl_core.evaluation.promotion import decide_promotion, report_metrics
from hpcrl_core.registry import CHALLENGER, CHAMPION
from tasks.register import find_version, get_alias, get_version, read_eval_report, register_model_version, set_alias

POLICIES = ("registry", "registry_hargo")


def policy_of(params: Params, section: str) -> RegistryParams:
    """The registry policy section ``section`` of ``params``.

    Raises:
        ConfigError: ``section`` is not one of ``POLICIES``.
    """
    if section not in POLICIES:
        raise ConfigError(f"register: policy section {section!r} is unknown; allowed: {', '.join(POLICIES)}")
    return params.registry if section == "registry" else params.registry_hargo


@flow(name="register")
def register(model_dir: str = "checkpoints/rl_dgemm/final", report: str = "reports/eval_dgemm.json",
             data_dir: str = "data", name: str | None = None, params_path: str = "params.yaml",
             section: str = "registry") -> dict[str, Any]:
    """Register ``model_dir`` with the metrics of ``report``; returns name, version, aliases, promoted and the
    champion's version. ``section`` is the policy (``registry``: hpcrl-dgemm; ``registry_hargo``: hpcrl-hargo);
    ``name`` defaults to its ``model_name``."""
    params = load_params(params_path)
    policy = policy_of(params, section)
    name = name or policy.model_name
    evaluation = read_eval_report(Path(report), policy)
    tags = provenance.model_tags(Path(model_dir), Path(data_dir), policy.data_files)
    log = get_run_logger()
    same = find_version(name, "model_hash", tags["model_hash"])
    if same is not None:  # a rerun of the pipeline with an unchanged model must not add a version
        log.info("register: %s is already %s v%d [%s]; nothing registered", model_dir, name, same.version,
                 ", ".join(same.aliases))
        champion = get_alias(name, CHAMPION)
        return {"name": name, "version": same.version, "aliases": list(same.aliases), "promoted": False,
                "champion_version": champion.version if champion else None, "already_registered": True}
    tags.update(flow_run_tags())
    new = register_model_version(Path(model_dir), report_metrics(evaluation), evaluation, name, tags)
    set_alias(name, CHALLENGER, new.version)
    champion = get_alias(name, CHAMPION)  # read just before the decision; racing registrations are not serialised
    decision = decide_promotion(new.metrics, champion.metrics if champion else None, policy)
    if decision.promote:
        set_alias(name, CHAMPION, new.version)
    final = get_version(name, new.version)
    log.info("register: %s v%d [%s]; %s; %s", name, final.version, ", ".join(final.aliases), decision.reason,
             "new champion" if decision.promote else f"champion stays v{champion.version if champion else '-'}")
    return {"name": name, "version": final.version, "aliases": list(final.aliases), "promoted": decision.promote,
            "champion_version": new.version if decision.promote or champion is None else champion.version,
            "already_registered": False}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="checkpoints/rl_dgemm/final", help="saved HF model or LoRA adapter folder")
    ap.add_argument("--report", default="reports/eval_dgemm.json", help="evaluation report with an 'rl' block")
    ap.add_argument("--data", default="data", help="prepared data folder; its dgemm/*.jsonl are hashed")
    ap.add_argument("--name", default=None, help="registered model name (default: registry.model_name of --params)")
    ap.add_argument("--params", default="params.yaml", help="params file whose registry section is the policy")
    ap.add_argument("--policy", default="registry", choices=POLICIES, help="the params section of the policy")
    a = ap.parse_args(argv)
    register(a.model, a.report, a.data, a.name, a.params, a.policy)
    return 0


if __name__ == "__main__":
    sys.exit(main())
