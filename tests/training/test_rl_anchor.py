"""The SFT anchor of rl_dgemm (``hpcrl_core/training/rl_anchor.py``): records tokenized as SFT renders them, draws
keyed by (seed, step, micro-batch), the loss checked against a token-by-token computation, a gradient step on it
making the corpus's text likelier, and a real GRPO step that adds and logs it.

Run: ``.venv/bin/python -m pytest tests/training/test_rl_anchor.py -q``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import PreTrainedTokenizerBase

from hpcrl_core.config import Settings, parse_params
from hpcrl_core.data.schema import Record, assistant, write_jsonl
from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.models.tiny import build_tiny_model
from hpcrl_core.training.rl_anchor import IGNORE, AnchorRecord, SFTAnchor, anchor_records
from tests.models import TINY, dgemm_records, sample_tokenizer
from tests.training.test_rl import rl_inputs, rl_params


def _train_file(path: Path, records: tuple[Record, ...]) -> Path:
    write_jsonl(path, records)
    return path


def test_records_are_tokenized_as_sft_renders_them_and_long_or_empty_ones_are_left_out(tmp_path: Path) -> None:
    tok = sample_tokenizer()
    records = dgemm_records()[:6]
    empty = Record(family="dgemm", prompt=records[0].prompt, completion=assistant("  "), answer="")
    path = _train_file(tmp_path / "train.jsonl", (*records, empty))
    got = anchor_records(path, tok, max_length=10_000)
    assert len(got) == 6  # the blank completion is not a record to learn from
    for rec, r in zip(got, records, strict=True):
        whole = tok.apply_chat_template(r.prompt + r.completion, tokenize=True, return_dict=True)["input_ids"]
        prompt = tok.apply_chat_template(r.prompt, tokenize=True, return_dict=True,
                                         add_generation_prompt=True)["input_ids"]
        assert list(rec.ids) == list(whole) and rec.prompt == len(prompt) < len(rec.ids)
        assert r.response.strip()[:20] in tok.decode(list(rec.ids[rec.prompt:]))
    lengths = sorted(len(r.ids) for r in got)
    cut = anchor_records(path, tok, max_length=lengths[2])
    assert len(cut) == 3 and all(len(r.ids) <= lengths[2] for r in cut)
    with pytest.raises(DataError, match="sft.max_length"):
        anchor_records(path, tok, max_length=lengths[0] - 1)
    with pytest.raises(DataError, match="no such data file"):
        anchor_records(tmp_path / "none.jsonl", tok, max_length=10_000)


def test_draws_depend_on_seed_step_and_micro_batch_alone() -> None:
    tok = sample_tokenizer()
    recs = anchor_records_of(tok)
    a = SFTAnchor(recs, weight=1.0, batch=4, seed=7, pad_id=0)
    b = SFTAnchor(recs, weight=3.0, batch=4, seed=7, pad_id=0)
    assert a.draw(5) == b.draw(5) == a.draw(5, 0)  # a resumed run draws what the uninterrupted one did
    assert len(set(a.draw(5))) == 4
    draws = {tuple(a.draw(s, m)) for s in range(6) for m in range(2)}
    assert len(draws) > 8  # steps and micro-batches draw differently
    other = SFTAnchor(recs, 1.0, 4, seed=8, pad_id=0)
    assert [other.draw(s) for s in range(4)] != [a.draw(s) for s in range(4)]
    few = SFTAnchor(recs[:2], 1.0, batch=5, seed=1, pad_id=0)
    assert len(few.draw(0)) == 5 and set(few.draw(0)) <= {0, 1}
    with pytest.raises(ValueError, match="weight"):
        SFTAnchor(recs, weight=0.0, batch=4, seed=1, pad_id=0)
    with pytest.raises(DataError):
        SFTAnchor([], weight=1.0, batch=4, seed=1, pad_id=0)


def anchor_records_of(tok: PreTrainedTokenizerBase, count: int = 12) -> list[AnchorRecord]:
    """The first ``count`` sample DGEMM records as the anchor holds them, tokenized here by hand."""
    out = []
    for r in dgemm_records()[:count]:
        prompt: Any = tok.apply_chat_template(r.prompt, tokenize=True, return_dict=True, add_generation_prompt=True)
        whole: Any = tok.apply_chat_template(r.prompt + r.completion, tokenize=True, return_dict=True)
        out.append(AnchorRecord(tuple(whole["input_ids"]), len(prompt["input_ids"])))
    return out


def test_the_loss_is_the_mean_nll_of_completion_tokens_only() -> None:
    tok = sample_tokenizer()
    recs = anchor_records_of(tok)
    anchor = SFTAnchor(recs, weight=1.0, batch=3, seed=2, pad_id=int(tok.pad_token_id))
    model = build_tiny_model(TINY, tok, seed=5)
    model.eval()
    drawn = anchor.draw(3)
    ids, mask, labels = anchor.batch_tensors(drawn)
    for row, i in enumerate(drawn):
        r = recs[i]
        assert (labels[row, : r.prompt] == IGNORE).all() and (labels[row, len(r.ids):] == IGNORE).all()
        assert labels[row, r.prompt: len(r.ids)].tolist() == list(r.ids[r.prompt:])
        assert mask[row].sum() == len(r.ids)
    # by hand: each record alone, unpadded, the log-probability of each completion token given what precedes it
    total, count = 0.0, 0
    with torch.no_grad():
        for i in drawn:
            r = recs[i]
            logp = torch.log_softmax(model(input_ids=torch.tensor([r.ids])).logits[0].double(), -1)
            for t in range(r.prompt, len(r.ids)):
                total -= float(logp[t - 1, r.ids[t]])
                count += 1
        got = float(anchor.nll(model, 3))
    assert math.isclose(got, total / count, rel_tol=1e-4)


def test_a_step_on_the_anchor_makes_the_corpus_text_likelier() -> None:
    tok = sample_tokenizer()
    anchor = SFTAnchor(anchor_records_of(tok), weight=1.0, batch=4, seed=0, pad_id=int(tok.pad_token_id))
    model = build_tiny_model(TINY, tok, seed=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    before = float(anchor.nll(model, 0).detach())
    for _ in range(5):
        opt.zero_grad()
        anchor.nll(model, 0).backward()
        opt.step()
    assert float(anchor.nll(model, 0).detach()) < before - 0.1


def test_the_gamma_is_checked_by_the_config() -> None:
    assert parse_params({}).rl_dgemm.sft_anchor == 0.0  # off unless asked for
    with pytest.raises(ConfigError, match="sft_anchor"):
        parse_params({"rl_dgemm": {"sft_anchor": -1}})
    with pytest.raises(ConfigError, match="sft_anchor_batch"):
        parse_params({"rl_dgemm": {"sft_anchor": 1, "sft_anchor_batch": 0}})


@pytest.mark.integration
def test_a_grpo_step_adds_the_anchor_and_logs_its_nll(tmp_path: Path, bench_dirs: Settings,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from hpcrl_core.training import rl
    from hpcrl_core.training.rl import build_rl_trainer

    data, sft = rl_inputs(tmp_path)
    with monkeypatch.context() as m:  # refused before the first step, and before any benchmark worker starts
        m.setattr(rl, "bench_backend", lambda *a, **k: pytest.fail("the executor started before the refusal"))
        with pytest.raises(DataError, match="train.jsonl"):
            build_rl_trainer(rl_params(sft_anchor=1.0), data, sft, tmp_path / "none", report_to=[],
                             settings=bench_dirs)
    _train_file(data / "dgemm" / "train.jsonl", dgemm_records()[:6])
    losses = {}
    for gamma in (0.0, 50.0):
        run = build_rl_trainer(rl_params(max_steps=1, sft_anchor=gamma, sft_anchor_batch=2), data, sft,
                               tmp_path / f"rl-{gamma}", report_to=[], settings=bench_dirs)
        try:
            run.trainer.train()
        finally:
            run.close()
        history = run.trainer.state.log_history
        nll = [e["anchor/nll"] for e in history if "anchor/nll" in e]
        assert (len(nll) == 1 and nll[0] > 0) if gamma else not nll
        losses[gamma] = next(e["loss"] for e in history if "loss" in e)
    # an untrained model writes no kernel: both runs' GRPO terms are alike, the anchor adds gamma x its NLL
    assert losses[50.0] > losses[0.0] + 10
