"""What each run of the HARGO comparison records about itself (``final/run_record.json``), so that "every method starts
from the same SFT checkpoint and is trained toward the same rewards" is checked from the runs' own records, not
assumed.

A record holds the run's ``method``, ``seed`` and ``kind`` (``online``: rewards during training; ``offline``: rewards
through the preference pairs; ``supervised``: the HPC-GPT row, trained from scratch, which has neither and records
its train files' hashes instead), ``start`` (``provenance.model_hash`` of the SFT folder it loaded), ``rewards`` (the
reward's name, the ``task_reward`` values and sha256 of the source files that compute it) with its ``rewards_hash``,
and, for offline runs, the pairs file's hash and the start and rewards the pairs card says scored them.

``check_runs`` is what ``evaluate_hargo`` calls before it evaluates anything.

Test: ``pytest tests/training/test_run_record.py``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpcrl_core import provenance
from hpcrl_core.config import Params
from hpcrl_core.errors import DataError
from hpcrl_core.files import write_text_atomic

RECORD_FILE = "run_record.json"
REWARD = "hpc_tasks"
# the code a task reward runs: the router and its rules, the text statistics, the sentence encoder's wrapper
_REWARD_SOURCES = ("rewards/tasks.py", "rewards/completions.py", "textstats.py", "evaluation/embeddings.py")


def _sha256(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def rewards_record(params: Params) -> dict[str, Any]:
    """The rewards a run is trained toward: name, ``task_reward`` values, the sources' hashes, and their hash."""
    root = Path(provenance.__file__).resolve().parent
    record: dict[str, Any] = {"reward": REWARD, "task_reward": params.task_reward.model_dump(),
                              "sources": {name: _sha256(root / name) for name in _REWARD_SOURCES}}
    record["rewards_hash"] = "sha256:" + hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()
    return record


def write_run_record(folder: Path, *, method: str, seed: int, kind: str, start_dir: Path | None, params: Params,
                     pairs: Path | None = None, data: list[Path] | None = None) -> dict[str, Any]:
    """Write ``folder/run_record.json`` and return it.

    Args:
        kind: ``online`` (the run scored its own samples with ``rewards_record(params)``), ``offline`` (it trained
            on ``pairs``, whose card in the same folder says which start and rewards scored them) or ``supervised``
            (a second supervised baseline: no start model, no rewards; ``data``, the files it trained on, hashed).

    Raises:
        DataError: an offline run's pairs card is missing or records no start and rewards.
        ValueError: a kind without what it needs (a start folder; the pairs; the data files).
    """
    record: dict[str, Any] = {"method": method, "seed": seed, "kind": kind}
    if kind in ("online", "offline") and start_dir is not None:
        record.update({"start_dir": str(start_dir), "start": provenance.model_hash(start_dir)})
    if kind == "online" and start_dir is not None:
        record["rewards"] = rewards_record(params)
    elif kind == "offline" and start_dir is not None and pairs is not None:
        card = read_pairs_card(pairs)
        record.update({"pairs": _sha256(pairs), "pairs_start": card["start"], "rewards": card["rewards"]})
    elif kind == "supervised" and data:
        record.update({"start": None, "rewards": None, "data": {str(p): _sha256(p) for p in data}})
    else:
        raise ValueError(f"kind {kind!r} (start {start_dir}, pairs {pairs}, data {data}): online needs the start "
                         "folder, offline the start and the pairs file, supervised the data files")
    write_text_atomic(folder / RECORD_FILE, json.dumps(record, indent=2, sort_keys=True) + "\n")
    return record


def read_pairs_card(pairs: Path) -> dict[str, Any]:
    """The card beside a pairs file, which must name the start (``start``) and ``rewards`` that scored the pairs.

    Raises:
        DataError: the card is missing, unreadable, or lacks either.
    """
    path = pairs.parent / "card.json"
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise DataError(f"{path}: cannot read the preference card ({err}); run `dvc repro preferences`") from None
    if not isinstance(card, dict) or "start" not in card or "rewards" not in card:
        raise DataError(f"{path}: records no start and rewards (made by an older hpcrl); run `dvc repro "
                        "preferences` again")
    return card


def read_run_record(final: Path) -> dict[str, Any]:
    """The record of a run's ``final`` folder.

    Raises:
        DataError: missing or unreadable (a run made before runs recorded themselves: run its stage again).
    """
    path = final / RECORD_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise DataError(f"{path}: cannot read the run's record ({err}); run the run's DVC stage again so it "
                        "records its start and rewards") from None
    if not isinstance(record, dict) or not {"start", "rewards", "method", "seed"} <= set(record):
        raise DataError(f"{path}: not a run record (needs start, rewards, method, seed)")
    return record


def check_runs(start_dir: Path, finals: Mapping[str, Mapping[int, Path]]) -> dict[str, Any]:
    """Check that every run started from ``start_dir``'s weights and was trained toward one set of rewards.

    Args:
        start_dir: the SFT folder the comparison evaluates as its start.
        finals: ``{method: {seed: final folder}}``.

    Returns:
        ``{"start": hash, "rewards_hash": hash, "rewards": record, "runs": n}`` for the report's ``meta`` (``runs``
        counts every record read; supervised runs are checked for their method and seed only).

    Raises:
        DataError: naming every run whose record names another start (or pairs scored from another start), other
            rewards, or another method or seed than its folder.
    """
    start = provenance.model_hash(start_dir)
    problems: list[str] = []
    rewards: dict[str, Any] | None = None
    count = 0
    for method, seeds in finals.items():
        for seed, final in seeds.items():
            record = read_run_record(final)
            count += 1
            name = f"{method}-{seed}"
            if (record["method"], record["seed"]) != (method, seed):
                problems.append(f"{name}: its record says {record['method']}-{record['seed']}")
            if record.get("kind") == "supervised":  # trained from scratch on the data: no start, no rewards
                continue
            if record["start"] != start:
                problems.append(f"{name}: started from {record['start_dir']} ({record['start'][:15]}...), not "
                                f"{start_dir} ({start[:15]}...)")
            if record.get("pairs_start", start) != start:
                problems.append(f"{name}: trained on pairs sampled from another model ({record['pairs_start'][:15]}"
                                "...)")
            if rewards is None:
                rewards = record["rewards"]
            elif record["rewards"].get("rewards_hash") != rewards.get("rewards_hash"):
                problems.append(f"{name}: trained toward other rewards ({record['rewards'].get('task_reward')} vs "
                                f"{rewards.get('task_reward')}, or other reward code)")
    if problems:
        raise DataError("the comparison's runs do not share one start and one set of rewards (run their stages "
                        "again from the same inputs): " + "; ".join(problems))
    return {"start": start, "rewards_hash": None if rewards is None else rewards.get("rewards_hash"),
            "rewards": rewards, "runs": count}
