"""Sections ``preferences`` and ``offline`` (with ``offline.dpo``, ``offline.kto``, ``offline.simpo``) of
params.yaml: the offline baselines of the HARGO comparison, trained from the same SFT start on preference pairs
scored by the same fixed rewards as RL.

Test: ``pytest tests/test_config.py tests/training/test_offline.py``.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from hpcrl_core.config.base import Section, Seeds
from hpcrl_core.config.model import LrScheduler
from hpcrl_core.errors import ConfigError

OFFLINE_METHODS: tuple[str, ...] = ("dpo", "kto", "simpo")


class PreferenceParams(Section):
    """Preference pairs (``dvc repro preferences``): ``samples`` answers of the SFT start to each prompt RL asks
    (``rl_hargo.families``, ``prompts``, ``max_items_per_family``), scored by ``hpc_tasks``; the best is chosen, the
    worst rejected, and a prompt whose answers all score the same is a tie that gives no pair."""

    samples: int = Field(2, ge=2, le=64)  # answers per prompt (the paper: two SFT samples)
    temperature: float = Field(0.6, gt=0, le=5)  # as rl_hargo samples
    max_new_tokens: int = Field(128, ge=1, le=1_048_576)  # as rl_hargo.max_completion_length
    batch_size: int = Field(16, ge=1, le=4096)  # prompts per generate() call
    seed: int = Field(1234, ge=0, le=2**32 - 1)


class OfflineMethodParams(Section):
    """One offline method's own knobs; ``trl`` passes further options to its TRL config, checked before training."""

    beta: float = Field(0.1, gt=0, le=100)
    trl: dict[str, Any] = Field(default_factory=dict)


class DPOParams(OfflineMethodParams):
    """DPO (TRL's DPOTrainer, sigmoid loss) against the frozen SFT start as reference."""


class KTOParams(OfflineMethodParams):
    """KTO (TRL's KTOTrainer): every pair becomes a desirable (chosen) and an undesirable (rejected) example."""


class SimPOParams(OfflineMethodParams):
    """SimPO: TRL's CPOTrainer with ``loss_type="simpo"`` and ``cpo_alpha=0`` (no reference model, length-normalised
    log-probs, target margin ``gamma``)."""

    beta: float = Field(2.0, gt=0, le=100)  # the SimPO paper's range is 2.0-2.5
    gamma: float = Field(0.5, ge=0, le=100)  # target reward margin (TRL's simpo_gamma)


class OfflineParams(Section):
    """The offline baselines (``dvc repro offline``): one run per (method, seed) of ``methods`` x ``seeds`` from the
    HARGO SFT start on ``preferences/pairs.jsonl``, with the shared budget below and each method's own section."""

    methods: tuple[str, ...] = OFFLINE_METHODS
    seeds: Seeds = (1,)  # make hargo: one seed per method (under an hour); (1, 2, 3): the 3-seed table
    max_steps: int = Field(100, ge=1, le=10_000_000)  # as rl_hargo
    learning_rate: float = Field(2e-5, gt=0, le=1)  # as rl_hargo
    lr_scheduler_type: LrScheduler = "constant"
    per_device_train_batch_size: int = Field(8, ge=1, le=4096)  # pairs (DPO, SimPO) or examples (KTO) per step
    gradient_accumulation_steps: int = Field(1, ge=1, le=4096)
    max_length: int = Field(1024, ge=16, le=1_048_576)  # prompt + answer tokens; a longer pair stops the run
    save_steps: int = Field(25, ge=1, le=10_000_000)
    save_total_limit: int = Field(2, ge=1, le=1000)
    logging_steps: int = Field(1, ge=1, le=10_000_000)
    dpo: DPOParams = DPOParams()
    kto: KTOParams = KTOParams()
    simpo: SimPOParams = SimPOParams()

    @field_validator("methods")
    @classmethod
    def _known_methods(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [m for m in v if m not in OFFLINE_METHODS]
        if unknown or len(set(v)) != len(v):
            raise ValueError(f"methods must name offline methods among {', '.join(OFFLINE_METHODS)}, each once; "
                             f"got {list(v)}")
        return v

    def method(self, name: str) -> OfflineMethodParams:
        """The section of method ``name`` (``dpo``, ``kto``, ``simpo``).

        Raises:
            ConfigError: an unknown method.
        """
        sections: dict[str, OfflineMethodParams] = {"dpo": self.dpo, "kto": self.kto, "simpo": self.simpo}
        if name not in sections:
            raise ConfigError(f"offline method {name!r} is not known; known: {', '.join(OFFLINE_METHODS)}")
        return sections[name]
