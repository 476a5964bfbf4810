"""The only module that talks to MLflow: stage runs, and the model registry.

Embedded default: a local SQLite store (``sqlite:///mlflow.db``) with artifacts in ``./mlruns``; a server is
chosen by ``MLFLOW_TRACKING_URI``. Every stage run is tagged with the git commit, and with the DVC data hash and
the Prefect flow-run id when the caller knows them (this module never imports Prefect).

Registry: a model folder (a Hugging Face model or a LoRA adapter) is logged as the artifacts of a ``register``
stage run under ``model/``, and a version of the registered model is created whose *source* is that artifact
folder (``<run artifact root>/model``), linked to the run. No MLflow flavor is involved: nothing is loaded, and
``mlflow.artifacts.download_artifacts("models:/hpcrl-dgemm@champion")`` returns the folder as it was. The run holds
the evaluation metrics (flattened: ``rl.gflops_median``); run and version carry the tags ``git_commit`` and
``data_hash``. Roles are registry aliases (``challenger``, ``champion``), never stages; ``beats`` decides promotion.

Test: ``pytest tests/test_tracking.py``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcrl_core.errors import ConfigError, DataError, TrackingInfraError

EXPERIMENT = "hpcrl"
DEFAULT_URI = "sqlite:///mlflow.db"


def _resolve_uri(tracking_uri: str | None) -> str:
    return tracking_uri or os.environ.get("MLFLOW_TRACKING_URI", DEFAULT_URI)


def _quiet_env() -> None:
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("DO_NOT_TRACK", "true")


def git_commit(root: Path | None = None) -> str:
    """The current commit (with ``-dirty`` when the tree has changes), or ``unknown`` outside git."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if sha.returncode != 0:
        return "unknown"
    return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


@contextlib.contextmanager
def stage_run(stage: str, params: Mapping[str, Any] | None = None, tags: Mapping[str, str] | None = None,
              tracking_uri: str | None = None) -> Iterator[Any]:
    """An MLflow run for one stage: params flattened (``prepare.race.per_pattern``), standard tags set.

    Yields the active ``mlflow.ActiveRun``.
    """
    _quiet_env()
    import mlflow

    mlflow.set_tracking_uri(_resolve_uri(tracking_uri))
    mlflow.set_experiment(EXPERIMENT)
    all_tags = {"hpcrl.stage": stage, "git_commit": git_commit(), **(tags or {})}
    with mlflow.start_run(run_name=stage, tags=all_tags) as run:
        if params:
            flat = {k: (str(v)[:500] if not isinstance(v, int | float | bool) else v)
                    for k, v in _flatten(params).items()}
            mlflow.log_params(flat)
        yield run


def log_metrics(metrics: Mapping[str, float], step: int | None = None) -> None:
    """Log numeric metrics (non-numbers are skipped); names may contain dots and slashes."""
    import mlflow

    numeric = {k: float(v) for k, v in _flatten(metrics).items() if isinstance(v, int | float) and
               not isinstance(v, bool)}
    if numeric:
        mlflow.log_metrics(numeric, step=step)


def log_dict(obj: Any, artifact_file: str) -> None:
    import mlflow

    mlflow.log_dict(obj, artifact_file)


def log_artifact(path: Path, artifact_path: str | None = None) -> None:
    import mlflow

    mlflow.log_artifact(str(path), artifact_path)


# --------------------------------------------------------------------------------------------------- registry

MODEL_NAME = "hpcrl-dgemm"
CHALLENGER = "challenger"
CHAMPION = "champion"
MODEL_ARTIFACT_PATH = "model"
# The held-out metrics promotion compares (see ``beats``), and how far the verified rate may fall.
GFLOPS_KEY = "rl.gflops_median"
VERIFIED_KEY = "rl.verified_rate"
VERIFIED_RATE_SLACK = 0.05
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


@dataclass(frozen=True)
class Promotion:
    """The outcome of ``promote_if_better``: whether the challenger became champion, and who is champion now."""

    promoted: bool
    champion_version: int
    previous_champion: int | None


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


def _client(uri: str) -> Any:
    _quiet_env()
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=uri)


