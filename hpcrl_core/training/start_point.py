"""The HARGO start point's params: ``sft_hargo`` mapped onto the one SFT assembly (``training/sft.py``).

Kept out of ``sft.py`` so the ``sft`` stage does not read ``sft_hargo`` (tests/test_dvc_deps.py follows imports).

Test: ``pytest tests/training/test_hargo.py``.
"""

from __future__ import annotations

from hpcrl_core.config import Params, SFTParams


def start_point_params(params: Params) -> Params:
    """Params whose ``sft`` section is ``sft_hargo`` (without ``tiny``) and whose tiny model is ``sft_hargo.tiny``:
    what ``sft.run_sft`` needs to train the HARGO start point."""
    sp = params.sft_hargo
    model = params.model.model_copy(update={"tiny": sp.tiny})
    return params.model_copy(update={"sft": SFTParams(**sp.model_dump(exclude={"tiny"})), "model": model})
