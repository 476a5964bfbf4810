"""Constrained openings (hpcrl_core/evaluation/openings.py): an untrained model's answers open with one of the given
texts, whatever the tokens that spell them; a row is free once its opening is whole; bad inputs are refused.

Run: pytest tests/evaluation/test_openings.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest
import torch

from hpcrl_core.config import parse_params
from hpcrl_core.data.dgemm.corpus import CODE_FENCE, plan_openings, recombined_plans
from hpcrl_core.data.schema import messages
from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.evaluation.dgemm import sample_kernels
from hpcrl_core.evaluation.generate import generate
from hpcrl_core.evaluation.openings import OpeningVocabulary
from hpcrl_core.models.tiny import build_tiny_model
from tests.models import TINY, dgemm_records, sample_tokenizer

OPENINGS = [CODE_FENCE + "// plan: naive: naive-ijk\n", CODE_FENCE + "// plan: packed: packed-ext4-6x2-kc256-u2\n",
            CODE_FENCE + "// plan: packed: packed-ext8-4x3-kc128-u1-omp\n",
            CODE_FENCE + "// plan: blocked: b-64-omp\n"]
PROMPTS = [messages(None, "Write a DGEMM kernel."), messages(None, "for (int i = 0; i < n; i++)")]


def _answers(openings: OpeningVocabulary | None, opening: str = "", seed: int = 0) -> list[str]:
    model = build_tiny_model(TINY, sample_tokenizer(), seed=3)
    out = generate(model, sample_tokenizer(), PROMPTS, temperature=1.0, max_new_tokens=48, num_return_sequences=6,
                   seed=seed, opening=opening, openings=openings)
    return [a for row in out for a in row]


def test_every_answer_of_an_untrained_model_opens_with_one_of_the_openings() -> None:
    vocab = OpeningVocabulary(sample_tokenizer(), OPENINGS)
    free = _answers(None)
    assert not any(a.startswith(o) for a in free for o in OPENINGS)  # unconstrained, it writes noise
    for seed in (0, 1):
        held = _answers(vocab, seed=seed)
        assert len(held) == 12 and all(any(a.startswith(o) for o in OPENINGS) for a in held)
        # the code after the opening is the model's own: noise, not a copy of anything
        assert len({a for a in held}) > 1
    given = _answers(vocab, opening=CODE_FENCE)  # the fence given as the answer's prefix, the rest held
    assert all(any(a.startswith(o) for o in OPENINGS) for a in given)


def test_allowed_pieces_keep_the_text_inside_an_opening_or_finish_one() -> None:
    tokenizer = sample_tokenizer()
    vocab = OpeningVocabulary(tokenizer, OPENINGS)
    for text in ("", CODE_FENCE, CODE_FENCE + "// plan: pa", CODE_FENCE + "// plan: packed: packed-ext4-6x2-kc256-u2"):
        ids = vocab.allowed(text)
        assert ids
        for i in ids:
            longer = text + vocab.pieces[i]
            assert any(o.startswith(longer) or longer.startswith(o) for o in OPENINGS), (text, vocab.pieces[i])
        # every piece that would keep the text inside is allowed: none is missed
        inside = {i for i, p in enumerate(vocab.pieces) if p and any(o.startswith(text + p) for o in OPENINGS)}
        assert inside <= set(ids)
    assert vocab.allowed(CODE_FENCE + "// plan: packed: packed-ext4-6x2-kc256-u2\n") is None  # whole: free
    assert vocab.allowed(CODE_FENCE + "// plan: naive: naive-ijk\nvoid dgemm(") is None
    assert vocab.allowed("int main") is None  # a given prefix outside every opening: free
    # the end of the plan line: only the newline (or a piece that runs on from it) finishes it
    end = vocab.allowed(CODE_FENCE + "// plan: naive: naive-ijk")
    assert end and all(vocab.pieces[i].startswith("\n") for i in end)


def test_a_row_whose_kept_tokens_are_all_masked_is_left_as_it_was() -> None:
    tokenizer = sample_tokenizer()
    vocab = OpeningVocabulary(tokenizer, OPENINGS)
    processor = vocab.processor("")
    size = len(vocab.pieces)
    scores = torch.zeros((2, size))
    allowed = vocab.allowed("") or []
    scores[1, allowed] = float("-inf")  # as if top-k had kept only tokens outside the openings
    out = processor(cast(torch.LongTensor, torch.zeros((2, 3), dtype=torch.long)),
                    cast(torch.FloatTensor, scores.clone()))
    assert torch.isfinite(out[0, allowed]).all() and torch.isinf(out[0]).sum() == size - len(allowed)
    assert torch.isfinite(out[1]).sum() == size - len(allowed)  # untouched
    with pytest.raises(ValueError, match="3 prefixes for 2 rows"):
        vocab.processor(["", "", ""])(cast(torch.LongTensor, torch.zeros((2, 3), dtype=torch.long)),
                                      cast(torch.FloatTensor, torch.zeros((2, size))))


class _SpacedPieces:
    """A tokenizer whose single-id decode drops the leading space, as SentencePiece's decode does."""

    def __init__(self) -> None:
        self.inner = sample_tokenizer()

    def __len__(self) -> int:
        return len(self.inner)

    def __call__(self, text: str, **kw: Any) -> Any:
        return self.inner(text, **kw)

    def decode(self, ids: list[int], **kw: Any) -> str:
        return str(self.inner.decode(ids, **kw)).lstrip(" ")


