"""Create or update the ``train-dgemm`` and ``train-hargo`` deployments (flow and deployment of the same name) and
``evaluate-dgemm/evaluate`` (the evaluation of given checkpoints on the CPU agents, docs/agents.md) on a
local process work pool (``hpcrl-local``, created if missing) of the Prefect server at ``PREFECT_API_URL``. The code is
this checkout (local source: the worker runs the flow with the repository root as working directory), so a
deployment run does what ``make run`` does.

Python rather than prefect.yaml: ``prefect deploy`` asks questions when something is missing and reads
prefect.yaml from the working directory; this module runs unattended, checks PREFECT_API_URL first and is called
by ``make serve`` (``python -m flows.serve start``) and by the tests with their own server.

Run: ``PREFECT_API_URL=http://127.0.0.1:4200/api python -m flows.deploy [--pool hpcrl-local]``; then
``prefect deployment run 'train-dgemm/train-dgemm'`` (or ``'train-hargo/train-hargo'``).
Test: ``pytest -m integration tests/flows/test_deployment.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from uuid import UUID

from prefect import Flow, flow
from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import WorkPoolCreate
from prefect.exceptions import ObjectNotFound
from prefect.settings import get_current_settings
from prefect.workers.process import ProcessWorker

from hpcrl_core.errors import ConfigError
from hpcrl_core.runtime_env import ROOT

POOL = "hpcrl-local"
DEPLOYMENT = "train-dgemm"
ENTRYPOINT = "flows/train_dgemm.py:train_dgemm"
# every deployment: name -> (entrypoint, description, environment of its runs); `make serve` creates or updates
# them all
PIPELINES: dict[str, tuple[str, str, dict[str, str]]] = {
    DEPLOYMENT: (ENTRYPOINT, "prepare -> sft -> rl_dgemm -> evaluate_dgemm (dvc repro) -> register", {}),
    "train-hargo": ("flows/train_hargo.py:train_hargo",
                    "prepare -> sft_hargo -> rl_hargo (methods x seeds) -> preferences -> offline (methods x seeds) "
                    "-> evaluate_hargo (dvc repro) -> register", {}),
    # docs/agents.md: the held-out evaluation of the checkpoints given as parameters (sft_dir, rl_dir, report)
    "evaluate": ("flows/evaluate.py:evaluate_dgemm", "held-out DGEMM evaluation of given checkpoints, the kernels "
                 "timed by the CPU agents of this server (hpcrl agent)", {"HPCRL_BENCH_BACKEND": "agents"}),
}


def api_url() -> str:
    """The configured API URL; refuses the ephemeral server, which dies with this process."""
    url = get_current_settings().api.url
    if not url:
        raise ConfigError("PREFECT_API_URL is not set: a deployment needs a running Prefect server",
                          ["PREFECT_API_URL: received nothing; allowed: http://127.0.0.1:<port>/api "
                           "(start one with `make serve`, then export the URL it prints)"])
    return url


def ensure_pool(pool: str = POOL) -> bool:
    """Create the process work pool ``pool`` unless it exists; True when it was created."""
    with get_client(sync_client=True) as client:
        try:
            client.read_work_pool(pool)
            return False
        except ObjectNotFound:
            template = ProcessWorker.get_default_base_job_template()
            client.create_work_pool(WorkPoolCreate(name=pool, type="process", base_job_template=template))
            return True


def deploy(pool: str = POOL, name: str = DEPLOYMENT, source: Path = ROOT, pipeline_name: str = DEPLOYMENT) -> UUID:
    """Create or update deployment ``<pipeline_name>/<name>`` running ``source``'s flow on ``pool``; returns its id.

    Raises:
        ConfigError: no PREFECT_API_URL, or ``pipeline_name`` is not one of ``PIPELINES``.
    """
    api_url()
    if pipeline_name not in PIPELINES:
        raise ConfigError(f"deploy: unknown pipeline {pipeline_name!r}; allowed: {', '.join(PIPELINES)}")
    entrypoint, description, env = PIPELINES[pipeline_name]
    ensure_pool(pool)
    pipeline = flow.from_source(source=str(source), entrypoint=entrypoint)
    assert isinstance(pipeline, Flow)  # from_source and deploy return plain values when called from sync code
    deployment_id = pipeline.deploy(name=name, work_pool_name=pool, print_next_steps=False, ignore_warnings=True,
                                    description=description, job_variables={"env": env} if env else None)
    assert isinstance(deployment_id, UUID)
    return deployment_id


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pool", default=POOL, help="process work pool (created if missing)")
    ap.add_argument("--name", default=None, help="deployment name of the one pipeline given (default: its name)")
    ap.add_argument("--pipeline", choices=list(PIPELINES), default=None, help="only this pipeline (default: all)")
    a = ap.parse_args(argv)
    for pipeline_name in [a.pipeline] if a.pipeline else list(PIPELINES):
        name = a.name if a.pipeline and a.name else pipeline_name
        deployment_id = deploy(a.pool, name, pipeline_name=pipeline_name)
        print(f"deployment {pipeline_name}/{name} ({deployment_id}) on pool {a.pool} at {api_url()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
