"""The HARGO start point's params: ``sft_hargo`` mapped onto the one SFT assembly (``training/sft.py``).

Kept out of ``sft.py`` so the ``sft`` stage does not read ``sft_hargo`` (tests/test_dvc_deps.py follows imports);
``run_sft_hargo`` is what the sft_hargo stage's task runs.

Test: ``pytest tests/training/test_hargo.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpcrl_core.config import Params, SFTParams
from hpcrl_core.training.sft import run_sft


def start_point_params(params: Params) -> Params:
    """Params whose ``sft`` section is ``sft_hargo`` (without ``tiny``) and whose tiny model is ``sft_hargo.tiny``:
    what ``sft.run_sft`` needs to train the HARGO start point."""
    sp = params.sft_hargo
    model = params.model.model_copy(update={"tiny": sp.tiny})
    return params.model_copy(update={"sft": SFTParams(**sp.model_dump(exclude={"tiny"})), "model": model})


def run_sft_hargo(params: Params, data_dir: Path, output_dir: Path, report_to: list[str]) -> dict[str, Any]:
    """Train (or resume) the HARGO start point: ``sft.run_sft`` on ``start_point_params(params)``."""
    return run_sft(start_point_params(params), data_dir, output_dir, report_to)
