"""The HPC-GPT row's recipe (hpcrl_core/training/hpcgpt.py) mapped onto the SFT assembly: epochs become steps over the
records, the task families alone, the start point's model size. The run itself: tests/flows/test_hargo_flows.py.

Run: pytest tests/training/test_hpcgpt.py
"""

from __future__ import annotations

import pytest

from hpcrl_core.config import parse_params
from hpcrl_core.errors import ConfigError
from hpcrl_core.training.hpcgpt import hpcgpt_params


def test_the_recipe_becomes_the_sft_section() -> None:
    params = parse_params({"hpcgpt": {"epochs": 3, "per_device_train_batch_size": 8, "learning_rate": 5e-4,
                                      "families": ["race_c", "plp"]},
                           "sft_hargo": {"max_length": 640, "gradient_accumulation_steps": 2,
                                         "tiny": {"hidden_size": 64, "num_heads": 2, "num_kv_heads": 2}}})
    mapped = hpcgpt_params(params, records=1001, seed=7)
    sp = mapped.sft
    assert sp.max_steps == 188  # ceil(3 * 1001 / (8 * 2))
    assert (sp.families, sp.repeats, sp.seed, sp.learning_rate) == (("race_c", "plp"), {}, 7, 5e-4)
    assert (sp.lr_scheduler_type, sp.warmup_ratio, sp.weight_decay) == ("cosine", 0.03, 0.0)
    assert sp.max_length == 640 and sp.gradient_accumulation_steps == 2  # the rest is the start point's
    assert mapped.model.tiny.hidden_size == 64 and params.model.tiny.hidden_size != 64
    assert params.sft.max_steps != 188  # the original params are untouched


def test_bad_recipes_are_refused() -> None:
    with pytest.raises(ConfigError, match="families must name task families"):
        parse_params({"hpcgpt": {"families": ["dgemm"]}})
    with pytest.raises(ConfigError, match="epochs"):
        parse_params({"hpcgpt": {"epochs": 0}})
