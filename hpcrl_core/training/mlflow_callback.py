"""The MLflow callback of hpcrl's trainers: transformers' ``MLflowCallback`` (per-step metrics into the stage's open
run) without its params. Transformers logs every TrainingArguments field and the model config as run params
(``_name_or_path``, ``accelerator_config``, ... hundreds of them), which bury the stage's own params.yaml sections in
MLflow's compare view; here they go to one JSON artifact instead, ``trl/training_arguments.json``.

A flow asks for MLflow as before (``report_to=["mlflow"]``); each ``build_*_trainer`` calls ``use_hpcrl_mlflow`` on
its trainer, which swaps the callback. It relies on ``MLflowCallback.setup`` logging through ``self._ml_flow``
(transformers 5.24), which a test checks.

Test: ``pytest tests/test_tracking.py -k trl``.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar, cast

from transformers import Trainer, TrainerState, TrainingArguments
from transformers.integrations import MLflowCallback

from hpcrl_core import tracking

TRL_ARGS_ARTIFACT = "trl/training_arguments.json"
T = TypeVar("T", bound=Trainer)


class _WithoutParams:
    """The mlflow module as ``MLflowCallback.setup`` uses it, except that ``log_params`` logs nothing."""

    def __init__(self, mlflow: Any) -> None:
        self._mlflow = mlflow

    def log_params(self, *args: Any, **kwargs: Any) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._mlflow, name)


def trainer_arguments(args: TrainingArguments, model: Any) -> dict[str, Any]:
    """What transformers would have logged as params, as JSON: the config class, its fields, the model config."""
    config = getattr(model, "config", None)
    record = {"config_class": type(args).__name__, "training_arguments": args.to_dict(),
              "model_config": config.to_dict() if config is not None else None}
    return dict(json.loads(json.dumps(record, default=str)))  # enums, paths and dtypes as text


class HpcrlMLflowCallback(MLflowCallback):
    """``MLflowCallback`` whose setup logs the trainer's arguments as ``trl/training_arguments.json``, not params."""

    def setup(self, args: TrainingArguments, state: TrainerState, model: Any) -> None:
        mlflow = self._ml_flow
        self._ml_flow = cast(Any, _WithoutParams(mlflow))
        try:
            super().setup(args, state, model)
        finally:
            self._ml_flow = mlflow
        if state.is_world_process_zero:
            tracking.log_dict(trainer_arguments(args, model), TRL_ARGS_ARTIFACT)


def use_hpcrl_mlflow(trainer: T) -> T:
    """Replace the trainer's ``MLflowCallback`` (there when ``report_to`` holds ``mlflow``) by
    ``HpcrlMLflowCallback``; a trainer without one is left as it is. Returns the trainer."""
    if trainer.pop_callback(MLflowCallback) is not None:
        trainer.add_callback(HpcrlMLflowCallback())
    return trainer
