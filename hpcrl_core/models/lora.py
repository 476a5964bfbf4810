"""LoRA adapters on a loaded model via peft (``model.lora``): only the adapters train, the base stays frozen.

Test: ``pytest tests/models/test_lora.py``.
"""

from __future__ import annotations

from peft import LoraConfig, PeftModel, TaskType, get_peft_model
from torch import nn
from transformers import PreTrainedModel
from transformers.pytorch_utils import Conv1D

from hpcrl_core.config import LoraParams
from hpcrl_core.errors import ConfigError

KEY = "model.lora.target_modules"


def linear_module_names(model: nn.Module) -> list[str]:
    """Distinct leaf names of the model's linear layers (what ``target_modules`` may name), sorted."""
    return sorted({name.rsplit(".", 1)[-1] for name, m in model.named_modules() if isinstance(m, nn.Linear | Conv1D)})


def apply_lora(model: PreTrainedModel, lora: LoraParams) -> PeftModel:
    """Wrap ``model`` with LoRA adapters on ``lora.target_modules`` (peft's default for the architecture if empty).

    Args:
        model: a causal LM (not already a PeftModel).
        lora: ``model.lora``.

    Returns:
        The PeftModel; only ``lora_A`` / ``lora_B`` weights require grad.

    Raises:
        ConfigError: a target module the model lacks (the message lists its linear modules), no target given for an
            architecture peft has no default for, or a model that already carries adapters.
    """
    if isinstance(model, PeftModel):
        raise ConfigError("model.lora: the model already carries adapters; merge them (merge_and_unload) and save "
                          "the base model before adding new ones")
    names = linear_module_names(model)
    unknown = [t for t in lora.target_modules if t not in names]
    if unknown:
        raise ConfigError(f"{KEY}: {unknown} not in the model ({type(model).__name__}); its linear modules are: "
                          f"{', '.join(names)}")
    config = LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout, task_type=TaskType.CAUSAL_LM,
                        target_modules=list(lora.target_modules) or None)
    try:
        peft_model = get_peft_model(model, config)
    except ValueError as err:
        raise ConfigError(f"{KEY}: peft could not place adapters ({err}); name them explicitly, choose from: "
                          f"{', '.join(names)}") from None
    assert isinstance(peft_model, PeftModel)
    return peft_model
