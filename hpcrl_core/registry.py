"""The model registry on MLflow (the store of ``hpcrl_core/tracking.py``): versions of a registered model made
from model folders, their provenance tags and metrics, and the aliases that give them roles.

A model folder (a Hugging Face model or a LoRA adapter) is logged as the artifacts of a ``register``
stage run under ``model/``, and a version of the registered model is created whose *source* is that artifact
folder (``<run artifact root>/model``), linked to the run. No MLflow flavor is involved: nothing is loaded, and
``mlflow.artifacts.download_artifacts("models:/hpcrl-dgemm@champion")`` returns the folder as it was. The run holds
the evaluation metrics (flattened: ``rl.gflops_median``); run and version carry the tags ``git_commit`` and
``data_hash`` (``hpcrl_core.provenance``). Roles are registry aliases (``challenger``, ``champion``), never stages;
whether a challenger becomes champion is ``hpcrl_core.evaluation.promotion.decide_promotion``, plain Python.

Test: ``pytest tests/test_registry.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcrl_core.errors import ConfigError, TrackingInfraError
from hpcrl_core.provenance import git_commit
from hpcrl_core.tracking import log_dict, log_metrics, mlflow_client, resolve_uri, tracked_run

CHALLENGER = "challenger"
CHAMPION = "champion"
MODEL_ARTIFACT_PATH = "model"
# MLflow error codes of a store or server that failed, not of a bad request: worth a retry. MLflow reports a failed
# HTTP request and a server error as INTERNAL_ERROR, its default code, so a rare non-infrastructure error with
# that code is retried too: a bounded cost, against never retrying an unreachable server.
_TRANSIENT_CODES = frozenset({"INTERNAL_ERROR", "TEMPORARILY_UNAVAILABLE", "IO_ERROR", "SERVICE_UNDER_MAINTENANCE",
                              "DEADLINE_EXCEEDED", "REQUEST_LIMIT_EXCEEDED", "RESOURCE_EXHAUSTED"})


@dataclass(frozen=True)
class ModelVersionInfo:
    """One version of a registered model.

    Attributes:
        name: the registered model's name.
        version: its version number (1, 2, ...).
        run_id: the run that logged the files and the metrics; ``None`` for a version registered without one.
        source: where the version's files lie (``<run artifact root>/model`` for versions registered here).
        aliases: the aliases pointing at this version, sorted.
        tags: the version's tags (``git_commit``, ``data_hash``, ``model_kind``, ...).
        metrics: the run's latest metric values (``rl.gflops_median``, ...); empty without a run.
    """

    name: str
    version: int
    run_id: str | None
    source: str
    aliases: tuple[str, ...] = ()
    tags: Mapping[str, str] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)


@contextlib.contextmanager
def _infra_faults(action: str, uri: str) -> Iterator[None]:
    """Re-raise a failure of the store or server as ``TrackingInfraError``; any other error passes unchanged."""
    from mlflow.exceptions import MlflowException

    try:
        yield
    except MlflowException as e:
        if e.error_code not in _TRANSIENT_CODES:
            raise
        raise TrackingInfraError(f"{action}: the tracking store {uri} failed ({e.error_code}: {e.message}); "
                                 "check that it is reachable (MLFLOW_TRACKING_URI) and run again") from e
    except (ConnectionError, TimeoutError) as e:
        raise TrackingInfraError(f"{action}: cannot reach the tracking store {uri} ({e}); check "
                                 "MLFLOW_TRACKING_URI and run again") from e


def _version_info(client: Any, mv: Any) -> ModelVersionInfo:
    metrics = dict(client.get_run(mv.run_id).data.metrics) if mv.run_id else {}
    return ModelVersionInfo(name=mv.name, version=int(mv.version), run_id=mv.run_id or None, source=mv.source,
                            aliases=tuple(sorted(mv.aliases or ())), tags=dict(mv.tags or {}), metrics=metrics)


def _ensure_registered_model(client: Any, name: str) -> None:
    from mlflow.exceptions import MlflowException

    try:
        client.get_registered_model(name)
    except MlflowException as e:
        if e.error_code != "RESOURCE_DOES_NOT_EXIST":
            raise
        try:
            client.create_registered_model(name, description="RL-trained DGEMM policy; aliases: champion "
                                                              "(serving) and challenger (newest)")
        except MlflowException as race:  # another registration created it meanwhile
            if race.error_code not in ("RESOURCE_ALREADY_EXISTS", "ALREADY_EXISTS"):
                raise


def register_model_version(model_dir: Path, metrics: Mapping[str, float], report: Mapping[str, Any], name: str,
                           tags: Mapping[str, str], tracking_uri: str | None = None) -> ModelVersionInfo:
    """Log a model folder and its evaluation as a ``register`` run and create a version of ``name`` from it.

    The folder's files go to the run's artifacts under ``model/``; the version's source is that artifact folder
    (no MLflow flavor: nothing is loaded). The run gets ``metrics`` and the report itself (``eval_report.json``);
    run and version get ``tags`` (the provenance tags ``git_commit``, ``data_hash``, ``model_kind``, ``model_hash``
    of ``hpcrl_core.provenance.model_tags``, plus e.g. ``prefect_flow_run_id``). Sets no alias.

    Args:
        model_dir: a saved Hugging Face model or LoRA adapter folder.
        metrics: the report's flat metrics (``hpcrl_core.evaluation.promotion.report_metrics``).
        report: the evaluation report, logged as it is.
        name: the registered model; created when missing.
        tags: tags for run and version.
        tracking_uri: the store; default ``MLFLOW_TRACKING_URI`` or the local SQLite store.

    Raises:
        ConfigError: ``model_dir`` is not a folder (checked before anything is logged).
        TrackingInfraError: the store failed.
    """
    if not model_dir.is_dir():
        raise ConfigError(f"model_dir: {model_dir} does not exist; pass a saved Hugging Face model or LoRA adapter "
                          "folder (--model checkpoints/rl_dgemm/final)")
    uri = resolve_uri(tracking_uri)
    version_tags = {"git_commit": git_commit(), **tags}
    params = {"model_dir": str(model_dir), "registered_model": name}
    with _infra_faults(f"registering {model_dir} as {name}", uri), \
            tracked_run("register", params, version_tags, uri) as run:
        import mlflow

        mlflow.log_artifacts(str(model_dir), MODEL_ARTIFACT_PATH)
        log_metrics(metrics)
        log_dict(dict(report), "eval_report.json")
        client = mlflow_client(uri)
        _ensure_registered_model(client, name)
        mv = client.create_model_version(name, mlflow.get_artifact_uri(MODEL_ARTIFACT_PATH),
                                         run_id=run.info.run_id, tags=version_tags)
    return ModelVersionInfo(name=name, version=int(mv.version), run_id=run.info.run_id, source=mv.source,
                            tags=version_tags, metrics=dict(metrics))


def find_version(name: str, tag: str, value: str, tracking_uri: str | None = None) -> ModelVersionInfo | None:
    """The newest version of ``name`` whose tag ``tag`` equals ``value``; None when none (or no such model).

    Raises:
        TrackingInfraError: the store failed.
    """
    uri = resolve_uri(tracking_uri)
    with _infra_faults(f"searching versions of {name}", uri):
        client = mlflow_client(uri)
        found = [mv for mv in client.search_model_versions(f"name='{name}'") if (mv.tags or {}).get(tag) == value]
        if not found:
            return None
        return _version_info(client, max(found, key=lambda mv: int(mv.version)))


def get_version(name: str, version: int, tracking_uri: str | None = None) -> ModelVersionInfo:
    """A registered model version with its aliases, tags and its run's metrics.

    Raises:
        TrackingInfraError: the store failed.
    """
    uri = resolve_uri(tracking_uri)
    with _infra_faults(f"reading {name} version {version}", uri):
        client = mlflow_client(uri)
        return _version_info(client, client.get_model_version(name, str(version)))


def get_alias(name: str, alias: str, tracking_uri: str | None = None) -> ModelVersionInfo | None:
    """The version ``alias`` points at (e.g. the current ``champion``), or ``None`` when the registered model or
    the alias does not exist.

    Raises:
        TrackingInfraError: the store failed.
    """
    from mlflow.exceptions import MlflowException

    uri = resolve_uri(tracking_uri)
    with _infra_faults(f"reading alias {alias} of {name}", uri):
        client = mlflow_client(uri)
        try:
            registered = client.get_registered_model(name)
        except MlflowException as e:
            if e.error_code == "RESOURCE_DOES_NOT_EXIST":
                return None
            raise
        version = (registered.aliases or {}).get(alias)
        if version is None:
            return None
        return _version_info(client, client.get_model_version(name, str(version)))


def set_alias(name: str, alias: str, version: int, tracking_uri: str | None = None) -> None:
    """Point ``alias`` of ``name`` at ``version`` (moving it from any other version).

    Raises:
        TrackingInfraError: the store failed.
    """
    uri = resolve_uri(tracking_uri)
    with _infra_faults(f"setting alias {alias} of {name} to version {version}", uri):
        mlflow_client(uri).set_registered_model_alias(name, alias, str(version))
