"""Section ``rl_dgemm`` of params.yaml: online GRPO on DGEMM problems with benchmark rewards and the SQD curriculum.

``trl`` passes further GRPOConfig options through (checked by name when the trainer is assembled); the fields
here are the ones hpcrl owns or that the curriculum and the reward need to agree on.

Test: ``pytest tests/test_config.py``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from hpcrl_core.config.base import REMOVED_BENCH_N, Section, refuse_removed
from hpcrl_core.config.model import LrScheduler, PlanVocabulary

ScaleRewards = Literal["group", "batch", "none"]  # TRL GRPOConfig.scale_rewards
VisitSizes = Literal["train", "span", "problem"]


class SQDParams(Section):
    """Staged Quality-Diversity (docs/sqd.md): per-problem stages of permitted techniques, promoted on progress.

    A problem at stage s permits the first s techniques of its unlock order. After each visit (one group of
    completions for the problem) the curriculum looks at the problem's last ``window`` visits at its stage and
    promotes it when their mean reward reaches ``promote_reward``, or when it has plateaued: at least
    ``2 * window`` visits at the stage and the mean of the last ``window`` is not above the mean of the ``window``
    before by more than ``plateau_tol`` (in reward units). A share ``replay`` of the visits renders the problem at
    one of the earlier stages it passed instead; those visits train but are not part of the promotion rule.
    """

    enabled: bool = True  # false: every problem keeps the stage it was generated with (plain GRPO)
    start_stage: int | None = Field(0, ge=0, le=5)  # every problem starts here; null = its generated stage
    max_stage: int | None = Field(5, ge=0, le=5)  # no promotion beyond; null = the problem's generated stage
    window: int = Field(2, ge=1, le=10_000)
    promote_reward: float = 50.0  # with reward.mode relative and scale 100: half of numpy's GFLOPS
    plateau_tol: float = Field(5.0, ge=0)
    # share of visits rendered at an earlier stage of the problem (uniform over the stages it passed), so the
    # policy keeps answering the constrained prompts it passed; such replays never count toward promotion
    replay: float = Field(0.25, ge=0.0, lt=1.0)

    @model_validator(mode="after")
    def _ordered(self) -> SQDParams:
        if self.start_stage is not None and self.max_stage is not None and self.start_stage > self.max_stage:
            raise ValueError(f"start_stage ({self.start_stage}) must be <= max_stage ({self.max_stage})")
        return self


class RLDgemmParams(Section):
    """GRPO on DGEMM (``dvc repro rl_dgemm``): TRL's GRPOTrainer from ``checkpoints/sft``, prompts from SQD.

    A step generates ``num_generations`` completions for each of ``per_device_train_batch_size /
    num_generations`` problems and benchmarks every completion at its problem's n (short timing) for its reward.
    """

    @model_validator(mode="before")
    @classmethod
    def _removed(cls, data: Any) -> Any:
        return refuse_removed(data, "rl_dgemm", {"bench_n": REMOVED_BENCH_N})

    seed: int = Field(1234, ge=0, le=2**32 - 1)
    max_steps: int = Field(300, ge=1, le=10_000_000)
    learning_rate: float = Field(5e-5, gt=0, le=1)
    lr_scheduler_type: LrScheduler = "constant"
    warmup_ratio: float = Field(0.0, ge=0, lt=1)
    per_device_train_batch_size: int = Field(8, ge=1, le=4096)  # completions per step
    num_generations: int = Field(8, ge=2, le=1024)  # G: completions per problem (one group)
    gradient_accumulation_steps: int = Field(1, ge=1, le=4096)
    temperature: float = Field(0.5, gt=0, le=5)
    beta: float = Field(2.0, ge=0, le=100)  # KL coefficient against the frozen SFT model (advantages in reward units)
    loss_type: str = "dapo"  # one of TRL GRPOConfig's loss types (checked against the installed TRL)
    # advantages: reward - group mean, divided by the group's std (group), the batch's std (batch) or not (none)
    scale_rewards: ScaleRewards = "none"
    max_completion_length: int = Field(512, ge=8, le=1_048_576)
    problems: int = Field(8, ge=1, le=1_000_000)  # distinct train problems drawn from problems_train.jsonl
    # the matrix size each visit asks for and is timed at: "problem" keeps each problem's own n; "train" draws one
    # of prepare.dgemm.train_sizes per visit; "span" one of every size from the smallest to the largest train size
    # that no held-out problem asks for (prepare.dgemm.eval_sizes). RL's policies wrote code right at the sizes they
    # trained at and wrong at the held-out ones (docs/sqd.md, "Visit sizes")
    visit_sizes: VisitSizes = "problem"
    # share of visits in which the last of the G completions is replaced by the archive's fastest kernel of that
    # problem that the visit permits (when it holds one): a kernel RL found stays in its groups (docs/sqd.md)
    elite_replay: float = Field(0.0, ge=0.0, le=1.0)
    # with elite_replay: replay only when the problem's last visit wrote no kernel as fast as this fraction of the
    # elite (a rescue when the policy fell behind what it wrote before); None: on every drawn visit
    elite_replay_behind: float | None = Field(None, gt=0.0, le=1.0)
    # share of visits in which the first completion opens with a forced plan line of a kernel kind the visit permits
    # and the problem's archive lacks (exploration of kinds the policy rarely chooses; docs/sqd.md)
    plan_novelty: float = Field(0.0, ge=0.0, le=1.0)
    # every completion opens with the code fence the prompt asks for ("```c" and a newline), given instead of sampled
    # and counted within max_completion_length: no group is lost to openings with other families' text (docs/sqd.md)
    fence_given: bool = True
    # each completion's plan line is held to one of the corpus's ("corpus") or to their fields recombined within a
    # kind ("fields"): no plan that joins two kinds' descriptions; the code after it is free (docs/sqd.md); "none"
    # with trl.use_vllm
    plan_vocabulary: PlanVocabulary = "corpus"
    # gamma: each step adds gamma x the mean token NLL of sft_anchor_batch SFT records of data/dgemm/train.jsonl to
    # the loss, so the corpus's kernels stay likely where RL samples nothing (docs/sqd.md, "The SFT anchor"); 0: off
    sft_anchor: float = Field(0.0, ge=0.0, le=1000.0)
    sft_anchor_batch: int = Field(8, ge=1, le=4096)  # SFT records per micro-batch for the anchor
    rewards: tuple[str, ...] = ("dgemm_gflops",)  # names in hpcrl_core.rewards.REWARDS; summed with equal weight
    save_steps: int = Field(10, ge=1, le=10_000_000)
    save_total_limit: int = Field(2, ge=1, le=1000)
    logging_steps: int = Field(1, ge=1, le=10_000_000)
    sqd: SQDParams = SQDParams()
    trl: dict[str, Any] = Field(default_factory=dict)  # extra GRPOConfig options, e.g. {epsilon_high: 0.28}

    @field_validator("rewards")
    @classmethod
    def _some_rewards(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v or len(set(v)) != len(v):
            raise ValueError(f"rewards must name at least one reward function, each once; got {list(v)}")
        return v

    @model_validator(mode="after")
    def _replay(self) -> RLDgemmParams:
        if self.elite_replay_behind is not None and self.elite_replay == 0:
            raise ValueError(f"elite_replay_behind ({self.elite_replay_behind}) only acts on replayed visits; set "
                             "elite_replay > 0 (the share of visits that may get an elite) or "
                             "elite_replay_behind: null")
        return self

    @model_validator(mode="after")
    def _groups(self) -> RLDgemmParams:
        if self.per_device_train_batch_size % self.num_generations:
            raise ValueError(f"per_device_train_batch_size ({self.per_device_train_batch_size}) must be a multiple "
                             f"of num_generations ({self.num_generations}): a step holds whole groups")
        return self
