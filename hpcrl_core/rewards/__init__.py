"""Reward functions with TRL's signature, chosen by name through the ``REWARDS`` registry.

``ladder.py`` shapes one benchmark result into a reward; ``dgemm.py`` is the ``dgemm_gflops`` reward over the
benchmark engine; ``tasks.py`` the HARGO task rewards (``race_verdict``, ``mlperf_tiered``, ``plp_similarity`` and
the mixed-batch router ``hpc_tasks``); ``completions.py`` reads a completion's text; ``registry.py`` holds
``REWARDS``, ``register_reward`` and ``get_reward``. Importing this package registers every reward.

Test: ``pytest tests/rewards``.
"""

from __future__ import annotations

from hpcrl_core.rewards import dgemm as _dgemm  # noqa: F401  (registers dgemm_gflops)
from hpcrl_core.rewards import tasks as _tasks  # noqa: F401  (registers the task rewards and hpc_tasks)
from hpcrl_core.rewards.registry import (
    REWARDS,
    BenchExecutor,
    ReferenceSource,
    RewardContext,
    RewardFactory,
    RewardFunc,
    RewardObserver,
    get_reward,
    register_reward,
)

__all__ = ["REWARDS", "BenchExecutor", "ReferenceSource", "RewardContext", "RewardFactory", "RewardFunc",
           "RewardObserver", "get_reward", "register_reward"]