def data_hash(data_dir: Path, pattern: str = "dgemm/*.jsonl") -> str:
    """A content hash of the DGEMM data a model was trained and evaluated on: ``sha256:<hex>``.

    Computed from the files themselves (sorted by relative path; each contributes its path, its size and its
    bytes), not read from ``dvc.lock``: the files are what the flow actually sees, the lock may be stale or absent
    (a checkout without DVC), and anyone holding the files can recompute the hash.

    Args:
        data_dir: the prepared data folder (``data``).
        pattern: the files to hash, relative to ``data_dir``.

    Raises:
        DataError: no file matches.
    """
    files = sorted(data_dir.glob(pattern))
    if not files:
        raise DataError(f"data_dir: no {pattern} under {data_dir}; pass the prepared data folder (--data data), "
                        "or produce it with `dvc pull data` or `dvc repro prepare`")
    digest = hashlib.sha256()
    for f in files:
        digest.update(f"{f.relative_to(data_dir).as_posix()}\0{f.stat().st_size}\0".encode())
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def check_model_dir(model_dir: Path) -> str:
    """Check that ``model_dir`` holds a saved model; returns its kind: ``hf_model`` or ``lora_adapter``.

    Raises:
        ConfigError: the folder is missing or holds neither ``config.json`` nor ``adapter_config.json``.
    """
    if (model_dir / "adapter_config.json").is_file():
        return "lora_adapter"
    if (model_dir / "config.json").is_file():
        return "hf_model"
    state = "does not exist" if not model_dir.exists() else "holds no config.json or adapter_config.json"
    raise ConfigError(f"model_dir: {model_dir} {state}; pass a saved Hugging Face model or LoRA adapter folder "
                      "(--model checkpoints/rl_dgemm/final), or produce it with `dvc repro rl_dgemm`")


def read_eval_report(path: Path) -> dict[str, Any]:
    """Read an evaluation report (``reports/eval_dgemm.json``) and check it holds what promotion compares.

    Returns:
        The report as written: ``{"sft": {...}, "rl": {...}, "meta": {...}}``.

    Raises:
        DataError: the file is missing or not JSON, or its ``rl`` block lacks a numeric ``gflops_median`` or
            ``verified_rate``.
    """
    fix = "run the DGEMM evaluation first (`dvc repro evaluate_dgemm`) or pass --report"
    if not path.is_file():
        raise DataError(f"report: {path} does not exist; {fix}")
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataError(f"report: {path} is not JSON ({e}); {fix}") from e
    rl = report.get("rl") if isinstance(report, dict) else None
    if not isinstance(rl, dict):
        found = sorted(report) if isinstance(report, dict) else type(report).__name__
        raise DataError(f"report: {path} has no 'rl' block (found {found}); it must hold the RL model's held-out "
                        f"metrics; {fix}")
    missing = [k for k in (GFLOPS_KEY, VERIFIED_KEY) if not _is_number(rl.get(k.split(".", 1)[1]))]
    if missing:
        raise DataError(f"report: {path} lacks numeric {', '.join(missing)}; {fix}")
    return report


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def report_metrics(report: Mapping[str, Any]) -> dict[str, float]:
    """The report's numbers as flat metric names (``rl.gflops_median``, ``sft.status_counts.ok``); ``meta`` and
    non-numbers are left out."""
    flat = _flatten({k: v for k, v in report.items() if k != "meta"})
    return {k: float(v) for k, v in flat.items() if _is_number(v)}


def beats(challenger: Mapping[str, float], champion: Mapping[str, float] | None) -> bool:
    """Whether a challenger should replace the champion, judged on held-out metrics.

    A challenger beats the champion when its ``rl.gflops_median`` is strictly higher AND its ``rl.verified_rate``
    is not lower than the champion's by more than ``VERIFIED_RATE_SLACK`` (0.05): faster kernels may not be bought
    with many more wrong ones. With no champion, any challenger wins (the first version becomes champion).

    Args:
        challenger: the challenger's flat metrics.
        champion: the champion's flat metrics, or ``None`` when there is no champion.

    Raises:
        DataError: either side lacks one of the two metrics.
    """
    if champion is None:
        return True
    for side, metrics in (("challenger", challenger), ("champion", champion)):
        missing = [k for k in (GFLOPS_KEY, VERIFIED_KEY) if k not in metrics]
        if missing:
            raise DataError(f"cannot compare models: the {side} has no {', '.join(missing)} metric; register "
                            "versions with this flow (it logs them), or set the champion alias by hand")
    faster = challenger[GFLOPS_KEY] > champion[GFLOPS_KEY]
    # 1e-9: a drop of exactly the slack is allowed, whatever the float rounding of the subtraction
    still_correct = challenger[VERIFIED_KEY] >= champion[VERIFIED_KEY] - VERIFIED_RATE_SLACK - 1e-9
    return faster and still_correct


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


