"""Around a training stage (sft, rl_dgemm, sft_hargo, rl_hargo): start over when the checkpoints were made from
other inputs, and otherwise continue the MLflow run that made them.

Used by flows/sft.py and flows/rl_dgemm.py. Test: ``pytest tests/flows/test_rl_kill_resume.py
tests/flows/test_sft_flow.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from prefect import get_run_logger

from flows.stage import flow_run_tags
from hpcrl_core import tracking
from hpcrl_core.training.checkpoints import inputs_fingerprint, last_checkpoint, reset_if_stale


@contextlib.contextmanager
def resumable_dvc_stage(name: str, out: Path, inputs: Sequence[Path], settings: Mapping[str, Any],
                        tags: Mapping[str, str] | None = None, *, method: str | None = None,
                        data: Sequence[Path] = ()) -> Iterator[None]:
    """Run a training stage whose checkpoints live in ``out``: clear them when ``inputs`` or ``settings`` changed
    since they were made, then open the stage's MLflow run (with ``tags`` beside the flow-run tag, ``method`` and the
    hash of the ``data`` files as ``tracking.dvc_stage_run`` tags them), continuing the one that made the
    checkpoints."""
    if reset_if_stale(out, inputs_fingerprint([f for f in inputs if f.exists()], dict(settings))):
        get_run_logger().info("%s: inputs changed since the checkpoints in %s were made; starting over", name, out)
    # a resumed stage continues the MLflow run that made its checkpoints
    with tracking.dvc_stage_run(name, params=dict(settings), tags={**flow_run_tags(), **(tags or {})},
                                run_file=out / tracking.RUN_FILE, resume=last_checkpoint(out) is not None,
                                method=method, data=data):
        yield
