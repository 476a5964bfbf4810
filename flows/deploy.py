"""Create or update hpcrl's deployments, as ``prefect.yaml`` at the project root declares them (``train-dgemm`` and
``train-hargo`` on work pool ``gpu``, ``evaluate-dgemm/evaluate`` on ``cpu``), on the Prefect server at
``PREFECT_API_URL``; each work pool is created as a process pool when missing. The code is this checkout (local
source: the worker runs the flow with the repository root as working directory), so a deployment run does what
``make run`` does.

Why not ``prefect deploy --all`` (which reads the same file and works once the pools exist): it asks questions, or
refuses, when something is missing; this module runs unattended, checks PREFECT_API_URL first and is called by
``make serve`` and by the tests with their own server. ``--pool`` puts every deployment it makes on one pool instead.

Run: ``PREFECT_API_URL=http://127.0.0.1:4200/api python -m flows.deploy [--pipeline evaluate] [--pool cpu]``; then
``prefect deployment run 'train-dgemm/train-dgemm'`` (or ``'train-hargo/train-hargo'``).
Test: ``pytest tests/flows/test_serve_units.py`` and ``pytest -m integration tests/flows/test_deployment.py``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import yaml
from prefect import Flow, flow
from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import WorkPoolCreate
from prefect.exceptions import ObjectNotFound
from prefect.settings import get_current_settings
from prefect.workers.process import ProcessWorker

from hpcrl_core.errors import ConfigError
from hpcrl_core.runtime_env import ROOT

PREFECT_YAML = ROOT / "prefect.yaml"
DEPLOYMENT = "train-dgemm"


@dataclass(frozen=True)
class Pipeline:
    """One deployment of ``prefect.yaml``: its flow's entrypoint, work pool, description and run environment."""

    entrypoint: str
    pool: str
    description: str = ""
    env: dict[str, str] = field(default_factory=dict)


def load_pipelines(path: Path = PREFECT_YAML) -> dict[str, Pipeline]:
    """The deployments of ``path`` by name.

    Raises:
        ConfigError: the file is missing, or a deployment lacks a name, an entrypoint ``file.py:function`` or a
            work pool name.
    """
    try:
        doc: Any = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read the deployments ({exc})") from exc
    pipelines: dict[str, Pipeline] = {}
    for i, d in enumerate((doc or {}).get("deployments") or []):
        where = f"{path.name}: deployments[{i}]"
        pool = (d.get("work_pool") or {}) if isinstance(d, dict) else {}
        if not isinstance(d, dict) or not d.get("name") or ":" not in str(d.get("entrypoint", "")) \
                or not pool.get("name"):
            raise ConfigError(f"{where}: needs name, entrypoint (path.py:function) and work_pool.name; got {d!r}")
        env = (pool.get("job_variables") or {}).get("env") or {}
        pipelines[str(d["name"])] = Pipeline(str(d["entrypoint"]), str(pool["name"]),
                                             " ".join(str(d.get("description", "")).split()),
                                             {str(k): str(v) for k, v in env.items()})
    if not pipelines:
        raise ConfigError(f"{path}: declares no deployments")
    return pipelines


PIPELINES = load_pipelines()
POOLS = tuple(sorted({p.pool for p in PIPELINES.values()}))
ENTRYPOINT = PIPELINES[DEPLOYMENT].entrypoint


def api_url() -> str:
    """The configured API URL; refuses the ephemeral server, which dies with this process."""
    url = get_current_settings().api.url
    if not url:
        raise ConfigError("PREFECT_API_URL is not set: a deployment needs a running Prefect server",
                          ["PREFECT_API_URL: received nothing; allowed: http://127.0.0.1:<port>/api "
                           "(start one with `make serve`, then export the URL it prints)"])
    return url


def ensure_pool(pool: str) -> bool:
    """Create the process work pool ``pool`` unless it exists; True when it was created."""
    with get_client(sync_client=True) as client:
        try:
            client.read_work_pool(pool)
            return False
        except ObjectNotFound:
            template = ProcessWorker.get_default_base_job_template()
            client.create_work_pool(WorkPoolCreate(name=pool, type="process", base_job_template=template))
            return True


def deploy(pool: str | None = None, name: str | None = None, source: Path = ROOT,
           pipeline_name: str = DEPLOYMENT) -> UUID:
    """Create or update deployment ``<flow>/<name>`` (default name: ``pipeline_name``) running ``source``'s flow on
    ``pool`` (default: the pipeline's pool in prefect.yaml); returns its id.

    Raises:
        ConfigError: no PREFECT_API_URL, or ``pipeline_name`` is not a deployment of prefect.yaml.
    """
    api_url()
    if pipeline_name not in PIPELINES:
        raise ConfigError(f"deploy: unknown pipeline {pipeline_name!r}; allowed: {', '.join(PIPELINES)}")
    pipeline = PIPELINES[pipeline_name]
    pool = pool or pipeline.pool
    ensure_pool(pool)
    flow_ = flow.from_source(source=str(source), entrypoint=pipeline.entrypoint)
    assert isinstance(flow_, Flow)  # from_source and deploy return plain values when called from sync code
    deployment_id = flow_.deploy(name=name or pipeline_name, work_pool_name=pool, print_next_steps=False,
                                 ignore_warnings=True, description=pipeline.description,
                                 job_variables={"env": pipeline.env} if pipeline.env else None)
    assert isinstance(deployment_id, UUID)
    return deployment_id


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pool", default=None, help="one process work pool for every deployment made (default: each "
                    "one's pool in prefect.yaml; created if missing)")
    ap.add_argument("--name", default=None, help="deployment name of the one pipeline given (default: its name)")
    ap.add_argument("--pipeline", choices=list(PIPELINES), default=None, help="only this pipeline (default: all)")
    a = ap.parse_args(argv)
    for pipeline_name in [a.pipeline] if a.pipeline else list(PIPELINES):
        name = a.name if a.pipeline and a.name else pipeline_name
        pool = a.pool or PIPELINES[pipeline_name].pool
        deployment_id = deploy(pool, name, pipeline_name=pipeline_name)
        print(f"deployment {name} ({PIPELINES[pipeline_name].entrypoint}, id {deployment_id}) on pool {pool} at "
              f"{api_url()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
