"""MLPerf factual QA: the facts table, the items generated from it and HPC-GPT's task1_ml_perf.json.

The facts live in ``facts/mlperf_facts.json`` (one row per fact, each citing its source; see ``facts/SOURCES.md``).
Every row yields one record per question template, up to ``paraphrases`` templates, and with ``eval_phrasings`` up
to that many of its ``held_out_templates``, asked in eval only. HPC-GPT's own file plugs in by path through
``load_hpcgpt_mlperf``. Records of both origins carry the same metadata keys: ``{"topic", "fact_id", "aliases",
"partial"}``.

The table is read, validated and turned into records by ``tables`` (shared with ``plp``). Answers are scored by
``hpcrl_core.evaluation.metrics.tiered_score`` (task scoring lives with the evaluation, not with the data).

Run: ``.venv/bin/python -c "from hpcrl_core.data.qa.mlperf import generate_mlperf_items as g; print(len(g(0, 2)))"``.
Test: ``pytest tests/data/qa/test_mlperf.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpcrl_core.data.qa.alpaca import load_alpaca
from hpcrl_core.data.qa.tables import FACTS_DIR, fact_records, read_facts_table
from hpcrl_core.data.quarantine import Quarantined
from hpcrl_core.data.schema import Record

MLPERF_FACTS = FACTS_DIR / "mlperf_facts.json"
MLPERF_TOPICS: tuple[str, ...] = ("training", "inference", "hpc", "general")
SOURCE = "synthetic:mlperf-facts@1"
SYSTEM = ("You are an expert on the MLPerf benchmark suites (Training, Inference, HPC). Answer with the short fact "
          "only: a name, a number with its unit, or a short phrase, without explanation.")


# --- MLPerf items ------------------------------------------------------------------------------------------------

def load_mlperf_facts(path: Path | None = None) -> list[dict[str, Any]]:
    """The validated MLPerf facts table (the packaged one unless ``path`` is given).

    Raises:
        DataError: naming the file, the row and the field of the first problem.
    """
    return read_facts_table(path or MLPERF_FACTS, MLPERF_TOPICS, {"aliases": False, "partial": False})


def generate_mlperf_items(seed: int, paraphrases: int, path: Path | None = None,
                          eval_phrasings: int = 0, rl_phrasings: int = 0) -> list[Record]:
    """One ``mlperf`` record per (fact, chosen question template), in table order.

    Args:
        seed: picks which templates a fact uses when it has more than ``paraphrases``; same seed, same items.
        paraphrases: at most this many templates per fact (>= 1).
        path: a facts table other than the packaged one.
        eval_phrasings: held-out templates per fact (``held_out_templates``) added after the trained records, marked
            ``provenance["held_out"]``; the prepare stage puts them in eval only.
        rl_phrasings: of each fact's chosen templates, this many marked ``provenance["rl"]`` (RL prompts, never
            trained by SFT); ``fact_records``.
    """
    return fact_records("mlperf", load_mlperf_facts(path), seed, paraphrases, SYSTEM, SOURCE,
                        lambda f: {"aliases": list(f["aliases"]), "partial": list(f["partial"])}, eval_phrasings,
                        rl_phrasings)


def load_hpcgpt_mlperf(path: Path, quarantine: list[Quarantined] | None = None) -> list[Record]:
    """HPC-GPT's ``task1_ml_perf.json`` (Alpaca: instruction, input, output) as ``mlperf`` records.

    The output is both the completion and the reference answer; the file has no aliases or partial answers.

    Args:
        path: the Alpaca JSON file.
        quarantine: when given, records that cannot be read go there instead of raising (``load_alpaca``).

    Raises:
        DataError: naming the file, the record index and the field (for one record only without ``quarantine``).
    """
    return load_alpaca(path, "mlperf", system=SYSTEM, quarantine=quarantine,
                       metadata=lambda _rec: {"topic": None, "fact_id": None, "aliases": [], "partial": []})
