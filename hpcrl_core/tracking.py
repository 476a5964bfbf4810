"""With ``hpcrl_core/registry.py``, the only module that talks to MLflow: stage runs, their params, metrics and
artifacts.

Embedded default: a local SQLite store (``sqlite:///mlflow.db``) with artifacts in ``./mlruns``; a server is
chosen by ``MLFLOW_TRACKING_URI``. Every stage run is named after its DVC stage (``sft``, ``rl_hargo@hargo-1``) and
tagged with its stage (``hpcrl.stage``), the git commit (``git_commit``), the process that holds it, its seed
(``hpcrl.seed``, from the params when not given), and with its method (``hpcrl.method``), the hash of the data it read
(``data_hash``) and the Prefect flow-run id when the caller knows them (this module never imports Prefect). Params are
logged by params.yaml section (``rl_dgemm.learning_rate``); TRL's own TrainingArguments stay out of the params
(``hpcrl_core/training/mlflow_callback.py`` logs them as the artifact ``trl/training_arguments.json``).

The experiment is marked as model training (tag ``mlflow.experimentKind``). MLflow 3.17's UI opens every experiment
in the view its GenAI / Model training switch last chose (GenAI in a fresh browser) whatever the tag says, so
``experiment_url`` and ``compare_url`` give links that open the model-training view
(``workflowType=machine_learning``).
A run whose process died is closed as KILLED by the next start of its stage; a stage that resumes from a
checkpoint reopens the run that made the checkpoint (``dvc_stage_run``).

The model registry is ``hpcrl_core/registry.py``, on the same store.

Test: ``pytest tests/test_tracking.py``; the UI itself: ``pytest -m integration tests/test_mlflow_ui.py``.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from hpcrl_core.files import write_text_atomic
from hpcrl_core.processes import ProcessId, is_alive, this_process
from hpcrl_core.provenance import data_hash, git_commit

EXPERIMENT = "hpcrl"
DEFAULT_URI = "sqlite:///mlflow.db"
# Run tags. hpcrl.stage names the DVC stage (or "register"); the name predates dvc_stage and is kept, since
# searches of existing stores use it.
STAGE_TAG = "hpcrl.stage"
HOST_TAG, PID_TAG, PID_START_TAG = "hpcrl.host", "hpcrl.pid", "hpcrl.pid_start"  # the process holding the run
RESUMES_TAG = "hpcrl.resumes"  # how often a crashed run was reopened by a resumed stage
CLOSED_TAG = "hpcrl.closed_reason"  # why close_dead_runs ended it (removed when the run is resumed)
METHOD_TAG, SEED_TAG = "hpcrl.method", "hpcrl.seed"  # what the HARGO comparison (and SFT vs RL) filters on
GIT_COMMIT_TAG, DATA_HASH_TAG = "git_commit", "data_hash"  # provenance, the same names as on registered versions
RUN_FILE = "mlflow_run.json"  # in a stage's checkpoint folder: the id of the run that made the checkpoints
# The experiment's kind, as MLflow's UI sets it (its values: genai_development, custom_model_development). A kind
# already there is kept: someone chose it in the UI.
EXPERIMENT_KIND_TAG, MODEL_TRAINING = "mlflow.experimentKind", "custom_model_development"
# The query parameter of MLflow 3.17's UI that picks its Model training view over its GenAI one (else remembered per
# browser, GenAI by default)
UI_VIEW = {"workflowType": "machine_learning"}


def resolve_uri(tracking_uri: str | None) -> str:
    """``tracking_uri``, else ``MLFLOW_TRACKING_URI``, else the local SQLite store."""
    return tracking_uri or os.environ.get("MLFLOW_TRACKING_URI", DEFAULT_URI)


def quiet_env() -> None:
    """Turn off MLflow's telemetry unless the caller chose otherwise."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("DO_NOT_TRACK", "true")


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _process_tags() -> dict[str, str]:
    me = this_process()
    return {HOST_TAG: me.host, PID_TAG: str(me.pid), PID_START_TAG: me.start}


