"""Sections ``bench`` (the DGEMM benchmark engine) and ``reward`` (the reward ladder) of params.yaml.

Test: ``pytest tests/test_config.py``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from hpcrl_core.config.base import Section


class VerifyParams(Section):
    small_n: int = Field(13, ge=1, le=256)
    tolerance: float = Field(4.0, gt=0, le=1e6)
    freivalds_vectors: int = Field(2, ge=1, le=8)


class TimingParams(Section):
    warmup_calls: int = Field(1, ge=0, le=100)
    min_reps: int = Field(5, ge=3, le=10_000)
    max_reps: int = Field(200, ge=3, le=100_000)
    min_time_s: float = Field(0.3, gt=0, le=600)
    max_time_s: float = Field(5.0, gt=0, le=3600)
    quantile: float = Field(0.1, ge=0, le=0.5)  # GFLOPS from this quantile of the call times (docs/bench.md)
    # a call counts as made at full host speed when its probe is within this of the node's best: a quiet run's
    # median probe sits ~7% above the best here, the host's slow phases 20-80%
    probe_tolerance: float = Field(0.10, gt=0, le=1)
    # a run whose full-speed calls are fewer than this share of its calls is disturbed (its figure is still theirs)
    min_clean_share: float = Field(0.25, ge=0, le=1)
    max_foreign_load: float = Field(0.10, ge=0, le=1)
    disturbed_retries: int = Field(2, ge=0, le=10)
    # a figure is the best of this many runs in fresh processes, apart in time (the executor queues each next run
    # behind the waiting work): one slow phase of a shared host rarely covers them all (docs/bench.md)
    fresh_runs: int = Field(2, ge=1, le=10)

    @model_validator(mode="after")
    def _ordered(self) -> TimingParams:
        if self.max_reps < self.min_reps:
            raise ValueError(f"max_reps ({self.max_reps}) must be >= min_reps ({self.min_reps})")
        if self.max_time_s < self.min_time_s:
            raise ValueError(f"max_time_s ({self.max_time_s}) must be >= min_time_s ({self.min_time_s})")
        return self


class SandboxParams(Section):
    memory_mb: int = Field(2048, ge=64, le=1_048_576)
    cpu_s: int = Field(120, ge=1, le=86_400)
    file_mb: int = Field(1, ge=0, le=1024)
    open_files: int = Field(64, ge=8, le=4096)
    processes: int = Field(256, ge=8, le=65_536)
    namespaces: bool = True
    user: str = "nobody"


class ExecutorParams(Section):
    cores_per_slot: int = Field(1, ge=1, le=1024)
    cores: tuple[int, ...] = ()

    @field_validator("cores")
    @classmethod
    def _distinct(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if len(set(v)) != len(v) or any(c < 0 for c in v):
            raise ValueError(f"cores must be distinct non-negative CPU numbers, got {list(v)}")
        return v


class BenchParams(Section):
    n: int = Field(512, ge=16, le=8192)
    compiler: str = Field("gcc", min_length=1)
    cflags: tuple[str, ...] = ("-O3", "-march=native", "-fopenmp")
    max_code_bytes: int = Field(65_536, ge=256, le=4_194_304)
    compile_timeout_s: float = Field(30.0, gt=0, le=3600)
    run_timeout_s: float = Field(60.0, gt=0, le=86_400)
    verify: VerifyParams = VerifyParams()
    timing: TimingParams = TimingParams()
    # corpus, rewards and evaluation time many kernels: fewer and shorter calls (hpcrl_core/data/families.py)
    short_timing: TimingParams = TimingParams(min_reps=3, min_time_s=0.05, max_time_s=0.5, disturbed_retries=0)
    sandbox: SandboxParams = SandboxParams()
    executor: ExecutorParams = ExecutorParams()
    cache: bool = True

    def for_many(self, n: int | None = None) -> BenchParams:
        """These settings with ``short_timing`` (and size ``n`` as the engine's default, else ``n`` as it is): for
        the corpus, rewards and evaluation, which time many kernels, each at its own size (``hpcrl bench`` uses
        ``timing``)."""
        return self.model_copy(update={"n": self.n if n is None else n, "timing": self.short_timing})

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


class RewardParams(Section):
    format_violation: float = -100.0
    compile_error: float = -40.0
    timeout: float = -30.0
    runtime_error: float = -20.0
    wrong_result: float = -10.0
    mode: RewardMode = "relative"
    reference: ReferenceKind = "numpy"
    scale: float = Field(100.0, gt=0)
    reference_ttl_s: float = Field(900.0, gt=0)
    # a kernel its GRPO group of G wrote c times pays this * (c - 1) / (G - 1) per copy (rewards/diversity.py)
    duplicate_penalty: float = Field(10.0, ge=0, allow_inf_nan=False)
    # sharing levels speeds but never lets a copy of a faster kernel score below a slower one (rewards/diversity.py)
    duplicate_keeps_order: bool = False
