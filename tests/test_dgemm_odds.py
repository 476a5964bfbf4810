"""The discovery-odds probe (benchmarks/dgemm_odds.py): forced samples open with the ids plan novelty forces, free
ones with whatever the policy writes; the tables count the kind each plan line names.

Run: ``pytest tests/test_dgemm_odds.py``.
"""

from __future__ import annotations

from benchmarks.dgemm_odds import cells, sample
from hpcrl_core.algorithms.exploration import kind_of, opening_ids, plan_prefix
from hpcrl_core.data.dgemm.corpus import CODE_FENCE
from hpcrl_core.evaluation.openings import OpeningVocabulary
from hpcrl_core.models.tiny import build_tiny_model
from tests.models import TINY, sample_tokenizer

PROMPT = [{"role": "user", "content": "Write a DGEMM kernel for n = 192."}]


def test_forced_samples_open_with_the_plan_and_repeat_per_seed() -> None:
    tok = sample_tokenizer()
    model = build_tiny_model(TINY, tok, seed=3)
    opening = opening_ids(tok, "packed", [plan_prefix("packed") + ": mr4\n"])[0]
    forced = sample(model, tok, PROMPT, opening, k=3, temperature=1.0, seed=5, max_new_tokens=6)
    assert len(forced) == 3 and all(t.startswith(plan_prefix("packed")) for t in forced)
    assert forced == sample(model, tok, PROMPT, opening, k=3, temperature=1.0, seed=5, max_new_tokens=6)
    free = sample(model, tok, PROMPT, [], k=2, temperature=1.0, seed=5, max_new_tokens=6)
    assert len(free) == 2 and not any(t.startswith(plan_prefix("packed")) for t in free)
    # the forced opening followed by its parameters is read back as that kind
    assert kind_of(plan_prefix("packed") + ": mr4") == "packed"


def test_with_the_plan_vocabulary_forced_and_free_samples_plan_a_corpus_kernel() -> None:
    tok = sample_tokenizer()
    model = build_tiny_model(TINY, tok, seed=3)
    plans = [CODE_FENCE + "// plan: packed: packed-ext4-6x2\n", CODE_FENCE + "// plan: packed: packed-ext8-4x3\n",
             CODE_FENCE + "// plan: naive: naive-ijk\n"]
    vocab = OpeningVocabulary(tok, plans)
    opening = opening_ids(tok, "packed", [plans[0]])[0]
    forced = sample(model, tok, PROMPT, opening, k=4, temperature=1.0, seed=5, max_new_tokens=64, vocab=vocab)
    assert all(any(t.startswith(p) for p in plans[:2]) for t in forced)  # the forced kind, a corpus plan of it
    free = sample(model, tok, PROMPT, [], k=4, temperature=1.0, seed=5, max_new_tokens=64, vocab=vocab)
    assert all(any(t.startswith(p) for p in plans) for t in free)


def test_cells_count_named_verified_and_fast_shares_per_key() -> None:
    rows = [
        {"forced": "packed", "kind": "packed", "status": "ok", "ratio": 0.9, "fast": True},
        {"forced": "packed", "kind": "packed", "status": "ok", "ratio": 0.5, "fast": False},
        {"forced": "packed", "kind": "ikj_vec", "status": "compile_error", "ratio": None, "fast": False},
        {"forced": "packed", "kind": "none", "status": "wrong_result", "ratio": None, "fast": False},
        {"forced": "naive", "kind": "naive", "status": "ok", "ratio": 0.01, "fast": False},
    ]
    table = cells(rows, "forced")
    assert table["packed"] == {"samples": 4, "named": 0.5, "verified": 0.5, "fast": 0.25, "best_vs_numpy": 0.9}
    assert table["naive"] == {"samples": 1, "named": 1.0, "verified": 1.0, "fast": 0.0, "best_vs_numpy": 0.01}
    by_kind = cells(rows, "kind")  # free samples are grouped by the kind they name
    assert sorted(by_kind) == ["ikj_vec", "naive", "none", "packed"] and by_kind["packed"]["named"] == 1.0
