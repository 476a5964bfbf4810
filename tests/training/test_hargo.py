"""HARGOTrainer (hpcrl_core/training/hargo.py): the estimator's weights reach the loss (surrogate and KL), uniform
weights give TRL's own GRPO loss, the EMA survives a resume, and config mistakes fail before training.

Run: ``.venv/bin/python -m pytest tests/training/test_hargo.py -q``.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from hpcrl_core.config import Params, parse_params
from hpcrl_core.data.schema import Record, assistant, messages, write_jsonl
from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.models.tiny import build_tiny_model
from hpcrl_core.models.tokenizer import save_tokenizer
from hpcrl_core.provenance import model_hash
from hpcrl_core.training import hargo as hargo_mod
from hpcrl_core.training.hargo import (
    STATE_FILE,
    HARGOConfig,
    HARGOTrainer,
    build_hargo_trainer,
    hargo_config,
    run_hargo,
    task_dataset,
)
from hpcrl_core.training.run_record import RECORD_FILE
from tests.models import TINY, sample_tokenizer

G = 4


def hargo_params(**rl: Any) -> Params:
    defaults: dict[str, Any] = {"max_steps": 2, "per_device_train_batch_size": 2 * G, "num_generations": G,
                                "max_completion_length": 12, "save_steps": 1, "learning_rate": 1e-3,
                                "temperature": 1.0}
    return parse_params({"rl_hargo": {**defaults, **rl}})


def varied_reward(completions: list[Any], **_: Any) -> list[float]:
    """A reward with contrast inside every group: distinct characters of the answer (random tiny policy)."""
    texts = [c[-1]["content"] if isinstance(c, list) else str(c) for c in completions]
    return [len(set(t)) / 10.0 for t in texts]


def _records(family: str, answers: list[str]) -> list[Record]:
    return [Record(family=family, prompt=messages("You answer briefly.", f"Question {i} about {family}?"),
                   completion=assistant(a), answer=a, metadata={"aliases": [], "partial": []} if family == "mlperf"
                   else {}) for i, a in enumerate(answers)]


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "data"
    for split in ("train", "rl"):  # RL asks rl.jsonl by default; train.jsonl with rl_hargo.prompts: train
        write_jsonl(data / "race_c" / f"{split}.jsonl", _records("race_c", ["yes", "no", "yes"]))
        write_jsonl(data / "race_fortran" / f"{split}.jsonl", _records("race_fortran", ["no", "yes"]))
        write_jsonl(data / "mlperf" / f"{split}.jsonl", _records("mlperf", ["0.720", "ResNet-50"]))
        write_jsonl(data / "plp" / f"{split}.jsonl", _records("plp", ["A corpus of C code mined from GitHub."]))
    sft = tmp_path / "sft" / "final"
    build_tiny_model(TINY, sample_tokenizer(), seed=3).save_pretrained(str(sft))
    save_tokenizer(sample_tokenizer(), sft)
    return data, sft


def test_trl_hooks_we_override_keep_their_signatures() -> None:
    """A TRL upgrade that drops or reshapes one of these must fail here, not silently bypass HARGO."""
    from trl import GRPOTrainer

    expected = {"_generate_and_score_completions": ["self", "inputs"], "_compute_loss": ["self", "model", "inputs"],
                "_calculate_rewards": ["self", "inputs", "prompts", "completions", "completion_ids_list"],
                "_save_checkpoint": ["self", "model", "trial"],
                "_load_optimizer_and_scheduler": ["self", "checkpoint"],
                "_get_per_token_logps_and_entropies": ["self", "model", "input_ids", "attention_mask",
                                                       "logits_to_keep"]}
    for name, args in expected.items():
        member = getattr(GRPOTrainer, name, None)
        assert callable(member), name
        params = list(inspect.signature(member).parameters)
        assert params[:len(args)] == args, f"{name}{params}"
        assert getattr(HARGOTrainer, name) is not member or name == "_get_per_token_logps_and_entropies"


def test_the_dataset_carries_each_items_family_and_references(inputs: tuple[Path, Path]) -> None:
    data, _ = inputs
    ds = task_dataset(hargo_params().rl_hargo, data)
    assert len(ds) == 8 and set(ds["family"]) == {"race_c", "race_fortran", "mlperf", "plp"}
    row = next(r for r in ds if r["family"] == "mlperf")
    assert row["answer"] in ("0.720", "ResNet-50") and row["aliases"] == [] and row["item_id"].startswith("mlperf-")
    write_jsonl(data / "plp" / "train.jsonl", _records("plp", ["One.", "Two."]))
    assert len(task_dataset(hargo_params(prompts="train").rl_hargo, data)) == 9  # the train split instead
    (data / "plp" / "rl.jsonl").write_text("")
    with pytest.raises(DataError, match=r"plp/rl.jsonl holds no records: prepare made no RL-only plp items.*"
                                        r"prepare.rl_fraction.*rl_hargo.prompts: train"):
        task_dataset(hargo_params().rl_hargo, data)
    with pytest.raises(DataError, match="plp/rl.jsonl is missing"):
        (data / "plp" / "rl.jsonl").unlink()
        task_dataset(hargo_params().rl_hargo, data)


def test_config_mistakes_fail_before_training(tmp_path: Path) -> None:
    rp = hargo_params().rl_hargo
    assert hargo_config(rp, tmp_path, [], "hargo", 1).estimator == "hargo"
    with pytest.raises(ValueError, match="needs the reference model"):
        HARGOConfig(output_dir=str(tmp_path), beta=0.0, use_cpu=True)
    with pytest.raises(ConfigError, match="rl_hargo.trl.loss_type: owned"):
        hargo_config(hargo_params(trl={"loss_type": "dapo"}).rl_hargo, tmp_path, [], "hargo", 1)
    with pytest.raises(ConfigError, match="top_entropy_quantile"):
        hargo_config(hargo_params(trl={"top_entropy_quantile": 0.2}).rl_hargo, tmp_path, [], "hargo", 1)
    with pytest.raises(ConfigError, match="method 'ppo'"):
        hargo_config(rp, tmp_path, [], "ppo", 1)
    with pytest.raises(ConfigError, match="rl_hargo.beta"):
        parse_params({"rl_hargo": {"beta": 0.0}})


def _scored_batch(trainer: HARGOTrainer) -> dict[str, Any]:
    """One generation batch: two prompts, G completions each, scored and estimated by the trainer's hooks."""
    rows = [trainer.train_dataset[i] for i in (0, 5)]
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train(); TRL's loss reads it
    return trainer._generate_and_score_completions([dict(r) for r in rows for _ in range(G)])


