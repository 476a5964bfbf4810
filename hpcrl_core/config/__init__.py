"""Configuration: pydantic models of ``params.yaml`` (what changes results) and ``Settings`` (where and how).

One model per params.yaml section; every model is frozen and forbids unknown keys, so a typo is an error and not
a silently ignored knob. ``load_params`` turns every validation problem into one line that names the key path,
the value received and what is allowed, and raises ``ConfigError`` with all of them at once.

Run: ``hpcrl config check [PATH]``.  Test: ``pytest tests/test_config.py``.

The sections live in ``bench.py``, ``prepare.py``, ``model.py``, ``rl.py``, ``hargo.py``, ``offline.py`` and
``registry.py``; this module joins them into ``Params`` and re-exports them, so callers import from
``hpcrl_core.config``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from hpcrl_core.config.base import Section
from hpcrl_core.config.bench import (
    BenchParams,
    ExecutorParams,
    ReferenceKind,
    RewardMode,
    RewardParams,
    SandboxParams,
    TimingParams,
    VerifyParams,
)
from hpcrl_core.config.hargo import (
    ESTIMATORS,
    HPCGPT,
    ONLINE_METHODS,
    TASK_FAMILIES,
    EvalHargoParams,
    HpcGptParams,
    PPOParams,
    RLHargoParams,
    SFTHargoParams,
    TaskRewardParams,
)
from hpcrl_core.config.model import (
    QWEN2_LINEAR_MODULES,
    EvalParams,
    HFModelParams,
    LoraParams,
    LrScheduler,
    ModelParams,
    SFTParams,
    TinyModelParams,
    TokenizerParams,
)
from hpcrl_core.config.offline import (
    OFFLINE_METHODS,
    DPOParams,
    KTOParams,
    OfflineMethodParams,
    OfflineParams,
    PreferenceParams,
    SimPOParams,
)
from hpcrl_core.config.prepare import SOURCE_KINDS, DgemmPrepParams, PrepareParams, QAPrepParams, RacePrepParams
from hpcrl_core.config.registry import HARGO_REGISTRY, RegistryParams
from hpcrl_core.config.rl import RLDgemmParams, SQDParams
from hpcrl_core.errors import ConfigError

__all__ = ["BenchParams", "DEFAULT_PARAMS", "describe_errors", "DgemmPrepParams", "DPOParams", "ESTIMATORS",
           "EvalHargoParams", "EvalParams", "ExecutorParams", "HFModelParams", "HPCGPT", "HpcGptParams", "KTOParams",
           "load_params", "LoraParams", "LrScheduler", "ModelParams", "OFFLINE_METHODS", "OfflineMethodParams",
           "OfflineParams",
           "ONLINE_METHODS", "Params", "parse_params", "PPOParams", "PreferenceParams", "PrepareParams",
           "QAPrepParams", "QWEN2_LINEAR_MODULES", "RacePrepParams", "ReferenceKind", "RegistryParams", "RewardMode",
           "RewardParams", "RLDgemmParams",
           "RLHargoParams", "SandboxParams", "Settings", "SFTHargoParams", "SFTParams", "SimPOParams", "SOURCE_KINDS",
           "SQDParams", "TASK_FAMILIES", "TaskRewardParams", "TimingParams", "TinyModelParams", "TokenizerParams",
           "VerifyParams"]

DEFAULT_PARAMS = Path("params.yaml")


class Params(Section):
    bench: BenchParams = BenchParams()
    reward: RewardParams = RewardParams()
    prepare: PrepareParams = PrepareParams()
    model: ModelParams = ModelParams()
    sft: SFTParams = SFTParams()
    evaluate: EvalParams = EvalParams()
    rl_dgemm: RLDgemmParams = RLDgemmParams()
    sft_hargo: SFTHargoParams = SFTHargoParams()
    hpcgpt: HpcGptParams = HpcGptParams()
    task_reward: TaskRewardParams = TaskRewardParams()
    rl_hargo: RLHargoParams = RLHargoParams()
    evaluate_hargo: EvalHargoParams = EvalHargoParams()
    preferences: PreferenceParams = PreferenceParams()
    offline: OfflineParams = OfflineParams()
    registry: RegistryParams = RegistryParams()
    registry_hargo: RegistryParams = HARGO_REGISTRY


class Settings(BaseSettings):
    """Where and how: folders and endpoints, from ``HPCRL_*`` environment variables."""

    model_config = SettingsConfigDict(env_prefix="HPCRL_", frozen=True, extra="ignore")

    cache_dir: Path = Path(".hpcrl/cache")
    scratch_dir: Path = Path(tempfile.gettempdir()) / "hpcrl-scratch"
    # one folder for every engine process on the host: timed runs queue machine-wide for the same cores
    lock_dir: Path = Path(tempfile.gettempdir()) / "hpcrl-cores"
    # where kernels are timed: on this machine's slots, or by CPU agents through a Prefect server
    # (docs/agents.md). An environment setting, not a param: it moves the work, not what a stage computes, so
    # switching it must not make `dvc repro` rerun the stages
    bench_backend: Literal["local", "agents"] = "local"
    agents_wait_s: float = Field(60.0, gt=0, le=86_400)  # no live agent this long: an error, not a hang
    agents_resubmits: int = Field(3, ge=0, le=20)  # infrastructure faults one kernel may survive
    # kernels one Prefect task run carries at most: a run costs ~0.5 s of server and task-engine time whatever it
    # carries (docs/agents.md); a bundle is resubmitted whole when its agent dies
    agents_bundle: int = Field(8, ge=1, le=256)


def _allowed_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Field names of the model that sits at ``loc`` (the parent of an offending key)."""
    current: Any = model
    for part in loc:
        field = current.model_fields.get(part) if isinstance(part, str) else None
        annotation = getattr(field, "annotation", None)
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        current = annotation
    return sorted(current.model_fields)


def describe_errors(model: type[BaseModel], err: ValidationError) -> list[str]:
    """One line per validation problem: key path, value received, what is allowed."""
    lines = []
    for e in err.errors():
        loc = tuple(e["loc"])
        path = ".".join(str(p) for p in loc) or "<top>"
        received = repr(e.get("input"))
        if len(received) > 80:
            received = received[:77] + "..."
        if e["type"] == "extra_forbidden":
            allowed = ", ".join(_allowed_keys(model, loc[:-1]))
            lines.append(f"{path}: unknown key (value {received}); allowed keys here: {allowed}")
        else:
            lines.append(f"{path}: received {received}; {e['msg']}")
    return lines


def parse_params(data: Any, source: str = "<params>") -> Params:
    """Validate an already-parsed mapping.

    Raises:
        ConfigError: listing every problem.
    """
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of sections, got {type(data).__name__}")
    try:
        return Params.model_validate(data)
    except ValidationError as err:
        raise ConfigError(f"{source}: invalid parameters", describe_errors(Params, err)) from None


def load_params(path: str | Path = DEFAULT_PARAMS) -> Params:
    """Read and validate a params.yaml file.

    Raises:
        ConfigError: missing file, YAML syntax error, or validation problems (all listed).
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such params file; pass the path of a params.yaml")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    return parse_params(data, str(path))
