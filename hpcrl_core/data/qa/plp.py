"""PLP (programming-language processing) descriptive QA: the facts table, the items generated from it, and
HPC-GPT's task1_plp.json.

The facts live in ``facts/plp_facts.json``: code datasets, tasks and metrics, each row with a one- or two-sentence
answer, the keywords a good answer mentions, and its source (see ``facts/SOURCES.md``). Every row yields one record
per question template, up to ``paraphrases`` templates, and with ``eval_phrasings`` up to that many of its
``held_out_templates``, asked in eval only. Records of both origins carry the same metadata keys:
``{"topic", "fact_id", "keywords"}``. The table is read and validated by ``tables.read_facts_table``.

Run: ``.venv/bin/python -c "from hpcrl_core.data.qa.plp import generate_plp_items as g; print(len(g(0, 2)))"``.
Test: ``pytest tests/data/qa/test_plp.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpcrl_core.data.qa.alpaca import load_alpaca
from hpcrl_core.data.qa.tables import FACTS_DIR, fact_records, read_facts_table
from hpcrl_core.data.quarantine import Quarantined
from hpcrl_core.data.schema import Record

PLP_FACTS = FACTS_DIR / "plp_facts.json"
PLP_TOPICS: tuple[str, ...] = ("dataset", "task", "metric")
SOURCE = "synthetic:plp-facts@1"
SYSTEM = ("You are an expert on programming-language processing: code datasets, code tasks and their metrics. "
          "Answer in one or two precise, descriptive sentences.")


def load_plp_facts(path: Path | None = None) -> list[dict[str, Any]]:
    """The validated PLP facts table (the packaged one unless ``path`` is given); ``keywords`` must be non-empty.

    Raises:
        DataError: naming the file, the row and the field of the first problem.
    """
    return read_facts_table(path or PLP_FACTS, PLP_TOPICS, {"keywords": True})


def generate_plp_items(seed: int, paraphrases: int, path: Path | None = None,
                         eval_phrasings: int = 0, rl_phrasings: int = 0) -> list[Record]:
    """One ``plp`` record per (fact, chosen question template), in table order.

    Args:
        seed: picks which templates a fact uses when it has more than ``paraphrases``; same seed, same items.
        paraphrases: at most this many templates per fact (>= 1).
        path: a facts table other than the packaged one.
        eval_phrasings: held-out templates per fact (``held_out_templates``) added after the trained records, marked
            ``provenance["held_out"]``; the prepare stage puts them in eval only.
        rl_phrasings: of each fact's chosen templates, this many marked ``provenance["rl"]`` (RL prompts, never
            trained by SFT); ``fact_records``.
    """
    return fact_records("plp", load_plp_facts(path), seed, paraphrases, SYSTEM, SOURCE,
                        lambda f: {"keywords": list(f["keywords"])}, eval_phrasings,
                        rl_phrasings)


def load_hpcgpt_plp(path: Path, quarantine: list[Quarantined] | None = None) -> list[Record]:
    """HPC-GPT's ``task1_plp.json`` (Alpaca: instruction, input, output) as ``plp`` records.

    The output is both the completion and the reference answer; the file has no keywords.

    Args:
        path: the Alpaca JSON file.
        quarantine: when given, records that cannot be read go there instead of raising (``load_alpaca``).

    Raises:
        DataError: naming the file, the record index and the field (for one record only without ``quarantine``).
    """
    return load_alpaca(path, "plp", system=SYSTEM, quarantine=quarantine,
                       metadata=lambda _rec: {"topic": None, "fact_id": None, "keywords": []})
