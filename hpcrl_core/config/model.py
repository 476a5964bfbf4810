"""Sections ``model`` (tiny or hf policy, tokenizer, LoRA), ``sft`` and ``evaluate`` of params.yaml.

Test: ``pytest tests/test_config.py`` and ``pytest tests/models``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from hpcrl_core.config.base import FAMILIES, REMOVED_BENCH_N, Section, refuse_removed

QWEN2_LINEAR_MODULES: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class TinyModelParams(Section):
    """Our own Qwen2-architecture model, trained from scratch (``model.source: tiny``)."""

    hidden_size: int = Field(256, ge=8, le=16_384)
    num_layers: int = Field(2, ge=1, le=256)
    num_heads: int = Field(4, ge=1, le=512)
    num_kv_heads: int = Field(4, ge=1, le=512)
    intermediate_size: int = Field(768, ge=8, le=65_536)
    max_position_embeddings: int = Field(2048, ge=64, le=1_048_576)  # longest prompt + completion, in tokens
    tie_word_embeddings: bool = True
    rope_theta: float = Field(10_000.0, gt=0)

    @model_validator(mode="after")
    def _heads_fit(self) -> TinyModelParams:
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size ({self.hidden_size}) must be divisible by num_heads ({self.num_heads}); "
                             f"pick num_heads among the divisors of hidden_size")
        if (self.hidden_size // self.num_heads) % 2:
            raise ValueError(f"hidden_size / num_heads = {self.hidden_size // self.num_heads} must be even "
                             f"(rotary embeddings rotate pairs of dimensions)")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads ({self.num_heads}) must be divisible by num_kv_heads ({self.num_kv_heads}); "
                             f"num_kv_heads = num_heads is plain multi-head attention")
        return self


class TokenizerParams(Section):
    """The tiny model's tokenizer: trained on ``data/`` unless ``path`` names a saved one."""

    vocab_size: int = Field(4096, ge=300, le=1_000_000)
    min_frequency: int = Field(2, ge=1, le=1_000_000)
    path: str | None = None  # a folder written by save_tokenizer; None = train one on data/*/train.jsonl


class HFModelParams(Section):
    """A pretrained causal LM from a local folder (``model.source: hf``); these machines reach no hub."""

    path: str | None = None  # a folder holding config.json, the weights and the tokenizer
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    trust_remote_code: bool = False