def register_model_version(model_dir: Path, report: Mapping[str, Any], data_hash: str, name: str = MODEL_NAME,
                           tags: Mapping[str, str] | None = None,
                           tracking_uri: str | None = None) -> ModelVersionInfo:
    """Log a model folder and its evaluation as a ``register`` stage run and create a version from it.

    The folder's files go to the run's artifacts under ``model/``; the version's source is that artifact folder
    (no MLflow flavor: nothing is loaded). The run gets the report's metrics (``report_metrics``) and the report
    itself (``eval_report.json``); run and version get the tags ``git_commit``, ``data_hash`` and ``model_kind``,
    plus ``tags``. Sets no alias.

    Args:
        model_dir: a saved Hugging Face model or LoRA adapter folder.
        report: the evaluation report (``read_eval_report``).
        data_hash: the data hash (``data_hash``).
        name: the registered model; created when missing.
        tags: extra tags for run and version (e.g. ``prefect_flow_run_id``).
        tracking_uri: the store; default ``MLFLOW_TRACKING_URI`` or the local SQLite store.

    Raises:
        ConfigError: ``model_dir`` holds no saved model (checked before anything is logged).
        TrackingInfraError: the store failed.
    """
    kind = check_model_dir(model_dir)
    metrics = report_metrics(report)
    uri = _resolve_uri(tracking_uri)
    version_tags = {"git_commit": git_commit(), "data_hash": data_hash, "model_kind": kind,
                    "model_hash": model_hash(model_dir), **(tags or {})}
    params = {"model_dir": str(model_dir), "registered_model": name}
    with _infra_faults(f"registering {model_dir} as {name}", uri), \
            stage_run("register", params=params, tags=version_tags, tracking_uri=uri) as run:
        import mlflow

        mlflow.log_artifacts(str(model_dir), MODEL_ARTIFACT_PATH)
        log_metrics(metrics)
        log_dict(dict(report), "eval_report.json")
        client = _client(uri)
        _ensure_registered_model(client, name)
        mv = client.create_model_version(name, mlflow.get_artifact_uri(MODEL_ARTIFACT_PATH),
                                         run_id=run.info.run_id, tags=version_tags)
    return ModelVersionInfo(name=name, version=int(mv.version), run_id=run.info.run_id, source=mv.source,
                            tags=version_tags, metrics=metrics)


def model_hash(model_dir: Path) -> str:
    """sha256 over a model folder's files (relative path + bytes, sorted): the same weights give the same hash."""
    h = hashlib.sha256()
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(model_dir)).encode() + b"\0")
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return "sha256:" + h.hexdigest()


def find_version(name: str, tag: str, value: str, tracking_uri: str | None = None) -> ModelVersionInfo | None:
    """The newest version of ``name`` whose tag ``tag`` equals ``value``; None when none (or no such model).

    Raises:
        TrackingInfraError: the store failed.
    """
    uri = _resolve_uri(tracking_uri)
    with _infra_faults(f"searching versions of {name}", uri):
        client = _client(uri)
        found = [mv for mv in client.search_model_versions(f"name='{name}'") if (mv.tags or {}).get(tag) == value]
        if not found:
            return None
        return _version_info(client, max(found, key=lambda mv: int(mv.version)))


def get_version(name: str, version: int, tracking_uri: str | None = None) -> ModelVersionInfo:
    """A registered model version with its aliases, tags and its run's metrics.

    Raises:
        TrackingInfraError: the store failed.
    """
    uri = _resolve_uri(tracking_uri)
    with _infra_faults(f"reading {name} version {version}", uri):
        client = _client(uri)
        return _version_info(client, client.get_model_version(name, str(version)))


def get_alias(name: str, alias: str, tracking_uri: str | None = None) -> ModelVersionInfo | None:
    """The version ``alias`` points at (e.g. the current ``champion``), or ``None`` when the registered model or
    the alias does not exist.

    Raises:
        TrackingInfraError: the store failed.
    """
    from mlflow.exceptions import MlflowException

    uri = _resolve_uri(tracking_uri)
    with _infra_faults(f"reading alias {alias} of {name}", uri):
        client = _client(uri)
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
    uri = _resolve_uri(tracking_uri)
    with _infra_faults(f"setting alias {alias} of {name} to version {version}", uri):
        _client(uri).set_registered_model_alias(name, alias, str(version))


def promote_if_better(challenger: ModelVersionInfo, tracking_uri: str | None = None) -> Promotion:
    """Move the ``champion`` alias to ``challenger`` when it ``beats`` the current champion (or there is none).

    The champion is read just before the decision; two registrations racing each other are not serialised.

    Raises:
        DataError: either version lacks a metric ``beats`` compares.
        TrackingInfraError: the store failed.
    """
    current = get_alias(challenger.name, CHAMPION, tracking_uri)
    if current is not None and current.version == challenger.version:
        return Promotion(promoted=False, champion_version=current.version, previous_champion=current.version)
    if not beats(challenger.metrics, current.metrics if current else None):
        assert current is not None  # beats() is True without a champion
        return Promotion(promoted=False, champion_version=current.version, previous_champion=current.version)
    set_alias(challenger.name, CHAMPION, challenger.version, tracking_uri)
    return Promotion(promoted=True, champion_version=challenger.version,
                     previous_champion=current.version if current else None)
