"""Which checkpoints a training stage may resume: only complete ones, made from the same inputs.

DVC keeps ``checkpoints/<stage>`` between runs (``persist: true``) so that a killed run resumes; but a run whose
data or params changed must start over, not continue someone else's optimiser state. The stage writes a
fingerprint of its inputs next to its checkpoints and clears the folder when the fingerprint differs.

A kill can also land while the trainer writes ``checkpoint-N``: it writes the weights, optimiser and RNG state
first and ``trainer_state.json`` last, so a folder whose state file is missing or unreadable is incomplete.
``last_checkpoint`` resumes the newest complete one and deletes incomplete newer ones (the resumed run writes
them again).

Test: ``pytest tests/training/test_checkpoints.py``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hpcrl_core.files import write_text_atomic

FINGERPRINT = "inputs.json"
TRAINER_STATE = "trainer_state.json"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
log = logging.getLogger(__name__)


def inputs_fingerprint(files: Iterable[Path], settings: dict[str, Any]) -> str:
    """sha256 over the given files' bytes (sorted by path) and the JSON of the settings that change results."""
    h = hashlib.sha256()
    for path in sorted(Path(p) for p in files):
        h.update(str(path).encode())
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    h.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return h.hexdigest()


def reset_if_stale(output_dir: Path, fingerprint: str) -> bool:
    """Clear ``output_dir`` when it holds checkpoints of other inputs; record the fingerprint.

    Returns:
        True when stale checkpoints were removed.
    """
    marker = output_dir / FINGERPRINT
    stale = output_dir.exists() and any(output_dir.iterdir()) and (
        not marker.exists() or json.loads(marker.read_text()).get("fingerprint") != fingerprint)
    if stale:
        shutil.rmtree(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"fingerprint": fingerprint}) + "\n")
    return stale


def _complete(folder: Path) -> bool:
    try:
        return isinstance(json.loads((folder / TRAINER_STATE).read_text()).get("global_step"), int)
    except (OSError, ValueError, AttributeError):
        return False


def last_checkpoint(output_dir: Path) -> Path | None:
    """The newest complete ``checkpoint-N`` folder under ``output_dir``, or None (also when there is no folder).

    Incomplete folders newer than it (a kill during a save) are deleted, with a warning.
    """
    if not output_dir.is_dir():
        return None
    found = sorted(((int(m.group(1)), p) for p in output_dir.iterdir()
                    if p.is_dir() and (m := _CHECKPOINT.match(p.name))), reverse=True)
    for _, folder in found:
        if _complete(folder):
            return folder
        log.warning("%s is incomplete (no readable %s; the run was killed while saving it); deleting it",
                    folder, TRAINER_STATE)
        shutil.rmtree(folder)
    return None


LOG_HISTORY = "log_history.json"  # the trainer's per-step logs in a final folder, for the evaluation's plots


def finished_state(checkpoint: Path | None, final: Path, max_steps: int) -> dict[str, Any] | None:
    """The trainer state of a run that already reached ``max_steps``: ``checkpoint``'s ``trainer_state.json`` when its
    ``global_step`` is at least ``max_steps`` and ``final`` holds the saved model (with ``final``'s
    ``log_history.json`` as its log history when there is one); else None.

    A finished run must not be resumed: the trainer takes one more step before it checks the budget, so a rerun of
    a finished stage (DVC reruns every member of a matrix stage when the list of seeds grows) would train past it.
    """
    if checkpoint is None or not ((final / "config.json").is_file() or (final / "adapter_config.json").is_file()):
        return None
    state = dict(json.loads((checkpoint / TRAINER_STATE).read_text()))
    if int(state.get("global_step", 0)) < max_steps:
        return None
    if (final / LOG_HISTORY).is_file():  # written after training: it also holds the run's closing train_loss
        state["log_history"] = json.loads((final / LOG_HISTORY).read_text())
    return state


def last_logged(state: dict[str, Any], key: str) -> float:
    """The last value of ``key`` in a trainer state's ``log_history`` (NaN when never logged)."""
    values = [e[key] for e in state.get("log_history", []) if key in e]
    return float(values[-1]) if values else float("nan")




STOCK_TOKENIZER_DIR = "tokenizer"


def save_policy(trainer: Any, folder: Path) -> None:
    """Save a trained policy for the next stage: the model (or adapter) and its tokenizer into ``folder``, and the
    tokenizer once more, alone, into ``folder/tokenizer`` for stock loaders.

    Why twice: beside a config.json of model type qwen2, transformers' ``AutoTokenizer`` always builds
    ``Qwen2Tokenizer``, which replaces the saved pre-tokenizer with its own regex, so our tiny model's tokenizer
    loaded from ``folder`` tokenizes every text unlike training (986 tokens instead of 105 for one record). hpcrl
    loads it right (``models.tokenizer.tokenizer_from_folder``); a user's script, vLLM (``tokenizer=``) or a model
    fetched from the MLflow registry is given ``folder/tokenizer``, which holds no config.json and loads exactly.
    """
    trainer.save_model(str(folder))
    if trainer.processing_class is not None:
        trainer.processing_class.save_pretrained(str(folder))
        trainer.processing_class.save_pretrained(str(folder / STOCK_TOKENIZER_DIR))


def save_log_history(trainer: Any, folder: Path) -> None:
    """Write the trainer's per-step logs to ``folder/log_history.json`` atomically."""
    write_text_atomic(folder / LOG_HISTORY, json.dumps(trainer.state.log_history, indent=1) + "\n")