def test_weights_reach_the_loss_and_its_gradient(inputs: tuple[Path, Path], tmp_path: Path) -> None:
    data, sft = inputs
    trainer = build_hargo_trainer(hargo_params(), data, sft, tmp_path / "out", [], "hargo", 1,
                                  reward_funcs=[varied_reward])
    batch = _scored_batch(trainer)
    w = batch["hargo_weights"]
    assert w.shape == (2 * G,) and torch.allclose(w.view(2, G).sum(1), torch.full((2,), float(G)))
    assert trainer.ema is not None and batch["ref_per_token_logps"].shape == batch["completion_ids"].shape

    def loss_and_grad(weights: torch.Tensor, advantages: torch.Tensor | None = None) -> tuple[float, torch.Tensor]:
        trainer.model.zero_grad()
        changed = {**batch, "hargo_weights": weights}
        if advantages is not None:
            changed["advantages"] = advantages
        loss = trainer._compute_loss(trainer.model, changed)
        loss.backward()
        grad = torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])
        return loss.item(), grad.clone()

    base_loss, base_grad = loss_and_grad(w)
    heavier = w.clone()
    heavier[0] += 0.5  # one response's weight changed
    loss2, grad2 = loss_and_grad(heavier)
    assert loss2 != pytest.approx(base_loss, abs=1e-9)
    assert not torch.allclose(grad2, base_grad, atol=1e-9)

    # The KL term is weighted too: with zero advantages the loss is beta * sum_i w_i KL_i, which moves with w once
    # the policy differs from the reference.
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    zero = torch.zeros_like(batch["advantages"])
    uniform = torch.ones_like(w)
    skewed = torch.zeros_like(w)
    skewed[0], skewed[G] = G, G  # all weight of each group on its first response
    kl_uniform, _ = loss_and_grad(uniform, zero)
    kl_skewed, _ = loss_and_grad(skewed, zero)
    assert kl_uniform > 0 and kl_skewed > 0 and kl_uniform != pytest.approx(kl_skewed, rel=1e-4)


