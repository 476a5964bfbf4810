"""The HPC-GPT row of the HARGO comparison: ``hpcgpt`` params mapped onto the one SFT assembly (``training/sft.py``).

Our reading of the row (``HpcGptParams`` says why): the start point's tiny model architecture trained from a random
initialisation (drawn with the run's seed) on the task families alone, for ``hpcgpt.epochs`` passes over their train
records; the step budget follows from the record count (``ceil(epochs * records / batch)``), so the recipe keeps its
meaning when the data grow.
Each run writes ``final/run_record.json`` of kind ``supervised``: no start model and no rewards, but the hashes of the
train files it read.

Run: ``python -m hpcrl_core.training.hpcgpt [PARAMS] [DATA_DIR] [OUTPUT_DIR] [SEED]`` (no tracking).
Test: ``pytest tests/training/test_hpcgpt.py``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

from hpcrl_core.config import HPCGPT, Params, SFTParams, load_params
from hpcrl_core.training.run_record import write_run_record
from hpcrl_core.training.sft import run_sft
from hpcrl_core.training.sft_data import load_sft_datasets


def train_records(params: Params, data_dir: Path) -> int:
    """How many train records (with a completion) the recipe's families hold: one epoch.

    Raises:
        DataError: a family's train data is missing or has no record with a completion.
    """
    return len(load_sft_datasets(data_dir, params.hpcgpt.families)[0])


def hpcgpt_params(params: Params, records: int, seed: int) -> Params:
    """Params whose ``sft`` section is the recipe (``hpcgpt`` over ``sft_hargo``) and whose tiny model is
    ``sft_hargo.tiny``, with ``max_steps`` from the epochs over ``records`` train records."""
    hp, sp = params.hpcgpt, params.sft_hargo
    steps = math.ceil(hp.epochs * records / (hp.per_device_train_batch_size * sp.gradient_accumulation_steps))
    recipe = {"families": hp.families, "repeats": {}, "seed": seed, "max_steps": steps,
              "learning_rate": hp.learning_rate, "lr_scheduler_type": hp.lr_scheduler_type,
              "warmup_ratio": hp.warmup_ratio, "weight_decay": hp.weight_decay,
              "per_device_train_batch_size": hp.per_device_train_batch_size}
    sft = SFTParams(**{**sp.model_dump(exclude={"tiny", "families", "repeats"}), **recipe})
    model = params.model.model_copy(update={"tiny": sp.tiny})
    return params.model_copy(update={"sft": sft, "model": model})


def train_files(params: Params, data_dir: Path) -> list[Path]:
    """The files a run trains on: ``data/<family>/train.jsonl`` of ``hpcgpt.families``."""
    return [data_dir / family / "train.jsonl" for family in params.hpcgpt.families]


def run_hpcgpt(params: Params, data_dir: Path, output_dir: Path, report_to: list[str], seed: int) -> dict[str, Any]:
    """Train (or resume) one HPC-GPT run and record it.

    Returns:
        ``run_sft``'s result plus ``method``, ``seed``, ``records`` and ``epochs``.
    """
    records = train_records(params, data_dir)
    result = run_sft(hpcgpt_params(params, records, seed), data_dir, output_dir, report_to)
    write_run_record(Path(result["final_dir"]), method=HPCGPT, seed=seed, kind="supervised", start_dir=None,
                     params=params, data=train_files(params, data_dir))
    return {**result, "method": HPCGPT, "seed": seed, "records": records, "epochs": params.hpcgpt.epochs}


def main(argv: list[str]) -> None:
    defaults = ["params.yaml", "data", "checkpoints/hpcgpt/hpcgpt-1", "1"]
    if argv[:1] in (["-h"], ["--help"]) or len(argv) > len(defaults):
        print(__doc__)
        return
    params_path, data_dir, output_dir, seed = argv + defaults[len(argv):]
    print(run_hpcgpt(load_params(params_path), Path(data_dir), Path(output_dir), [], int(seed)))


if __name__ == "__main__":
    main(sys.argv[1:])
