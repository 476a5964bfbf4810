"""Duplicate sharing: a GRPO group that writes the same kernel several times pays each copy a little less.

With ``reward.duplicate_penalty`` = λ > 0, the reward of completion i in a group of G becomes

    r_i' = r_i - λ (c_i - 1) / (G - 1)

where c_i is the number of completions in i's group that are the same kernel as i (``kernel_identity``: the
extracted code without comments or layout, so a changed comment or plan line is still a copy), i itself included.
A kernel written once keeps its reward; a kernel written by the whole group loses λ, as every other member does,
so a collapsed group still carries no advantage; in between, copies of the group's mode lose up to λ against the
kernels only one completion wrote. It is the subtractive form of fitness sharing from quality-diversity search,
in reward units: λ = 10 costs a kernel written by all eight completions a tenth of numpy's speed (``reward.scale``
100), against a failure ladder of -10 to -100 and a gap of ~50 between plain and packed kernels, so speed still
decides first and the sharing separates kernels of similar speed.

With ``reward.duplicate_keeps_order`` the sharing may level speeds but never reverse them: within a group, each
kernel's copies are raised to the highest shared reward of any kernel with a strictly lower unshared reward (a
kernel's unshared reward is its best copy's), where that is higher. Copies of the group's fastest kernel then fall
at most to the next kernel's level; they never score below a slower kernel, so a large λ can no longer pay the
policy to move from a fast kernel to a slower one, only stop paying it for writing the fast one again.

Groups are TRL's: G consecutive completions of the batch, one prompt each (``RewardContext.group_size``, which the
DGEMM trainer sets to ``rl_dgemm.num_generations``).

Test: ``pytest tests/rewards/test_diversity.py``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from hpcrl_core.errors import ConfigError


def share_duplicates(keys: Sequence[str], rewards: Sequence[float], group_size: int, penalty: float,
                     keep_order: bool = False) -> list[float]:
    """The rewards after duplicate sharing (module docstring), in batch order.

    Args:
        keys: one identity per completion (``kernel_identity``), groups of ``group_size`` consecutive.
        rewards: the completions' rewards, aligned with ``keys``.
        group_size: G, at least 2.
        penalty: λ in reward units, at least 0 (0 returns the rewards unchanged).
        keep_order: no kernel's shared reward ends below that of a kernel with a lower unshared reward
            (``_keep_order``).

    Raises:
        ConfigError: misaligned inputs, a batch that is not whole groups, G < 2 or a negative penalty.
    """
    if len(keys) != len(rewards):
        raise ConfigError(f"duplicate sharing needs one key per reward; got {len(keys)} keys, {len(rewards)} rewards")
    if group_size < 2 or len(keys) % group_size:
        raise ConfigError(f"duplicate sharing needs whole groups of G >= 2 completions; got {len(keys)} completions "
                          f"for G = {group_size}")
    if penalty < 0:
        raise ConfigError(f"reward.duplicate_penalty must be >= 0, got {penalty}")
    out = [float(r) for r in rewards]
    if penalty == 0:
        return out
    for start in range(0, len(keys), group_size):
        group = keys[start:start + group_size]
        counts = Counter(group)
        for j, key in enumerate(group):
            out[start + j] -= penalty * (counts[key] - 1) / (group_size - 1)
        if keep_order:
            _keep_order(group, rewards[start:start + group_size], out, start)
    return out


def _keep_order(keys: Sequence[str], unshared: Sequence[float], shared: list[float], start: int) -> None:
    """Raise the shared rewards of one group (``shared[start:start + G]``, in place) so that no kernel ends below a
    kernel of strictly lower unshared reward. A kernel's reward is the best of its copies' (copies differing only
    in comments are timed apart and may differ by noise); all copies of a kernel are raised to the same floor."""
    best: dict[str, float] = {}
    for key, r in zip(keys, unshared, strict=True):
        best[key] = max(best.get(key, float("-inf")), r)
    floor = float("-inf")  # the highest shared reward among kernels of strictly lower reward
    levels = sorted(set(best.values()))
    for level in levels:
        members = [j for j, key in enumerate(keys) if best[key] == level]
        for j in members:
            shared[start + j] = max(shared[start + j], floor)
        floor = max(floor, *(shared[start + j] for j in members))
