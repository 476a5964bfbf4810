"""Configuration: pydantic models of ``params.yaml`` (what changes results) and ``Settings`` (where and how).

One model per params.yaml section; every model is frozen and forbids unknown keys, so a typo is an error and not
a silently ignored knob. ``load_params`` turns every validation problem into one line that names the key path,
the value received and what is allowed, and raises ``ConfigError`` with all of them at once.

Run: ``hpcrl config check [PATH]``.  Test: ``pytest tests/test_config.py``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from hpcrl_core.data.schema import FAMILIES
from hpcrl_core.errors import ConfigError

DEFAULT_PARAMS = Path("params.yaml")


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class VerifyParams(_Section):
    small_n: int = Field(13, ge=1, le=256)
    tolerance: float = Field(4.0, gt=0, le=1e6)
    freivalds_vectors: int = Field(2, ge=1, le=8)


class TimingParams(_Section):
    warmup_calls: int = Field(1, ge=0, le=100)
    min_reps: int = Field(5, ge=3, le=10_000)
    max_reps: int = Field(200, ge=3, le=100_000)
    min_time_s: float = Field(0.3, gt=0, le=600)
    max_time_s: float = Field(5.0, gt=0, le=3600)
    max_foreign_load: float = Field(0.10, ge=0, le=1)
    disturbed_retries: int = Field(2, ge=0, le=10)

    @model_validator(mode="after")
    def _ordered(self) -> TimingParams:
        if self.max_reps < self.min_reps:
            raise ValueError(f"max_reps ({self.max_reps}) must be >= min_reps ({self.min_reps})")
        if self.max_time_s < self.min_time_s:
            raise ValueError(f"max_time_s ({self.max_time_s}) must be >= min_time_s ({self.min_time_s})")
        return self


class SandboxParams(_Section):
    memory_mb: int = Field(2048, ge=64, le=1_048_576)
    cpu_s: int = Field(120, ge=1, le=86_400)
    file_mb: int = Field(1, ge=0, le=1024)
    open_files: int = Field(64, ge=8, le=4096)
    processes: int = Field(256, ge=8, le=65_536)
    namespaces: bool = True
    user: str = "nobody"


class ExecutorParams(_Section):
    cores_per_slot: int = Field(1, ge=1, le=1024)
    cores: tuple[int, ...] = ()

    @field_validator("cores")
    @classmethod
    def _distinct(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if len(set(v)) != len(v) or any(c < 0 for c in v):
            raise ValueError(f"cores must be distinct non-negative CPU numbers, got {list(v)}")
        return v


class BenchParams(_Section):
    n: int = Field(512, ge=16, le=8192)
    compiler: str = Field("gcc", min_length=1)
    cflags: tuple[str, ...] = ("-O3", "-march=native", "-fopenmp")
    max_code_bytes: int = Field(65_536, ge=256, le=4_194_304)
    compile_timeout_s: float = Field(30.0, gt=0, le=3600)
    run_timeout_s: float = Field(60.0, gt=0, le=86_400)
    verify: VerifyParams = VerifyParams()
    timing: TimingParams = TimingParams()
    sandbox: SandboxParams = SandboxParams()
    executor: ExecutorParams = ExecutorParams()
    cache: bool = True

    @field_validator("cflags")
    @classmethod
    def _safe_flags(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        # Flags that change what gets linked or where output goes would bypass the link-level screen.
        bad = [f for f in v if f.startswith(("-l", "-L", "-o", "-Wl", "-B", "-specs", "-fplugin", "-include", "-I"))]
        if bad:
            raise ValueError(f"cflags may not change linking, include paths or outputs; remove {bad}")
        return v


RewardMode = Literal["gflops", "relative", "log_speedup"]
ReferenceKind = Literal["numpy", "best_kernel", "naive"]


class RewardParams(_Section):
    format_violation: float = -100.0
    compile_error: float = -40.0
    timeout: float = -30.0
    runtime_error: float = -20.0
    wrong_result: float = -10.0
    mode: RewardMode = "relative"
    reference: ReferenceKind = "numpy"
    scale: float = Field(10.0, gt=0)
    reference_ttl_s: float = Field(900.0, gt=0)


SOURCE_KINDS: dict[str, tuple[str, ...]] = {
    "race_c": ("synthetic", "hpcgpt", "dataracebench"),
    "race_fortran": ("synthetic", "hpcgpt", "dataracebench"),
    "mlperf": ("synthetic", "hpcgpt"),
    "plp": ("synthetic", "hpcgpt"),
}


def _default_sources() -> dict[str, tuple[str, ...]]:
    synthetic: tuple[str, ...] = ("synthetic",)
    return dict.fromkeys(SOURCE_KINDS, synthetic)


class DgemmPrepParams(_Section):
    train_problems: int = Field(960, ge=1, le=100_000)
    eval_problems: int = Field(40, ge=1, le=10_000)
    variants: int = Field(320, ge=1, le=100_000)  # kernel variants generated and benchmarked for the corpus
    bench_n: int = Field(256, ge=16, le=4096)  # size at which corpus kernels are verified and timed
    per_kernel: int = Field(3, ge=1, le=100)  # train prompts each verified kernel is paired with


class RacePrepParams(_Section):
    per_pattern: int = Field(12, ge=1, le=10_000)  # synthetic items per (pattern, label)
    tsan: bool = True  # run C items under ThreadSanitizer and report agreement in the card


class QAPrepParams(_Section):
    paraphrases: int = Field(3, ge=1, le=20)  # question templates used per fact
    # "phrasing": eval asks facts seen in training in words never seen (does SFT inject the fact?);
    # "fact": eval asks facts never seen in training (only answerable by a model that knew them before)
    hold_out: Literal["phrasing", "fact"] = "phrasing"


class PrepareParams(_Section):
    seed: int = 1234
    eval_fraction: float = Field(0.1, gt=0, lt=1)
    sources: dict[str, tuple[str, ...]] = Field(default_factory=lambda: _default_sources())
    dgemm: DgemmPrepParams = DgemmPrepParams()
    race: RacePrepParams = RacePrepParams()
    mlperf: QAPrepParams = QAPrepParams()
    plp: QAPrepParams = QAPrepParams()

    @field_validator("sources")
    @classmethod
    def _known_sources(cls, v: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        problems = []
        for family, specs in v.items():
            if family not in SOURCE_KINDS:
                problems.append(f"unknown family {family!r} (allowed: {', '.join(SOURCE_KINDS)})")
                continue
            if not specs:
                problems.append(f"{family}: give at least one source")
            for spec in specs:
                kind, _, path = spec.partition(":")
                if kind not in SOURCE_KINDS[family]:
                    allowed = ", ".join(k if k == "synthetic" else k + ":PATH" for k in SOURCE_KINDS[family])
                    problems.append(f"{family}: source {spec!r} has kind {kind!r}; allowed: {allowed}")
                elif (kind == "synthetic") == bool(path):
                    problems.append(f"{family}: source {spec!r}: 'synthetic' takes no path, other kinds need one")
        if problems:
            raise ValueError("; ".join(problems))
        return v


QWEN2_LINEAR_MODULES: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class TinyModelParams(_Section):
    """Our own Qwen2-architecture model, trained from scratch (``model.source: tiny``)."""

    hidden_size: int = Field(256, ge=8, le=16_384)
    num_layers: int = Field(4, ge=1, le=256)
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


class TokenizerParams(_Section):
    """The tiny model's tokenizer: trained on ``data/`` unless ``path`` names a saved one."""

    vocab_size: int = Field(4096, ge=300, le=1_000_000)
    min_frequency: int = Field(2, ge=1, le=1_000_000)
    path: str | None = None  # a folder written by save_tokenizer; None = train one on data/*/train.jsonl


