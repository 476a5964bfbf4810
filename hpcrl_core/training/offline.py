"""The offline baselines of the HARGO comparison through the pinned TRL's own trainers: DPO (``DPOTrainer``), KTO
(``KTOTrainer``) and SimPO (``CPOTrainer`` with ``loss_type="simpo"`` and ``cpo_alpha=0``), each from the HARGO SFT
start on the preference pairs of ``hpcrl_core/training/preferences.py``.

- DPO and SimPO train on the pairs as they are (prompt, chosen, rejected).
- KTO is unpaired: every pair becomes a desirable example (the chosen answer) and an undesirable one (the rejected
  answer) of the same prompt, so both classes are equally many and TRL's default weights of 1 apply.
- DPO and KTO keep a frozen copy of the SFT start as their reference (TRL makes it when none is given); SimPO
  needs none.

Every check runs before the first step: the method's ``trl`` options against its TRL config class (unknown names
and names the section owns are refused, ``trl_options.check_passthrough``), the pairs file (``load_pairs``), and
every pair's length against ``max_length`` (TRL would cut a longer one without a word). A run resumes from its last
complete checkpoint and saves ``final`` (policy, tokenizer, ``log_history.json``) like the online runs.

Run: ``python -m hpcrl_core.training.offline [PARAMS] [PAIRS] [SFT_DIR] [OUTPUT_DIR] [METHOD] [SEED]``.
Test: ``pytest tests/training/test_offline.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from datasets import Dataset
from transformers import PreTrainedTokenizerBase
from trl import DPOConfig, DPOTrainer, KTOConfig, KTOTrainer
from trl.experimental.cpo import CPOConfig, CPOTrainer

from hpcrl_core.config import OfflineParams, Params, SimPOParams, load_params
from hpcrl_core.errors import ConfigError
from hpcrl_core.models.saved import load_saved_policy
from hpcrl_core.training.checkpoints import (
    finished_state,
    last_checkpoint,
    last_logged,
    save_log_history,
    save_policy,
)
from hpcrl_core.training.mlflow_callback import use_hpcrl_mlflow
from hpcrl_core.training.pairs import load_pairs
from hpcrl_core.training.run_record import read_pairs_card, write_run_record
from hpcrl_core.training.sft_data import record_tokens
from hpcrl_core.training.trl_options import check_passthrough, device_options

FINAL_DIR = "final"
CONFIGS: dict[str, type] = {"dpo": DPOConfig, "kto": KTOConfig, "simpo": CPOConfig}
TRAINERS: dict[str, type] = {"dpo": DPOTrainer, "kto": KTOTrainer, "simpo": CPOTrainer}


_SHARED = ("max_steps", "learning_rate", "lr_scheduler_type", "per_device_train_batch_size",
           "gradient_accumulation_steps", "max_length", "save_steps", "save_total_limit", "logging_steps")


def _owned(method: str) -> dict[str, str]:
    """The TRL config fields the ``offline`` section sets itself (a second way to set them is refused)."""
    owned = {name: f"offline.{name}" for name in _SHARED}
    owned.update({"beta": f"offline.{method}.beta", "seed": "the run's seed (one of offline.seeds)",
                  "output_dir": "the stage's output folder", "report_to": "the flow (report_to argument)",
                  "save_strategy": "offline.save_steps"})
    if method == "simpo":
        owned.update({"loss_type": "the method (simpo)", "cpo_alpha": "the method (SimPO: 0)",
                      "simpo_gamma": "offline.simpo.gamma"})
    return owned


def offline_config(method: str, op: OfflineParams, output_dir: Path, report_to: list[str], seed: int) -> Any:
    """The TRL config of one offline run: the shared values, the method's own, then its ``trl`` options (checked
    first).

    Raises:
        ConfigError: an unknown method, or ``trl`` options TRL's config refuses.
    """
    mp = op.method(method)
    cls = CONFIGS[method]
    check_passthrough(mp.trl, cls, f"offline.{method}", _owned(method))
    options: dict[str, Any] = {
        "output_dir": str(output_dir), "report_to": report_to, "seed": seed, "data_seed": seed,
        "max_steps": op.max_steps, "learning_rate": op.learning_rate, "lr_scheduler_type": op.lr_scheduler_type,
        "per_device_train_batch_size": op.per_device_train_batch_size,
        "gradient_accumulation_steps": op.gradient_accumulation_steps, "beta": mp.beta,
        "max_length": op.max_length, "save_strategy": "steps", "save_steps": op.save_steps,
        "save_total_limit": op.save_total_limit, "logging_steps": op.logging_steps, **device_options(),
    }
    if isinstance(mp, SimPOParams):
        options.update({"loss_type": "simpo", "cpo_alpha": 0.0, "simpo_gamma": mp.gamma})
    options.update(mp.trl)
    try:
        return cls(**options)
    except (ValueError, TypeError) as err:
        raise ConfigError(f"offline.{method}: {cls.__name__} rejected the options: {err}",
                          [f"{k}: {v!r}" for k, v in mp.trl.items()]) from None


def paired_dataset(pairs: Sequence[Mapping[str, Any]]) -> Dataset:
    """DPO / SimPO rows: prompt, chosen, rejected (conversational)."""
    return Dataset.from_list([{"prompt": p["prompt"], "chosen": p["chosen"], "rejected": p["rejected"]}
                              for p in pairs])


def unpaired_dataset(pairs: Sequence[Mapping[str, Any]]) -> Dataset:
    """KTO rows: each pair as (prompt, chosen, label True) and (prompt, rejected, label False)."""
    rows = []
    for p in pairs:
        rows.append({"prompt": p["prompt"], "completion": p["chosen"], "label": True})
        rows.append({"prompt": p["prompt"], "completion": p["rejected"], "label": False})
    return Dataset.from_list(rows)


def check_pair_lengths(pairs: Sequence[Mapping[str, Any]], tokenizer: PreTrainedTokenizerBase, max_length: int,
                       method: str) -> int:
    """Raise unless every prompt + answer fits ``max_length`` tokens; returns the longest.

    Raises:
        ConfigError: naming the longest and the key to raise.
    """
    longest = max(record_tokens(list(p["prompt"]), list(p[side]), tokenizer)
                  for p in pairs for side in ("chosen", "rejected"))
    if longest > max_length:
        raise ConfigError(f"offline.max_length: received {max_length}, but the longest prompt + answer is {longest} "
                          f"tokens ({method}); set offline.max_length to at least {longest} (TRL would cut longer "
                          "pairs without a word)")
    return longest


def build_offline_trainer(params: Params, pairs_path: Path, sft_dir: Path, output_dir: Path, report_to: list[str],
                          method: str, seed: int) -> Any:
    """The TRL trainer of one offline run, every check done before the first step.

    Raises:
        ConfigError: an unknown method, bad ``trl`` options, a pair longer than ``max_length``, no SFT model.
        DataError: the pairs file is missing, empty or malformed, or its card names no start and rewards.
    """
    op = params.offline
    args = offline_config(method, op, output_dir, report_to, seed)
    pairs = load_pairs(pairs_path)
    read_pairs_card(pairs_path)  # the start and rewards the run will record; missing: stop before training
    model, tokenizer = load_saved_policy(sft_dir, trainable=True, key="sft_dir")
    check_pair_lengths(pairs, tokenizer, op.max_length, method)
    dataset = unpaired_dataset(pairs) if method == "kto" else paired_dataset(pairs)
    trainer = TRAINERS[method](model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
    return use_hpcrl_mlflow(trainer)


def run_offline(params: Params, pairs_path: Path, sft_dir: Path, output_dir: Path, report_to: list[str], method: str,
                seed: int) -> dict[str, Any]:
    """Train one offline run (resuming from its last complete checkpoint) and save ``final``.

    Returns:
        ``global_step``, ``train_loss``, ``resumed_from``, ``final_dir``, ``method``, ``seed``, ``pairs``.
    """
    resume = last_checkpoint(output_dir)
    trainer = build_offline_trainer(params, pairs_path, sft_dir, output_dir, report_to, method, seed)
    final = output_dir / FINAL_DIR
    pairs = len(trainer.train_dataset) // (2 if method == "kto" else 1)
    done = finished_state(resume, final, trainer.args.max_steps)
    if done is not None:  # reached its budget before: keep final as it is (resuming would train one more step)
        write_run_record(final, method=method, seed=seed, kind="offline", start_dir=sft_dir, params=params,
                         pairs=pairs_path)
        return {"global_step": int(done["global_step"]), "train_loss": last_logged(done, "train_loss"),
                "resumed_from": str(resume), "final_dir": str(final), "method": method, "seed": seed, "pairs": pairs}
    result = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    save_policy(trainer, final)
    save_log_history(trainer, final)
    write_run_record(final, method=method, seed=seed, kind="offline", start_dir=sft_dir, params=params,
                     pairs=pairs_path)
    return {"global_step": int(trainer.state.global_step), "train_loss": float(result.training_loss),
            "resumed_from": str(resume) if resume else None, "final_dir": str(final), "method": method,
            "seed": seed, "pairs": pairs}


def main(argv: list[str]) -> None:
    defaults = ["params.yaml", "preferences/pairs.jsonl", "checkpoints/sft_hargo/final", "checkpoints/offline/dpo-1",
                "dpo", "1"]
    if argv[:1] in (["-h"], ["--help"]) or len(argv) > len(defaults):
        print(__doc__)
        return
    params_path, pairs, sft_dir, output_dir, method, seed = argv + defaults[len(argv):]
    print(run_offline(load_params(params_path), Path(pairs), Path(sft_dir), Path(output_dir), [], method, int(seed)))


if __name__ == "__main__":
    main(sys.argv[1:])
