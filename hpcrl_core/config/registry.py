"""Sections ``registry`` and ``registry_hargo`` of params.yaml: the registered model and the rule that promotes a
challenger to champion.

Read by the register flow (``flows/register.py``), which the ``train-dgemm`` pipeline runs after its DVC stages; it
is not a DVC stage itself. The rule is ``hpcrl_core.evaluation.promotion.decide_promotion``. The section is not
called ``register``: a pydantic field of that name shadows ``ABCMeta.register`` and warns on every import.

Test: ``pytest tests/evaluation/test_promotion.py`` (the rule and a bad policy) and ``pytest tests/test_config.py``.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from hpcrl_core.config.base import Section

# a report metric as the registry flattens it: <block>.<key>[.<key> ...], e.g. rl.gflops_median
_METRIC = re.compile(r"^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)+$")
# MLflow's rule for registered model names that work in models:/<name>@<alias> URIs
_MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class RegistryParams(Section):
    """Registration in the MLflow registry and promotion to the ``champion`` alias.

    A challenger becomes champion when its ``metric`` is strictly higher than the champion's and its
    ``verified_metric`` is not lower than the champion's by more than ``verified_slack``: faster kernels may not be
    bought with many more wrong ones (``verified_metric`` null: the first comparison alone decides). Without a
    champion the first version becomes champion. Both metrics are keys of the evaluation report flattened with dots
    (``rl.gflops_median``: the ``gflops_median`` of block ``rl``). Two sections use this model: ``registry``
    (``hpcrl-dgemm``) and ``registry_hargo`` (``hpcrl-hargo``, promoted on WinRate).
    """

    model_name: str = "hpcrl-dgemm"  # the registered model; `--name` of flows.register overrides it
    metric: str = "rl.gflops_median"  # must be strictly higher than the champion's
    verified_metric: str | None = "rl.verified_rate"  # may fall by at most verified_slack; null: no second guard
    verified_slack: float = Field(0.05, ge=0.0, le=1.0)
    data_files: tuple[str, ...] = ("dgemm/*.jsonl",)  # globs under data/ whose content hash tags the version

    @field_validator("metric", "verified_metric")
    @classmethod
    def _report_key(cls, v: str | None) -> str | None:
        if v is not None and not _METRIC.match(v):
            raise ValueError(f"must be a report key as <block>.<key>, e.g. rl.gflops_median; got {v!r}")
        return v

    @field_validator("data_files")
    @classmethod
    def _some_files(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v or any(not p.strip() or p.startswith("/") or ".." in p.split("/") for p in v):
            raise ValueError(f"must list globs relative to the data folder (no '/...' or '..'); got {list(v)}")
        return v

    @field_validator("model_name")
    @classmethod
    def _model_name(cls, v: str) -> str:
        if not _MODEL_NAME.match(v):
            raise ValueError(f"must start with a letter or digit and hold only letters, digits, '_', '.', '-'; "
                             f"got {v!r}")
        return v


# The HARGO policy: seed rl_hargo.seeds[0] of method hargo is registered; it becomes champion when its WinRate
# against the SFT start on the held-out suite beats the champion's.
HARGO_REGISTRY = RegistryParams(model_name="hpcrl-hargo", metric="hargo.runs.1.winrate", verified_metric=None,
                                verified_slack=0.0, data_files=("race_c/*.jsonl", "race_fortran/*.jsonl",
                                                                "mlperf/*.jsonl", "plp/*.jsonl"))