class HFModelParams(_Section):
    """A pretrained causal LM from a local folder (``model.source: hf``); these machines reach no hub."""

    path: str | None = None  # a folder holding config.json, the weights and the tokenizer
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    trust_remote_code: bool = False


class LoraParams(_Section):
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


class ModelParams(_Section):
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


class SFTParams(_Section):
    """Supervised fine-tuning (``dvc repro sft``): TRL's SFTTrainer on the prepared prompt-completion records.

    Defaults fit the tiny model trained from scratch (see ENVIRONMENT.md: AdamW 1e-3, warmup + cosine, batch 16,
    train to a per-token loss near 0.01). ``trl`` passes further SFTConfig options through, checked by name when
    the trainer is assembled.
    """

    seed: int = Field(1234, ge=0, le=2**32 - 1)
    max_steps: int = Field(1500, ge=1, le=10_000_000)
    learning_rate: float = Field(1e-3, gt=0, le=1)
    lr_scheduler_type: LrScheduler = "cosine"
    warmup_ratio: float = Field(0.05, ge=0, lt=1)  # share of max_steps spent warming up linearly
    weight_decay: float = Field(0.0, ge=0, le=1)
    per_device_train_batch_size: int = Field(16, ge=1, le=4096)
    per_device_eval_batch_size: int = Field(16, ge=1, le=4096)
    gradient_accumulation_steps: int = Field(1, ge=1, le=4096)
    max_length: int = Field(512, ge=16, le=1_048_576)  # tokens of prompt + completion; must fit the longest record
    eval_steps: int = Field(100, ge=1, le=10_000_000)
    save_steps: int = Field(100, ge=1, le=10_000_000)
    save_total_limit: int = Field(3, ge=1, le=1000)
    logging_steps: int = Field(10, ge=1, le=10_000_000)
    families: tuple[str, ...] = FAMILIES
    trl: dict[str, Any] = Field(default_factory=dict)  # extra SFTConfig options, e.g. {max_grad_norm: 0.5}

    @field_validator("families")
    @classmethod
    def _known_families(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [f for f in v if f not in FAMILIES]
        if unknown or not v or len(set(v)) != len(v):
            raise ValueError(f"families must be distinct names among {', '.join(FAMILIES)} (at least one), "
                             f"got {list(v)}")
        return v


class EvalParams(_Section):
    """Post-SFT evaluation (``reports/sft.json``): DGEMM kernels sampled and benchmarked, task families greedy.

    DGEMM kernels are benchmarked at ``bench_n`` with short timing (``corpus_bench_params``), not at ``bench.n``:
    the GFLOPS are a rough comparison between models, not a measurement of the kernels at their problem size.
    """

    seed: int = Field(1234, ge=0, le=2**32 - 1)
    samples_per_problem: int = Field(4, ge=1, le=256)  # k kernels sampled per held-out DGEMM problem
    max_problems: int = Field(40, ge=1, le=100_000)  # first this many of data/dgemm/problems_eval.jsonl
    temperature: float = Field(0.8, ge=0, le=5)  # DGEMM sampling; 0 = greedy (then k > 1 repeats one kernel)
    dgemm_max_new_tokens: int = Field(600, ge=1, le=65_536)
    qa_max_new_tokens: int = Field(128, ge=1, le=65_536)  # race, MLPerf and PLP answers (always greedy)
    batch_size: int = Field(8, ge=1, le=4096)  # prompts per generate() call
    bench_n: int = Field(256, ge=16, le=4096)  # matrix size at which sampled kernels are verified and timed
    max_items_per_family: int = Field(200, ge=1, le=1_000_000)  # first this many of data/<family>/eval.jsonl


class Params(_Section):
    bench: BenchParams = BenchParams()
    reward: RewardParams = RewardParams()
    prepare: PrepareParams = PrepareParams()
    model: ModelParams = ModelParams()
    sft: SFTParams = SFTParams()
    evaluate: EvalParams = EvalParams()


class Settings(BaseSettings):
    """Where and how: folders and endpoints, from ``HPCRL_*`` environment variables."""

    model_config = SettingsConfigDict(env_prefix="HPCRL_", frozen=True, extra="ignore")

    cache_dir: Path = Path(".hpcrl/cache")
    scratch_dir: Path = Path(tempfile.gettempdir()) / "hpcrl-scratch"


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
