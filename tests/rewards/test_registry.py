"""Tests of the REWARDS registry, and one contract test that every registered reward passes.

The contract: called as TRL calls it, a reward returns one finite float per completion, in order, for plain
string and conversational completions alike, ignores dataset columns it does not know, and logs through
``log_metric``. A new reward adds its sample batch to ``SAMPLES``; a sample marked ``bench`` gets a context with a
real benchmark executor (and runs as an integration test), the others a context without one, as their trainers
build them.

Run: pytest tests/rewards/test_registry.py
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import hpcrl_core.rewards.registry as registry
from hpcrl_core.bench.cache import ResultCache
from hpcrl_core.bench.engine import Engine
from hpcrl_core.bench.executor import LocalExecutor
from hpcrl_core.bench.reference import ReferenceTracker
from hpcrl_core.config import parse_params
from hpcrl_core.errors import ConfigError
from hpcrl_core.rewards import REWARDS, RewardContext, get_reward, register_reward

KERNEL = """```c
void dgemm(int n, const double *A, const double *B, double *C) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      double s = 0.0;
      for (int k = 0; k < n; k++) s += A[i*n + k] * B[k*n + j];
      C[i*n + j] = s + 0.0 * 7;
    }
}
```"""

PLP_REF = "CodeSearchNet covers six programming languages: Go, Java, JavaScript, PHP, Python and Ruby."


@dataclass(frozen=True)
class Sample:
    """A contract batch: texts 0 and 1 are the same (good) answer, text 2 a worse one; the dataset columns the
    reward needs; whether it needs a benchmark executor."""

    texts: list[str]
    columns: dict[str, list[Any]]
    bench: bool = False


SAMPLES: dict[str, Sample] = {
    "dgemm_gflops": Sample([KERNEL, KERNEL, "I cannot write C."], {"permitted": [[], [], ["openmp"]], "n": [64] * 3},
                           bench=True),
    "race_verdict": Sample(["yes", "yes", "I think so, yes."], {"family": ["race_c", "race_c", "race_fortran"],
                                                               "answer": ["yes"] * 3}),
    "mlperf_tiered": Sample(["ImageNet", "ImageNet", "COCO"], {"answer": ["ImageNet"] * 3,
                                                               "aliases": [["ImageNet-1k"]] * 3, "partial": [[]] * 3}),
    "plp_similarity": Sample([PLP_REF, PLP_REF, ""], {"answer": [PLP_REF] * 3}),
    "hpc_tasks": Sample([PLP_REF, PLP_REF, "no"], {"family": ["plp", "plp", "race_c"],
                                                   "answer": [PLP_REF, PLP_REF, "yes"],
                                                   "aliases": [[], [], []], "partial": [[], [], []]}),
}


def _cases() -> list[Any]:
    """Every registered name; those that benchmark are integration tests."""
    return [pytest.param(name, marks=pytest.mark.integration) if name in SAMPLES and SAMPLES[name].bench else name
            for name in sorted(REWARDS)]


@pytest.fixture(scope="module")
def executor(engine: Engine, cores: tuple[int, ...], tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[LocalExecutor]:
    cache = ResultCache(Path(tmp_path_factory.mktemp("reward-cache")) / "results.sqlite")
    with LocalExecutor(engine, cache, cores=cores, cores_per_slot=1) as ex:
        yield ex


def test_get_reward_unknown_name_lists_known_ones() -> None:
    with pytest.raises(ConfigError, match="unknown reward 'dgemm_flops'.*dgemm_gflops"):
        get_reward("dgemm_flops")


def test_register_reward_adds_and_refuses_a_taken_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "REWARDS", dict(REWARDS))

    @register_reward("constant")
    def constant(ctx: RewardContext) -> Any:
        return lambda completions, **kw: [0.0] * len(completions)

    assert registry.get_reward("constant") is constant
    with pytest.raises(ValueError, match="registered twice"):
        register_reward("constant")(constant)


def test_every_reward_has_a_contract_sample() -> None:
    assert set(REWARDS) <= set(SAMPLES), f"add a sample batch to SAMPLES for {sorted(set(REWARDS) - set(SAMPLES))}"


@pytest.mark.parametrize("name", _cases())
def test_reward_contract(name: str, request: pytest.FixtureRequest) -> None:
    params = parse_params({"reward": {"mode": "relative", "reference": "naive"}})
    sample = SAMPLES[name]
    if sample.bench:
        executor: LocalExecutor = request.getfixturevalue("executor")
        # the sample as one GRPO group, so the default duplicate sharing applies as in training
        ctx = RewardContext(params, executor, ReferenceTracker(executor, "naive", params.reward.reference_ttl_s),
                            group_size=len(sample.texts))
    else:
        ctx = RewardContext(params)
    fn = get_reward(name)(ctx)
    texts, columns = sample.texts, sample.columns
    # TRL hands chat completions as message lists; the second is the first one, conversational
    completions: list[Any] = [texts[0], [{"role": "assistant", "content": texts[1]}], *texts[2:]]
    metrics: dict[str, float] = {}
    extras: dict[str, list[Any]] = {}
    rewards = fn(prompts=["p"] * len(texts), completions=completions, completion_ids=[[1]] * len(texts),
                 trainer_state=None, log_metric=metrics.__setitem__, log_extra=extras.__setitem__,
                 unknown_column=["x"] * len(texts), **columns)
    assert fn.__name__ == name
    assert len(rewards) == len(texts)
    assert all(isinstance(r, float) and math.isfinite(r) for r in rewards)
    assert rewards[0] == rewards[1], "the same answer as a string and as a message must score the same"
    assert rewards[2] < rewards[0], "a non-answer must score below a correct kernel (order kept)"
    assert metrics and all(isinstance(v, float) and math.isfinite(v) for v in metrics.values())
    assert all(len(v) == len(texts) for v in extras.values())