def _owner(run: Any) -> ProcessId | None:
    """The process recorded on a run, or None for a run without the tags (made before they existed)."""
    tags = run.data.tags
    if HOST_TAG not in tags or not tags.get(PID_TAG, "").isdigit():
        return None
    return ProcessId(tags[HOST_TAG], int(tags[PID_TAG]), tags.get(PID_START_TAG, ""))


def mlflow_client(uri: str) -> Any:
    """An ``MlflowClient`` on ``uri``, with MLflow's start-up chatter silenced."""
    quiet_env()
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=uri)


def close_dead_runs(dvc_stage: str, tracking_uri: str | None = None) -> list[str]:
    """Mark KILLED every run of ``dvc_stage`` left RUNNING by a process that died on this host; returns their ids.

    A run records its process (tags ``hpcrl.host``, ``hpcrl.pid``, ``hpcrl.pid_start``) when it starts or resumes.
    A process killed with SIGKILL (or a machine that lost power) never ends its run, so the next start of the stage
    closes it, with the tag ``hpcrl.closed_reason``. Runs of another host, and runs without the tags, are left
    alone: whether their process lives cannot be known here.
    """
    uri = resolve_uri(tracking_uri)
    client = mlflow_client(uri)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    if experiment is None:
        return []
    found = client.search_runs([experiment.experiment_id], max_results=1000,
                               filter_string=f"tags.`{STAGE_TAG}` = '{dvc_stage}' and attributes.status = 'RUNNING'")
    closed = []
    for run in found:
        owner = _owner(run)
        if owner is None or is_alive(owner) is not False:
            continue
        client.set_tag(run.info.run_id, CLOSED_TAG, f"process {owner.pid} on {owner.host} died before it ended "
                                                    f"the run; closed when {dvc_stage} started again")
        client.set_terminated(run.info.run_id, status="KILLED")
        closed.append(run.info.run_id)
    return closed


def _run_to_resume(client: Any, run_file: Path, dvc_stage: str) -> str | None:
    """The run id in ``run_file`` when that run of ``dvc_stage`` ended without finishing (KILLED or FAILED)."""
    from mlflow.exceptions import MlflowException

    try:
        run_id = json.loads(run_file.read_text(encoding="utf-8"))["run_id"]
        run = client.get_run(run_id)
    except (OSError, ValueError, KeyError, TypeError, MlflowException):  # no file, another store, a deleted run
        return None
    if run.data.tags.get(STAGE_TAG) != dvc_stage or run.info.status not in ("KILLED", "FAILED"):
        return None  # FINISHED: a completed run is not reopened; RUNNING: its process lives (or is elsewhere)
    return str(run_id)


@contextlib.contextmanager
def dvc_stage_run(dvc_stage: str, params: Mapping[str, Any] | None = None, tags: Mapping[str, str] | None = None,
                  tracking_uri: str | None = None, run_file: Path | None = None, resume: bool = False, *,
                  method: str | None = None, seed: int | None = None,
                  data: Sequence[Path] = ()) -> Iterator[Any]:
    """The MLflow run of one DVC stage, named ``dvc_stage``: params flattened (``{"rl_dgemm": {"beta": 0}}`` is
    ``rl_dgemm.beta``: pass the stage's params.yaml sections, its own first), standard tags set (``run_tags``).

    First closes the stage's runs whose process died (``close_dead_runs``). With ``run_file`` (a file in the stage's
    checkpoint folder), the run id is written there when the run starts; with ``resume`` too (the stage resumes
    from a checkpoint), the run named there is reopened instead of starting a new one, if it ended without
    finishing: a crashed and resumed stage is one run in MLflow, its metrics continuing. Steps between the last
    checkpoint and the crash are trained again, so their metrics appear twice at the same step.

    Args:
        method: the tag ``hpcrl.method`` (``sft``, ``dapo``, ``hargo``, ...); none when not given.
        seed: the tag ``hpcrl.seed``; default: the ``seed`` of ``params`` (top level, else its first section's).
        data: the data files the stage reads; their content hash is the tag ``data_hash``.

    Yields:
        The active ``mlflow.ActiveRun``.
    """
    standard = run_tags(method=method, seed=_params_seed(params) if seed is None else seed, data=data)
    with tracked_run(dvc_stage, params, {**standard, **(tags or {})}, tracking_uri, run_file, resume) as run:
        yield run


