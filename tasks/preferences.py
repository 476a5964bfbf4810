"""Prefect task of the preferences stage: sample, score and pair the SFT start's answers (``make_preferences``).

No Prefect caching (DVC owns skip-if-unchanged) and no automatic retries: sampling is seeded, so a rerun gives the
same pairs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from hpcrl_core.config import Params
from hpcrl_core.training import preferences


@task(cache_policy=NO_CACHE)
def make_preferences(params: Params, data_dir: Path, sft_dir: Path, out_dir: Path) -> dict[str, Any]:
    return preferences.make_preferences(params, data_dir, sft_dir, out_dir, progress=get_run_logger().info)
