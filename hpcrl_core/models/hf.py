"""A pretrained causal LM and its tokenizer from a local folder (``model.source: hf``); never the hub.

These machines reach no model hub: download a model elsewhere (e.g. ``hf download Qwen/Qwen2.5-Coder-0.5B-Instruct
--local-dir models/qwen``) and set ``model.hf.path`` to the folder. Every problem with the folder is a
``ConfigError`` naming ``model.hf.path``, raised before any training starts.

Test: ``pytest tests/models/test_hf.py``.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel, PreTrainedTokenizerBase

from hpcrl_core.config import HFModelParams
from hpcrl_core.errors import ConfigError
from hpcrl_core.models.tokenizer import tokenizer_from_folder

KEY = "model.hf.path"


def check_hf_folder(path: str | None) -> Path:
    """The folder of ``model.hf.path``, checked to exist and hold ``config.json``.

    Raises:
        ConfigError: no path, a missing folder, or no config.json in it.
    """
    if not path:
        raise ConfigError(f"{KEY}: received {path!r}; give a local folder holding config.json, the weights and "
                          f"the tokenizer (these machines reach no model hub)")
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ConfigError(f"{KEY}: the folder {folder} does not exist; download the model elsewhere and copy it "
                          f"here (e.g. with `hf download ID --local-dir DIR`), then set {KEY} to that folder")
    if not (folder / "config.json").is_file():
        found = sorted(p.name for p in folder.iterdir())[:10]
        raise ConfigError(f"{KEY}: {folder} has no config.json (found: {found or 'nothing'}); point {KEY} at a "
                          f"folder written by save_pretrained")
    return folder


def load_hf_model(params: HFModelParams) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load the model and tokenizer from ``params.path`` with ``local_files_only=True``.

    Args:
        params: ``model.hf``; ``dtype`` is the weights' dtype after loading.

    Returns:
        (model, tokenizer); the model in train mode.

    Raises:
        ConfigError: see ``check_hf_folder``; or the folder's tokenizer or weights cannot be loaded.
    """
    folder = check_hf_folder(params.path)
    try:
        # our own checkpoints (checkpoints/sft/final) tokenize exactly as in training
        tokenizer = tokenizer_from_folder(folder, trust_remote_code=params.trust_remote_code)
    except (OSError, ValueError, KeyError) as err:
        raise ConfigError(f"{KEY}: no loadable tokenizer in {folder} ({err}); save the model's tokenizer there "
                          f"too (tokenizer.save_pretrained)") from None
    try:
        model = AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True,
                                                     dtype=getattr(torch, params.dtype),
                                                     trust_remote_code=params.trust_remote_code)
    except (OSError, ValueError, KeyError) as err:
        raise ConfigError(f"{KEY}: cannot load a causal LM from {folder} ({err}); the folder needs config.json and "
                          f"the weights (model.safetensors or pytorch_model.bin); custom architectures need "
                          f"model.hf.trust_remote_code: true") from None
    model.train()
    return model, tokenizer
