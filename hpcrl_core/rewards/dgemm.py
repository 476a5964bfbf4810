"""``dgemm_gflops``: the DGEMM benchmark reward of Mikasa et al. (2026) as a TRL reward function.

Each completion is a C kernel (a plain string, or TRL's conversational form ``[{"role": "assistant", "content":
...}]``). It is benchmarked at its problem's size (dataset column ``n``: the n its prompt asks for) and its result
shaped by the reward ladder (``reward`` section: penalties, mode, scale; the reference GFLOPS at that same size when
the mode is relative). A kernel that
uses a technique outside its problem's permitted set (dataset column ``permitted``) gets the
``format_violation`` penalty whatever its status: a forbidden technique must never pay better than a permitted
one, so a wrong or crashing kernel with a forbidden technique is no better off than a correct one.

Concurrency: a call submits every distinct completion of the batch to the executor at once (identical texts
and size once; the executor further shares in-flight runs of the same normalised code and answers finished ones from
its cache), then asks for the reference figure of each size in the batch (which queues on a slot beside the kernels
when it is stale), then
waits for all results. The executor runs the jobs in parallel on its exclusive core slots. The call is
synchronous: the trainer waits for the whole batch, as GRPO needs every reward of a group before it can compute
advantages. A ``BenchInfraError`` from any job (or from the reference) propagates out of the call; it never
becomes a reward.

With ``reward.duplicate_penalty`` > 0 the rewards TRL gets are shared among copies of one kernel in a GRPO group
(``diversity.py``; logged as ``reward/duplicate_penalty_mean``); the observer sees the rewards before sharing.

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

from hpcrl_core.bench.extract import kernel_identity
from hpcrl_core.bench.result import BenchResult, Status, node_references
from hpcrl_core.bench.techniques.technique import parse_techniques
from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.rewards.completions import completion_text
from hpcrl_core.rewards.diversity import share_duplicates
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


def problem_sizes(n: Sequence[Any] | None, count: int) -> list[int]:
    """Validate the ``n`` column: the matrix size each completion's prompt asks for, at which it is timed.

    Raises:
        ConfigError: the column is missing or not aligned with the completions.
        DataError: an entry is not a whole number >= 1.
    """
    if n is None:
        raise ConfigError(f"reward {NAME} needs the dataset column 'n' (the matrix size each prompt asks for, at "
                          "which its kernel is timed); add it to the RL dataset as hpcrl_core/training/rl.py does")
    if isinstance(n, str | bytes) or len(n) != count:
        got = "a string" if isinstance(n, str | bytes) else f"{len(n)} entries"
        raise ConfigError(f"reward {NAME}: column 'n' must hold one size per completion; got {got} for {count} "
                          "completions")
    out = []
    for i, size in enumerate(n):
        if isinstance(size, bool) or not isinstance(size, int | float) or size != int(size) or size < 1:
            raise DataError(f"reward {NAME}: n[{i}] is {size!r}; it must be a matrix size, a whole number >= 1")
        out.append(int(size))
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
        reference_gflops: the reference figure used (the median over the batch's completions when they ask for
            different sizes, each scored against its own size's figure), or None when the mode needs none.
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
                 n: Sequence[Any] | None = None, log_metric: Callable[[str, float], None] | None = None,
                 log_extra: Callable[[str, list[Any]], None] | None = None, **kwargs: Any) -> list[float]:
        """Rewards of a batch, one float per completion, in order.

        Args:
            completions: B completions (strings or conversational message lists).
            permitted: B lists of the technique names each completion's problem permits.
            n: B matrix sizes, the size each completion's prompt asks for; its kernel is timed there.
            log_metric: TRL's scalar logger, or None.
            log_extra: TRL's per-completion column logger, or None.
            **kwargs: further dataset columns (``problem_id``, ...) and TRL arguments; passed to the observer.

        Raises:
            ConfigError: ``permitted`` or ``n`` missing or misaligned.
            DataError: a ``permitted`` entry names an unknown technique, or an ``n`` entry is not a size.
            BenchInfraError: the benchmark machinery failed.
        """
        texts = [completion_text(c) for c in completions]
        allowed = permitted_sets(permitted, len(texts))
        sizes = problem_sizes(n, len(texts))
        results, references, partial = self._benchmark(texts, sizes)
        scored = [self._score(r, a, ref) for r, a, ref in zip(results, allowed, references, strict=True)]
        rewards = [reward for reward, _ in scored]
        outcomes = tuple(outcome for _, outcome in scored)
        gflops = tuple(float(r.gflops or 0.0) for r, (_, o) in zip(results, scored, strict=True) if o == "ok")
        stats = self.last_stats = dataclasses.replace(partial, outcomes=outcomes, gflops=gflops)
        shaped = self._share(texts, rewards)
        if log_metric is not None:
            for name, value in stats.metrics().items():
                log_metric(name, value)
            if shaped is not rewards:
                log_metric("reward/duplicate_penalty_mean", statistics.fmean(
                    r - s for r, s in zip(rewards, shaped, strict=True)))
        if log_extra is not None:
            log_extra("bench_status", list(outcomes))
            log_extra("gflops", [r.gflops for r in results])
        if self.ctx.observer is not None:
            columns = {k: v for k, v in kwargs.items() if k not in _TRAINER_KWARGS}
            self.ctx.observer(texts, results, rewards, {**columns, "permitted": list(permitted or []), "n": sizes})
        return shaped

    def _share(self, texts: Sequence[str], rewards: list[float]) -> list[float]:
        """The rewards TRL gets: ``rewards`` itself without duplicate sharing, else shared within each group
        (``reward.duplicate_penalty``; the curriculum and archive still see the unshared rewards)."""
        penalty = self.ctx.params.reward.duplicate_penalty
        if penalty == 0:
            return rewards
        if self.ctx.group_size is None:
            raise ConfigError(f"reward.duplicate_penalty is {penalty} but the reward context has no group_size; "
                              "build RewardContext(..., group_size=num_generations), as hpcrl_core/training/rl.py "
                              "does, or set reward.duplicate_penalty: 0")
        keys = [kernel_identity(t) for t in texts]
        return share_duplicates(keys, rewards, self.ctx.group_size, penalty,
                                keep_order=self.ctx.params.reward.duplicate_keeps_order)

    def _score(self, result: BenchResult, allowed: frozenset[str], reference: float | None) -> tuple[float, str]:
        """The reward and outcome (status, or ``technique_violation``) of one result."""
        if violates(result, allowed):
            return penalty(Status.FORMAT_VIOLATION, self.ctx.params.reward), VIOLATION
        return shape_reward(result, self.ctx.params.reward, reference), result.status.value

    def _benchmark(self, texts: Sequence[str],
                   sizes: Sequence[int]) -> tuple[list[BenchResult], list[float | None], BatchStats]:
        """Submit every distinct (text, size), fetch the references meanwhile, then gather.

        Returns:
            The results in batch order, each completion's reference figure (its timing node's at its size on agents,
            else the tracker's at its size; None when the mode needs none), and the batch's stats without outcomes
            and GFLOPS (the caller's part).
        """
        t0 = time.monotonic()
        futures: dict[tuple[str, int], Future[BenchResult]] = {}
        for job in zip(texts, sizes, strict=True):  # every job is queued before any result is awaited
            if job not in futures:
                futures[job] = self.executor.submit(*job)
        tracked: dict[int, float] = {}
        if self.ctx.reference is not None and needs_reference(self.ctx.params.reward):
            # cheap when fresh; else measured on a free slot
            tracked = {n: self.ctx.reference.gflops(n) for n in dict.fromkeys(sizes)}
        results = [futures[job].result() for job in zip(texts, sizes, strict=True)]  # re-raises a BenchInfraError
        # a result without its node's figure (agents attach it to verified kernels) takes the tracker's at its size,
        # else the median of the nodes' figures at that size
        fallback = node_references(results) | tracked
        references = [r.reference(fallback) for r in results]
        known = [ref for ref in references if ref is not None]
        bench_s = time.monotonic() - t0
        # one engine run per distinct future: the executor hands identical in-flight kernels the same future
        runs = len({id(f) for f in futures.values() if not f.result().cached})
        hits = sum(r.cached for r in results)
        disturbed = sum(r.disturbed for r in results)
        logged = statistics.median(known) if known else None
        return results, references, BatchStats((), (), hits, runs, bench_s, logged, disturbed)


@register_reward(NAME)
def dgemm_gflops(ctx: RewardContext) -> DgemmGflopsReward:
    """Factory of the ``dgemm_gflops`` reward function."""
    return DgemmGflopsReward(ctx)
