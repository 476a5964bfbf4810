"""Preference pairs the HARGO paper's way, for the offline baselines (DPO, KTO, SimPO).

The SFT start answers every prompt RL asks (``rl_hargo.families``, ``prompts``, ``max_items_per_family``: the same
prompts as the online methods) ``preferences.samples`` times at ``preferences.temperature``. The same fixed
rewards RL uses (``hpc_tasks``: each item by its own family's reward) score the answers; the best-scored answer is
chosen and the worst rejected (the first of equals). A prompt whose answers all score the same (within 1e-9) is a
tie and gives no pair; ties are counted per family, since a tie-heavy family contributes little to the offline
methods, which is part of what the comparison measures.

Written (atomically, into ``out_dir``)::

    pairs.jsonl   one pair per line: prompt, chosen, rejected (conversational), family, item_id,
                  chosen_reward, rejected_reward
    card.json     per family and in all: prompts, pairs, ties, tie_share, reward gap (mean, median, min, max); the
                  SFT start's model hash (``start``) and the rewards that scored the answers (``rewards``,
                  ``run_record.rewards_record``), which every offline run records as its own
    card.md       the same, for people

Run: ``python -m hpcrl_core.training.preferences [PARAMS] [DATA_DIR] [SFT_DIR] [OUT_DIR]``.
Test: ``pytest tests/training/test_preferences.py``.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hpcrl_core.config import Params, load_params
from hpcrl_core.data.schema import assistant
from hpcrl_core.errors import DataError
from hpcrl_core.evaluation.generate import generate
from hpcrl_core.files import replaced_folder
from hpcrl_core.models.saved import load_saved_policy
from hpcrl_core.provenance import model_hash
from hpcrl_core.rewards import RewardContext, get_reward
from hpcrl_core.training.hargo import task_dataset
from hpcrl_core.training.pairs import PAIRS_FILE
from hpcrl_core.training.run_record import rewards_record

CARD_FILE = "card.json"
TIE = 1e-9  # answers whose rewards differ by no more than this are equal
Progress = Callable[[str], None]


def build_pairs(rows: Sequence[Mapping[str, Any]], answers: Sequence[Sequence[str]],
                rewards: Sequence[Sequence[float]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Pairs and their card from scored answers.

    Args:
        rows: the prompts as task rows (``prompt``, ``family``, ``item_id``; ``training.hargo.task_row``).
        answers: for each row, its answers (two or more).
        rewards: for each row, one reward per answer.

    Returns:
        (pairs, card): one pair per row whose best and worst rewards differ; the card (module docstring).

    Raises:
        ValueError: the three sequences, or a row's answers and rewards, differ in length, or a row has fewer than
            two answers.
    """
    if not len(rows) == len(answers) == len(rewards):
        raise ValueError(f"build_pairs: {len(rows)} rows, {len(answers)} answer lists and {len(rewards)} reward "
                         "lists; pass one of each per prompt")
    pairs: list[dict[str, Any]] = []
    seen: dict[str, dict[str, Any]] = {}
    for i, (row, texts, scores) in enumerate(zip(rows, answers, rewards, strict=True)):
        if len(texts) != len(scores) or len(texts) < 2:
            raise ValueError(f"build_pairs: prompt {i} has {len(texts)} answers and {len(scores)} rewards; it needs "
                             "two or more answers and one reward each")
        family = str(row["family"])
        stats = seen.setdefault(family, {"prompts": 0, "ties": 0, "gaps": []})
        stats["prompts"] += 1
        best = max(range(len(scores)), key=lambda k: scores[k])
        worst = min(range(len(scores)), key=lambda k: scores[k])
        if scores[best] - scores[worst] <= TIE:
            stats["ties"] += 1
            continue
        stats["gaps"].append(scores[best] - scores[worst])
        pairs.append({"prompt": list(row["prompt"]), "chosen": assistant(texts[best]),
                      "rejected": assistant(texts[worst]), "family": family, "item_id": str(row["item_id"]),
                      "chosen_reward": float(scores[best]), "rejected_reward": float(scores[worst])})
    families = {f: _family_card(s) for f, s in sorted(seen.items())}
    total = _family_card({"prompts": sum(s["prompts"] for s in seen.values()),
                          "ties": sum(s["ties"] for s in seen.values()),
                          "gaps": [g for s in seen.values() for g in s["gaps"]]})
    return pairs, {"families": families, "total": total}