class LoraParams(Section):
    enabled: bool = False
    r: int = Field(16, ge=1, le=4096)
    alpha: int = Field(32, ge=1, le=65_536)  # LoRA scaling is alpha / r
    dropout: float = Field(0.05, ge=0, lt=1)
    target_modules: tuple[str, ...] = ()  # leaf names of linear layers; () = peft's default for the architecture

    @field_validator("target_modules")
    @classmethod
    def _names(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if any(not name.strip() for name in v) or len(set(v)) != len(v):
            raise ValueError(f"target_modules must be distinct, non-empty module names, got {list(v)}")
        return v


class ModelParams(Section):
    source: Literal["tiny", "hf"] = "tiny"
    tiny: TinyModelParams = TinyModelParams()
    tokenizer: TokenizerParams = TokenizerParams()
    hf: HFModelParams = HFModelParams()
    lora: LoraParams = LoraParams()

    @model_validator(mode="after")
    def _consistent(self) -> ModelParams:
        if self.source == "hf" and not self.hf.path:
            raise ValueError(f"model.source is 'hf' but model.hf.path is {self.hf.path!r}; set model.hf.path to a "
                             f"local folder holding config.json, the weights and the tokenizer, or use source: tiny")
        if self.source == "tiny" and self.lora.enabled and not self.lora.target_modules:
            raise ValueError(f"model.lora.enabled with model.source 'tiny' needs model.lora.target_modules "
                             f"(received []); the tiny model is a Qwen2: choose from "
                             f"{', '.join(QWEN2_LINEAR_MODULES)}, e.g. [q_proj, v_proj]")
        return self


LrScheduler = Literal["cosine", "linear", "constant", "constant_with_warmup", "cosine_with_min_lr"]
# which plan lines DGEMM completions may open with (data.dgemm.corpus.plan_openings): evaluate.dgemm_plan_vocabulary,
# rl_dgemm.plan_vocabulary
PlanVocabulary = Literal["none", "corpus", "fields"]


class SFTParams(Section):
    """Supervised fine-tuning (``dvc repro sft``): TRL's SFTTrainer on the prepared prompt-completion records.

    Defaults fit the tiny model trained from scratch on 2 CPU cores: AdamW 1e-3, short warmup + cosine, batch 8 of
    length-grouped records, 3000 steps (~7 epochs of the default data; docs/experiments.md has the measurements).
    ``trl`` passes further SFTConfig options through, checked by name when the trainer is assembled.
    """

    seed: int = Field(1234, ge=0, le=2**32 - 1)
    max_steps: int = Field(3000, ge=1, le=10_000_000)
    learning_rate: float = Field(1e-3, gt=0, le=1)
    lr_scheduler_type: LrScheduler = "cosine"
    warmup_ratio: float = Field(0.03, ge=0, lt=1)  # share of max_steps spent warming up linearly
    weight_decay: float = Field(0.0, ge=0, le=1)
    per_device_train_batch_size: int = Field(8, ge=1, le=4096)
    per_device_eval_batch_size: int = Field(16, ge=1, le=4096)
    gradient_accumulation_steps: int = Field(1, ge=1, le=4096)
    max_length: int = Field(512, ge=16, le=1_048_576)  # tokens of prompt + completion; must fit the longest record
    eval_steps: int = Field(500, ge=1, le=10_000_000)
    save_steps: int = Field(250, ge=1, le=10_000_000)
    save_total_limit: int = Field(3, ge=1, le=1000)
    logging_steps: int = Field(10, ge=1, le=10_000_000)
    families: tuple[str, ...] = FAMILIES
    # family -> times its train records appear per epoch (default once): small families (facts tables) seen as often
    # as the large ones need
    repeats: dict[str, int] = Field(default_factory=dict)
    # how a batch's summed token loss is divided: "batch" by the batch's own completion tokens (TRL's mean), so with
    # length-grouped batches a token of a short record weighs several times one of a long record; "uniform" by a
    # constant (records per step x the mean completion tokens of a train record), so every token weighs the same
    token_weighting: Literal["batch", "uniform"] = "batch"
    trl: dict[str, Any] = Field(default_factory=dict)  # extra SFTConfig options, e.g. {max_grad_norm: 0.5}

    @field_validator("families")
    @classmethod
    def _known_families(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [f for f in v if f not in FAMILIES]
        if unknown or not v or len(set(v)) != len(v):
            raise ValueError(f"families must be distinct names among {', '.join(FAMILIES)} (at least one), "
                             f"got {list(v)}")
        return v

    @model_validator(mode="after")
    def _repeats_of_trained_families(self) -> SFTParams:
        bad = {f: n for f, n in self.repeats.items() if f not in self.families or not 1 <= n <= 1000}
        if bad:
            raise ValueError(f"repeats must map families of `families` ({', '.join(self.families)}) to 1..1000; "
                             f"got {bad}")
        return self


class EvalParams(Section):
    """Post-SFT evaluation (``reports/sft.json``): DGEMM kernels sampled and benchmarked, task families greedy.

    DGEMM kernels are benchmarked at their problem's n (the size the prompt asks for) with ``bench.short_timing``
    (``BenchParams.for_many``): short timings, so a rough figure per kernel, comparable between models.
    """

    @model_validator(mode="before")
    @classmethod
    def _removed(cls, data: Any) -> Any:
        return refuse_removed(data, "evaluate", {"bench_n": REMOVED_BENCH_N})

    seed: int = Field(1234, ge=0, le=2**32 - 1)
    samples_per_problem: int = Field(4, ge=1, le=256)  # k kernels sampled per held-out DGEMM problem
    max_problems: int = Field(80, ge=1, le=100_000)  # first this many of data/dgemm/problems_eval.jsonl
    temperature: float = Field(0.2, ge=0, le=5)  # DGEMM sampling; 0 = greedy (then k > 1 repeats one kernel)
    dgemm_max_new_tokens: int = Field(600, ge=1, le=65_536)
    # every DGEMM answer opens with the code fence the prompt asks for ("```c" and a newline), given instead of sampled
    # (counted within dgemm_max_new_tokens): a kernel is then measured even when the policy would open with other
    # families' text; rl_dgemm.fence_given does the same in RL (docs/sqd.md)
    dgemm_fence_given: bool = True
    # each DGEMM answer's plan line is held to the corpus's ("corpus") or to their fields recombined within a kind
    # ("fields"; data/dgemm/corpus.plan_openings, evaluation/openings.py); the code after it is free
    dgemm_plan_vocabulary: PlanVocabulary = "corpus"
    qa_max_new_tokens: int = Field(128, ge=1, le=65_536)  # race, MLPerf and PLP answers (always greedy)
    batch_size: int = Field(8, ge=1, le=4096)  # prompts per generate() call
    max_items_per_family: int = Field(300, ge=1, le=1_000_000)  # first this many of data/<family>/eval.jsonl