def test_uniform_weights_give_trls_grpo_loss(inputs: tuple[Path, Path], tmp_path: Path) -> None:
    from trl import GRPOTrainer

    data, sft = inputs
    trainer = build_hargo_trainer(hargo_params(), data, sft, tmp_path / "out", [], "grpo", 1,
                                  reward_funcs=[varied_reward])
    batch = _scored_batch(trainer)
    assert torch.equal(batch["hargo_weights"], torch.ones(2 * G))  # GRPO: w = 1/G, stored as G w
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.add_(0.05 * torch.randn_like(p))  # so the KL term is not zero
        ours = trainer._compute_loss(trainer.model, batch)
        trls = GRPOTrainer._compute_loss(trainer, trainer.model, batch)  # loss_type grpo
    assert float(ours) == pytest.approx(float(trls), rel=1e-5)


def test_a_run_saves_and_resume_restores_the_ema(inputs: tuple[Path, Path], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    data, sft = inputs
    out = tmp_path / "rl"
    first = run_hargo(hargo_params(), data, sft, out, [], "hargo", 1, reward_funcs=[varied_reward])
    assert first["global_step"] == 2 and first["resumed_from"] is None
    saved = json.loads((out / "checkpoint-2" / STATE_FILE).read_text())
    assert saved["estimator"] == "hargo" and saved["ema"] == pytest.approx(first["ema"])
    history = json.loads((out / "final" / "log_history.json").read_text())
    assert any("hargo/ema" in e and "hargo/weight_max" in e for e in history)
    record = json.loads((out / "final" / RECORD_FILE).read_text())
    assert (record["method"], record["seed"], record["kind"], record["start"]) == ("hargo", 1, "online",
                                                                                   model_hash(sft))
    assert record["rewards"]["reward"] == "hpc_tasks" and "rewards/tasks.py" in record["rewards"]["sources"]

    weights = (out / "final" / "model.safetensors").read_bytes()
    again = run_hargo(hargo_params(), data, sft, out, [], "hargo", 1, reward_funcs=[varied_reward])
    assert again["global_step"] == 2 and again["ema"] == pytest.approx(first["ema"])  # finished: not one step more
    assert not (out / "checkpoint-3").exists() and (out / "final" / "model.safetensors").read_bytes() == weights

    seen: list[float | None] = []
    real = hargo_mod.ADVANTAGES.get("hargo")

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["ema"])
        return real(*args, **kwargs)

    monkeypatch.setattr(hargo_mod.ADVANTAGES, "get", lambda name: spy)
    second = run_hargo(hargo_params(max_steps=3), data, sft, out, [], "hargo", 1, reward_funcs=[varied_reward])
    assert second["resumed_from"] == str(out / "checkpoint-2") and second["global_step"] == 3
    assert seen and seen[0] == pytest.approx(saved["ema"])  # the resumed run starts from the saved baseline

    with pytest.raises(DataError, match="written by estimator 'hargo'"):
        run_hargo(hargo_params(max_steps=4), data, sft, out, [], "grpo", 1, reward_funcs=[varied_reward])