def test_bad_openings_and_unreadable_tokenizers_are_refused() -> None:
    with pytest.raises(ConfigError, match="at least one opening"):
        OpeningVocabulary(sample_tokenizer(), [])
    with pytest.raises(ConfigError, match="begins another"):
        OpeningVocabulary(sample_tokenizer(), ["// plan: a\n", "// plan: a\nb"])
    with pytest.raises(ConfigError, match="do not spell the opening"):
        OpeningVocabulary(_SpacedPieces(), OPENINGS)


def test_plan_openings_are_the_corpus_plan_lines_once_each(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    rows = [{"name": "0001:naive:naive-ijk", "kind": "naive"},
            {"name": "0002:packed:packed-ext4-6x2", "kind": "packed"},
            {"name": "0003:naive:naive-ijk", "kind": "naive"}]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    key = "evaluate.dgemm_plan_vocabulary"
    assert plan_openings(corpus, True, False, key) == [CODE_FENCE + "// plan: naive: naive-ijk\n",
                                                       CODE_FENCE + "// plan: packed: packed-ext4-6x2\n"]
    # SFT data whose completions do not open with the plan line: refused, naming the setting to turn off
    for with_plan, permitted in ((False, False), (True, True)):
        with pytest.raises(ConfigError, match="evaluate.dgemm_plan_vocabulary: none"):
            plan_openings(corpus, with_plan, permitted, key)
    with pytest.raises(DataError, match="is missing"):
        plan_openings(tmp_path / "none.jsonl", True, False, key)
    corpus.write_text(json.dumps({"name": "0001:naive:x"}) + "\n")
    with pytest.raises(DataError, match=r"corpus.jsonl:1 lacks a str 'kind' or a str 'name'"):
        plan_openings(corpus, True, False, key)
    corpus.write_text("")
    with pytest.raises(DataError, match="holds no kernels"):
        plan_openings(corpus, True, False, key)


def test_fields_recombine_within_a_kind_and_never_across_kinds(tmp_path: Path) -> None:
    plans = {("packed", "packed-ext8-8x24-kc256"), ("packed", "packed-ext8-12x16-kc128-mc128-u2"),
             ("packed", "packed-ext4-6x2-kc256-mc128-u2"), ("blocked", "blk64-ijk-omp"), ("blocked", "blk96-ijk")}
    out = recombined_plans(plans)
    assert plans <= out
    # the tile of one kernel with the blocking of another at the same positions: a plan no kernel has
    assert ("packed", "packed-ext8-8x24-kc256-mc128-u2") in out
    assert ("blocked", "blk64-ijk") in out and ("blocked", "blk96-ijk-omp") in out
    assert ("packed", "packed-ext4-6x2-kc256") in out  # kc256 ends a plan at that position too
    # a field only after the step that leads to it: ext4 never had 8x24, and no plan joins two kinds' fields
    assert ("packed", "packed-ext4-8x24-kc256") not in out
    assert not any(kind == "packed" and "blk" in p or kind == "blocked" and "ext" in p for kind, p in out)
    # positions count: kc256 at the fourth field never ended a packed plan after mc; mc128 never came third
    assert ("packed", "packed-ext8-mc128-u2") not in out
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"name": f"{i}:{kind}:{p}", "kind": kind}) + "\n"
                              for i, (kind, p) in enumerate(sorted(plans))))
    key = "rl_dgemm.plan_vocabulary"
    fields = plan_openings(corpus, True, False, key, "fields")
    assert len(fields) == len(out) and CODE_FENCE + "// plan: blocked: blk64-ijk\n" in fields
    assert len(plan_openings(corpus, True, False, key, "corpus")) == len(plans)
    # none holds nothing: no corpus read, no data flags checked
    assert plan_openings(tmp_path / "absent.jsonl", False, True, key, "none") == []
    with pytest.raises(ConfigError, match="'nearest' is no plan vocabulary; one of none, corpus, fields"):
        plan_openings(corpus, True, False, key, "nearest")


def test_the_evaluation_samples_within_the_corpus_plan_lines_when_asked(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"name": f"000{i}:naive:{name}", "kind": "naive"}) + "\n"
                              for i, name in enumerate(("naive-ijk", "naive-kji-t"))))
    params = parse_params({"evaluate": {"dgemm_plan_vocabulary": "corpus", "samples_per_problem": 3,
                                        "dgemm_max_new_tokens": 40, "temperature": 1.0}})
    model = build_tiny_model(TINY, sample_tokenizer(), seed=3)
    samples = sample_kernels(model, sample_tokenizer(), dgemm_records(2), params, corpus=corpus)
    openings = plan_openings(corpus, True, False, "evaluate.dgemm_plan_vocabulary")
    assert [len(s) for s in samples] == [3, 3]
    assert all(any(a.startswith(o) for o in openings) for s in samples for a in s)
    with pytest.raises(ConfigError, match="needs the corpus"):
        sample_kernels(model, sample_tokenizer(), dgemm_records(2), params)
