"""The family diagnostic's classifier (benchmarks/dgemm_families.py): a kernel is labelled with the kind of the
corpus kernel whose token multiset it shares most.

Run: ``pytest tests/test_dgemm_families.py``.
"""

from __future__ import annotations

from benchmarks.dgemm_families import jaccard, nearest, tokens
from hpcrl_core.data.dgemm.variants import generate_variants


def test_each_generated_kernel_is_nearest_to_its_own_kind() -> None:
    variants = generate_variants(3, 24)
    corpus = [{"name": v.name, "kind": v.kind, "code": v.code} for v in variants]
    bags = [tokens(v.code) for v in variants]
    for v in variants:
        assert nearest(v.code, corpus, bags) == (v.kind, 1.0)
    # a kernel cut to its first half is still nearer its own kind than a naive loop is to a packed kernel
    packed = next(v for v in variants if v.kind == "packed")
    naive = next(v for v in variants if v.kind == "naive")
    assert nearest(packed.code[: len(packed.code) // 2], corpus, bags)[0] == "packed"
    assert jaccard(tokens(naive.code), tokens(packed.code)) < 0.3
    assert jaccard(tokens(""), tokens("")) == 0.0
