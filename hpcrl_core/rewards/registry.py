"""The ``REWARDS`` registry: reward functions chosen by name (params.yaml ``rl_dgemm.rewards``; the HARGO trainer
builds ``hpc_tasks``).

A registered entry is a factory ``factory(ctx) -> reward function``. The reward function has TRL's signature
(``func(prompts=..., completions=..., completion_ids=..., **columns) -> list[float]``) and a ``__name__`` that
TRL logs it under. ``RewardContext`` holds what a reward may need: the params, a benchmark executor (the DGEMM
reward needs one; the task rewards do not and take ``None``), a reference figure source and an observer the
trainer uses to see every scored batch (SQD curriculum, QD archive).

    @register_reward("my_reward")
    def my_reward(ctx: RewardContext) -> RewardFunc: ...

    reward_fn = get_reward("dgemm_gflops")(RewardContext(params, executor, tracker, observer, group_size=G))
    task_fn = get_reward("hpc_tasks")(RewardContext(params))  # no benchmark behind it

Test: ``pytest tests/rewards/test_registry.py`` (a contract test runs over every registered name).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol

from hpcrl_core.bench.result import BenchResult
from hpcrl_core.config import Params
from hpcrl_core.errors import ConfigError


class BenchExecutor(Protocol):
    """What a reward needs of a benchmark backend; ``LocalExecutor`` is one (a remote-agents backend another).

    ``submit`` must return at once; the future carries the result, or a ``BenchInfraError`` for a fault of the
    machinery.
    """

    def submit(self, completion: str | bytes, n: int | None = None) -> Future[BenchResult]: ...


class ReferenceSource(Protocol):
    """A reference GFLOPS figure per matrix size (``ReferenceTracker``); ``kind`` is ``reward.reference``."""

    kind: str

    def gflops(self, n: int) -> float: ...


# observer(texts, results, rewards, columns): called once per scored batch, all sequences aligned with the
# completions; columns are the dataset columns TRL passed (problem_id, permitted, ...).
RewardObserver = Callable[[Sequence[str], Sequence[BenchResult], Sequence[float], dict[str, Sequence[Any]]], None]
RewardFunc = Callable[..., list[float]]


@dataclass(frozen=True)
class RewardContext:
    """Everything a reward factory may use.

    Attributes:
        params: the validated params.yaml (``dgemm_gflops`` reads ``reward``; the task rewards
            read ``task_reward``).
        executor: the benchmark backend (short timing; each kernel timed at the size it is submitted with); None
            where no reward benchmarks (a reward that needs one raises ``ConfigError`` when built without it).
        reference: source of the reference GFLOPS; required when ``reward.mode`` is relative or log_speedup.
        observer: called with every scored batch by ``dgemm_gflops`` (the task rewards do not call it), or None.
        group_size: G, the completions per prompt the trainer lays out consecutively (TRL's groups); needed by
            ``dgemm_gflops`` only for duplicate sharing (``reward.duplicate_penalty`` > 0).
    """

    params: Params
    executor: BenchExecutor | None = None
    reference: ReferenceSource | None = None
    observer: RewardObserver | None = None
    group_size: int | None = None


RewardFactory = Callable[[RewardContext], RewardFunc]
REWARDS: dict[str, RewardFactory] = {}


def register_reward(name: str) -> Callable[[RewardFactory], RewardFactory]:
    """Decorator that registers a reward factory under ``name``.

    Raises:
        ValueError: the name is already taken (two rewards would silently shadow each other).
    """

    def add(factory: RewardFactory) -> RewardFactory:
        if name in REWARDS:
            raise ValueError(f"reward {name!r} is registered twice ({REWARDS[name]!r} and {factory!r}); "
                             "give the new one another name")
        REWARDS[name] = factory
        return factory

    return add


def get_reward(name: str) -> RewardFactory:
    """The factory registered under ``name``.

    Raises:
        ConfigError: unknown name; the message lists the known ones.
    """
    try:
        return REWARDS[name]
    except KeyError:
        known = ", ".join(sorted(REWARDS)) or "(none)"
        raise ConfigError(f"unknown reward {name!r} (rl_dgemm.rewards, or the name a trainer asks for); known "
                          f"rewards: {known}; use one of them") from None
