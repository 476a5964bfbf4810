"""``dgemm_gflops``: the DGEMM benchmark reward of Mikasa et al. (2026) as a TRL reward function.

Each completion is a C kernel (a plain string, or TRL's conversational form ``[{"role": "assistant", "content":
...}]``). It is benchmarked at ``rl_dgemm.bench_n`` and its result shaped by the reward ladder (``reward``
section: penalties, mode, scale; the reference GFLOPS at that size when the mode is relative). A kernel that
uses a technique outside its problem's permitted set (dataset column ``permitted``) gets the
``format_violation`` penalty whatever its status: a forbidden technique must never pay better than a permitted
one, so a wrong or crashing kernel with a forbidden technique is no better off than a correct one.

Concurrency: a call submits every distinct completion of the batch to the executor at once (identical texts
once; the executor further shares in-flight runs of the same normalised code and answers finished ones from its
cache), then asks for the reference figure (which queues on a slot beside the kernels when it is stale), then
waits for all results. The executor runs the jobs in parallel on its exclusive core slots. The call is
synchronous: the trainer waits for the whole batch, as GRPO needs every reward of a group before it can compute
advantages. A ``BenchInfraError`` from any job (or from the reference) propagates out of the call; it never
becomes a reward.

Logged every call through TRL's ``log_metric`` (when given), see ``BatchStats.metrics``; the last batch's stats
are kept on ``last_stats`` for benchmark scripts; the context's observer gets every scored batch.

Test: ``pytest tests/rewards/test_dgemm_reward.py tests/rewards/test_registry.py``.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from hpcrl_core.bench.result import BenchResult, Status
from hpcrl_core.bench.techniques.technique import parse_techniques
from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.rewards.completions import completion_text
from hpcrl_core.rewards.ladder import needs_reference, penalty, shape_reward
from hpcrl_core.rewards.registry import BenchExecutor, RewardContext, register_reward

NAME = "dgemm_gflops"
VIOLATION = "technique_violation"  # the outcome of a kernel that uses a technique its problem does not permit
# keyword arguments TRL adds beside the dataset columns; not passed on to the observer
_TRAINER_KWARGS = frozenset({"prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric",
                             "environments"})


def permitted_sets(permitted: Sequence[Any] | None, count: int) -> list[frozenset[str]]:
    """Validate the ``permitted`` column: one list of technique names per completion.

    Raises:
        ConfigError: the column is missing or not aligned with the completions.
        DataError: an entry is not a list of known technique names.
    """
    if permitted is None:
        raise ConfigError(f"reward {NAME} needs the dataset column 'permitted' (the technique names each problem "
                          "permits, e.g. ['openmp']); add it to the RL dataset, an empty list where none are")
    if isinstance(permitted, str) or len(permitted) != count:
        got = "a string" if isinstance(permitted, str) else f"{len(permitted)} entries"
        raise ConfigError(f"reward {NAME}: column 'permitted' must hold one entry per completion; got {got} for "
                          f"{count} completions")
    out = []
    for i, entry in enumerate(permitted):
        if entry is None or isinstance(entry, str | bytes) or not isinstance(entry, Iterable):
            raise DataError(f"reward {NAME}: permitted[{i}] is {entry!r}; it must be a list of technique names")
        try:
            out.append(frozenset(t.value for t in parse_techniques(entry)))
        except ValueError as err:
            raise DataError(f"reward {NAME}: permitted[{i}]: {err}") from None
    return out


def violates(result: BenchResult, permitted: Iterable[str]) -> bool:
    """Whether the kernel uses a technique (detected by the engine's screen) that is not permitted."""
    return not result.respects(permitted)


@dataclass(frozen=True)
class BatchStats:
    """Components of one scored batch.

    Attributes:
        outcomes: per completion: ``technique_violation`` for a kernel using a forbidden technique, else its
            status (``ok``, ``wrong_result``, ...).
        gflops: GFLOPS of the kernels whose outcome is ``ok`` (verified and permitted), in batch order.
        cache_hits: completions answered from the result cache.
        runs: engine runs this batch started (distinct kernels not in the cache).
        bench_s: wall seconds from the first submit to the last result.
        reference_gflops: the reference figure used, or None when the mode needs none.
        disturbed: results whose figure the engine flagged as disturbed (a busy host or foreign load): used, but
            measured again when the same kernel comes back (up to three times).
    """

    outcomes: tuple[str, ...]
    gflops: tuple[float, ...]
    cache_hits: int
    runs: int
    bench_s: float
    reference_gflops: float | None
    disturbed: int = 0

    def metrics(self) -> dict[str, float]:
        """Scalars for ``log_metric``: ``reward/status/<outcome>`` shares (every status and
        ``technique_violation``; they sum to 1), ``reward/gflops_{mean,median,max}`` (0 when none is ok),
        ``reward/cache_hit_share``, ``reward/disturbed_share``, ``reward/runs``, ``reward/bench_s`` and, when
        used, ``reward/reference_gflops``."""
        total = max(len(self.outcomes), 1)
        out = {f"reward/status/{s}": self.outcomes.count(s) / total for s in [*(x.value for x in Status), VIOLATION]}
        g = self.gflops
        out.update({"reward/gflops_mean": statistics.fmean(g) if g else 0.0,
                    "reward/gflops_median": statistics.median(g) if g else 0.0,
                    "reward/gflops_max": max(g) if g else 0.0,
                    "reward/cache_hit_share": self.cache_hits / total,
                    "reward/disturbed_share": self.disturbed / total, "reward/runs": float(self.runs),
                    "reward/bench_s": self.bench_s})
        if self.reference_gflops is not None:
            out["reward/reference_gflops"] = self.reference_gflops
        return out


class DgemmGflopsReward:
    """The ``dgemm_gflops`` reward function (see the module docstring). Call it as TRL does."""

    def __init__(self, ctx: RewardContext) -> None:
        """Raises ``ConfigError`` when the context has no benchmark executor, or the mode needs a reference the
        context lacks or has of another kind."""
        self.__name__ = NAME  # TRL names the reward in its logs by this
        if ctx.executor is None:
            raise ConfigError(f"reward {NAME} benchmarks every kernel but its RewardContext has no executor "
                              "(received executor=None); build it with one, e.g. RewardContext(params, "
                              "LocalExecutor(engine, cache, cores=...)), as hpcrl_core/training/rl.py does")
        self.executor: BenchExecutor = ctx.executor
        self.ctx = ctx
        self.n = ctx.params.rl_dgemm.bench_n
        reward = ctx.params.reward
        if needs_reference(reward):
            # the agents backend attaches to each result the reference of the node that timed it
            per_node = getattr(ctx.executor, "node_reference", None) == reward.reference
            if ctx.reference is None and not per_node:
                raise ConfigError(f"reward.mode {reward.mode!r} needs a reference figure but the reward context has "
                                  "none; build a ReferenceTracker(executor, reward.reference, reward.reference_ttl_s) "
                                  "or set reward.mode: gflops")
            if ctx.reference is not None and ctx.reference.kind != reward.reference:
                raise ConfigError(f"reward.reference is {reward.reference!r} but the context's reference tracker "
                                  f"measures {ctx.reference.kind!r}; build the tracker with reward.reference")
        self.last_stats: BatchStats | None = None

    def __call__(self, completions: Sequence[Any], permitted: Sequence[Any] | None = None,
                 log_metric: Callable[[str, float], None] | None = None,
                 log_extra: Callable[[str, list[Any]], None] | None = None, **kwargs: Any) -> list[float]:
        """Rewards of a batch, one float per completion, in order.

        Args:
            completions: B completions (strings or conversational message lists).
            permitted: B lists of the technique names each completion's problem permits.
            log_metric: TRL's scalar logger, or None.
            log_extra: TRL's per-completion column logger, or None.
            **kwargs: further dataset columns (``problem_id``, ...) and TRL arguments; passed to the observer.

        Raises:
            ConfigError: ``permitted`` missing or misaligned.
            DataError: a ``permitted`` entry names an unknown technique.
            BenchInfraError: the benchmark machinery failed.
        """
        texts = [completion_text(c) for c in completions]
        allowed = permitted_sets(permitted, len(texts))
        results, partial = self._benchmark(texts)
        scored = [self._score(r, a, r.extra.get("node_reference_gflops", partial.reference_gflops))
                  for r, a in zip(results, allowed, strict=True)]
        rewards = [reward for reward, _ in scored]
        outcomes = tuple(outcome for _, outcome in scored)
        gflops = tuple(float(r.gflops or 0.0) for r, (_, o) in zip(results, scored, strict=True) if o == "ok")
        stats = self.last_stats = dataclasses.replace(partial, outcomes=outcomes, gflops=gflops)
        if log_metric is not None:
            for name, value in stats.metrics().items():
                log_metric(name, value)
        if log_extra is not None:
            log_extra("bench_status", list(outcomes))
            log_extra("gflops", [r.gflops for r in results])
        if self.ctx.observer is not None:
            columns = {k: v for k, v in kwargs.items() if k not in _TRAINER_KWARGS}
            self.ctx.observer(texts, results, rewards, {**columns, "permitted": list(permitted or [])})
        return rewards

    def _score(self, result: BenchResult, allowed: frozenset[str], reference: float | None) -> tuple[float, str]:
        """The reward and outcome (status, or ``technique_violation``) of one result."""
        if violates(result, allowed):
            return penalty(Status.FORMAT_VIOLATION, self.ctx.params.reward), VIOLATION
        return shape_reward(result, self.ctx.params.reward, reference), result.status.value

    def _benchmark(self, texts: Sequence[str]) -> tuple[list[BenchResult], BatchStats]:
        """Submit every distinct text, fetch the reference meanwhile, then gather.

        Returns:
            The results in batch order, and the batch's stats without outcomes and GFLOPS (the caller's part).
        """
        t0 = time.monotonic()
        futures: dict[str, Future[BenchResult]] = {}
        for text in texts:  # every job is queued before any result is awaited: the batch runs concurrently
            if text not in futures:
                futures[text] = self.executor.submit(text, self.n)
        reference = None
        if self.ctx.reference is not None and needs_reference(self.ctx.params.reward):
            reference = self.ctx.reference.gflops(self.n)  # cheap when fresh; else measured on a free slot
        results = [futures[t].result() for t in texts]  # re-raises a BenchInfraError of any job
        node_refs = [float(r.extra["node_reference_gflops"]) for r in results if "node_reference_gflops" in r.extra]
        if reference is None and node_refs:  # logged: the median of the figures of the nodes that timed the batch
            reference = statistics.median(node_refs)
        bench_s = time.monotonic() - t0
        # one engine run per distinct future: the executor hands identical in-flight kernels the same future
        runs = len({id(f) for f in futures.values() if not f.result().cached})
        hits = sum(r.cached for r in results)
        disturbed = sum(r.disturbed for r in results)
        return results, BatchStats((), (), hits, runs, bench_s, reference, disturbed)


@register_reward(NAME)
def dgemm_gflops(ctx: RewardContext) -> DgemmGflopsReward:
    """Factory of the ``dgemm_gflops`` reward function."""
    return DgemmGflopsReward(ctx)