def run_tags(method: str | None = None, seed: int | None = None, data: Sequence[Path] = ()) -> dict[str, str]:
    """The tags ``hpcrl.method``, ``hpcrl.seed`` and ``data_hash`` (a content hash of the ``data`` files that exist,
    as ``provenance.data_hash`` computes it relative to their common folder), each only when known."""
    tags = {METHOD_TAG: method, SEED_TAG: None if seed is None else str(seed)}
    files = sorted(Path(os.path.abspath(f)) for f in data if Path(f).is_file())
    if files:
        root = Path(os.path.commonpath([f.parent for f in files]))
        tags[DATA_HASH_TAG] = data_hash(root, tuple(glob.escape(f.relative_to(root).as_posix()) for f in files))
    return {k: v for k, v in tags.items() if v is not None}


def _params_seed(params: Mapping[str, Any] | None) -> int | None:
    """``params["seed"]``, else the first section's ``seed`` (the stage's own section comes first)."""
    if not params:
        return None
    first = next(iter(params.values()))
    seed = params.get("seed", first.get("seed") if isinstance(first, Mapping) else None)
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def ensure_experiment(tracking_uri: str | None = None) -> str:
    """Make ``EXPERIMENT`` the active experiment of the store (created when missing, marked as model training unless
    a kind was chosen already); returns its id."""
    quiet_env()
    import mlflow

    mlflow.set_tracking_uri(resolve_uri(tracking_uri))
    experiment = mlflow.set_experiment(EXPERIMENT)
    if EXPERIMENT_KIND_TAG not in experiment.tags:
        mlflow.set_experiment_tag(EXPERIMENT_KIND_TAG, MODEL_TRAINING)
    return str(experiment.experiment_id)


@contextlib.contextmanager
def tracked_run(name: str, params: Mapping[str, Any] | None, tags: Mapping[str, str] | None,
                 tracking_uri: str | None, run_file: Path | None = None, resume: bool = False) -> Iterator[Any]:
    import mlflow

    uri = resolve_uri(tracking_uri)
    ensure_experiment(uri)
    close_dead_runs(name, uri)
    run_id = _run_to_resume(mlflow_client(uri), run_file, name) if run_file is not None and resume else None
    all_tags = {STAGE_TAG: name, GIT_COMMIT_TAG: git_commit(), **_process_tags(), **(tags or {})}
    if run_id is None:
        active = mlflow.start_run(run_name=name, tags=all_tags)
    else:
        active = mlflow.start_run(run_id=run_id)
        resumes = int(active.data.tags.get(RESUMES_TAG, "0")) + 1
        mlflow.set_tags({**all_tags, RESUMES_TAG: str(resumes)})
        if CLOSED_TAG in active.data.tags:
            mlflow.delete_tag(CLOSED_TAG)
    with active as run:
        if run_file is not None:
            write_text_atomic(run_file, json.dumps({"run_id": run.info.run_id, "dvc_stage": name}) + "\n")
        if params:
            flat = {k: (str(v)[:500] if not isinstance(v, int | float | bool) else v)
                    for k, v in _flatten(params).items()}
            mlflow.log_params(flat)
        yield run


def experiment_url(ui_url: str, experiment_id: str) -> str:
    """The link that opens an experiment's runs in MLflow's model-training view, e.g.
    ``http://127.0.0.1:5000/#/experiments/1/runs?workflowType=machine_learning``."""
    return f"{ui_url.rstrip('/')}/#/experiments/{experiment_id}/runs?{urllib.parse.urlencode(UI_VIEW)}"


def compare_url(ui_url: str, run_ids: Sequence[str], experiment_ids: Sequence[str]) -> str:
    """The link to MLflow's comparison of ``run_ids`` (params, metrics, plots side by side)."""
    query = {"runs": json.dumps(list(run_ids)), "experiments": json.dumps(list(experiment_ids)), **UI_VIEW}
    return f"{ui_url.rstrip('/')}/#/compare-runs?{urllib.parse.urlencode(query)}"


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