def _family_card(stats: Mapping[str, Any]) -> dict[str, Any]:
    gaps = stats["gaps"]
    gap = ({"mean": round(statistics.fmean(gaps), 4), "median": round(statistics.median(gaps), 4),
            "min": round(min(gaps), 4), "max": round(max(gaps), 4)} if gaps else None)
    return {"prompts": stats["prompts"], "pairs": len(gaps), "ties": stats["ties"],
            "tie_share": round(stats["ties"] / stats["prompts"], 4) if stats["prompts"] else None, "reward_gap": gap}


def card_markdown(card: Mapping[str, Any]) -> str:
    """The card as a markdown table."""
    lines = ["# Preference pairs", "", f"- samples per prompt: {card['samples']}, temperature {card['temperature']}",
             f"- SFT start: `{card['sft_dir']}`", "",
             "| family | prompts | pairs | ties | tie share | mean reward gap |", "|---|---:|---:|---:|---:|---:|"]
    for name, c in [*card["families"].items(), ("all", card["total"])]:
        gap = c["reward_gap"]["mean"] if c["reward_gap"] else "-"
        lines.append(f"| {name} | {c['prompts']} | {c['pairs']} | {c['ties']} | {c['tie_share']} | {gap} |")
    return "\n".join(lines) + "\n"


def make_preferences(params: Params, data_dir: Path, sft_dir: Path, out_dir: Path,
                     progress: Progress | None = None) -> dict[str, Any]:
    """Sample, score and pair; write ``out_dir`` (module docstring) and return the card.

    Raises:
        ConfigError: no SFT model in ``sft_dir``.
        DataError: a prompt file is missing or empty, or no prompt gave a pair (every answer tied).
    """
    pp = params.preferences
    rows = list(task_dataset(params.rl_hargo, data_dir))
    model, tokenizer = load_saved_policy(sft_dir, key="sft_dir")
    ticker = None if progress is None else (lambda done, total: progress(f"sampled {done}/{total} prompts"))
    answers = generate(model, tokenizer, [r["prompt"] for r in rows], temperature=pp.temperature,
                       max_new_tokens=pp.max_new_tokens, num_return_sequences=pp.samples, batch_size=pp.batch_size,
                       seed=pp.seed, progress=ticker)
    rewards = score_answers(params, rows, answers)
    pairs, card = build_pairs(rows, answers, rewards)
    if not pairs:
        raise DataError(f"preferences: none of the {len(rows)} prompts gave a pair: all {pp.samples} answers to each "
                        "scored the same; raise preferences.samples or preferences.temperature")
    card = {**card, "samples": pp.samples, "temperature": pp.temperature, "sft_dir": str(sft_dir),
            "prompts": params.rl_hargo.prompts, "start": model_hash(sft_dir), "rewards": rewards_record(params)}
    write_pairs(out_dir, pairs, card)
    return card


def score_answers(params: Params, rows: Sequence[Mapping[str, Any]],
                  answers: Sequence[Sequence[str]]) -> list[list[float]]:
    """The ``hpc_tasks`` reward of every answer, in one call (PLP answers embedded in one pass)."""
    reward = get_reward("hpc_tasks")(RewardContext(params=params, executor=None))
    flat = [(row, text) for row, texts in zip(rows, answers, strict=True) for text in texts]
    scores = reward([t for _, t in flat], answer=[r["answer"] for r, _ in flat], family=[r["family"] for r, _ in flat],
                    aliases=[r["aliases"] for r, _ in flat], partial=[r["partial"] for r, _ in flat])
    out: list[list[float]] = []
    k = 0
    for texts in answers:
        out.append([float(s) for s in scores[k:k + len(texts)]])
        k += len(texts)
    return out


def write_pairs(out_dir: Path, pairs: Sequence[Mapping[str, Any]], card: Mapping[str, Any]) -> None:
    """Write the three files into a fresh folder and swap it in for ``out_dir``: never half a set."""
    with replaced_folder(out_dir) as tmp:
        (tmp / PAIRS_FILE).write_text("".join(json.dumps(p, ensure_ascii=False, sort_keys=True) + "\n" for p in pairs),
                                      encoding="utf-8")
        (tmp / CARD_FILE).write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
        (tmp / "card.md").write_text(card_markdown(card), encoding="utf-8")


def main(argv: list[str]) -> None:
    defaults = ["params.yaml", "data", "checkpoints/sft_hargo/final", "preferences"]
    if argv[:1] in (["-h"], ["--help"]) or len(argv) > len(defaults):
        print(__doc__)
        return
    params_path, data_dir, sft_dir, out_dir = argv + defaults[len(argv):]
    card = make_preferences(load_params(params_path), Path(data_dir), Path(sft_dir), Path(out_dir), progress=print)
    print(json.dumps(card["total"], indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
