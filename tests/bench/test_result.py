"""Tests of ``BenchResult``'s reference rule: the figure a kernel is compared with is its timing node's numpy at its
size, else a fallback at that size; and of ``node_references``, the per-size median of those figures.

Run: pytest tests/bench/test_result.py
"""

from __future__ import annotations

from hpcrl_core.bench.result import BenchResult, Status, node_references


def _r(n: int, node_ref: float | None = None, status: Status = Status.OK) -> BenchResult:
    extra = {} if node_ref is None else {"node_reference_gflops": node_ref}
    return BenchResult(status, n=n, gflops=1.0 if status is Status.OK else None, extra=extra)


def test_a_result_takes_its_nodes_figure_before_the_fallback_at_its_size() -> None:
    fallback = {64: 10.0, 96: 12.0}
    assert _r(64, 30.0).reference(fallback) == 30.0
    assert _r(64).reference(fallback) == 10.0 and _r(96).reference(fallback) == 12.0
    assert _r(80).reference(fallback) is None  # no figure at that size anywhere
    assert _r(64, 0.5).node_reference == 0.5 and _r(64).node_reference is None
    # the agents' JSON may carry the figure as an int or a string of one
    assert BenchResult(Status.OK, n=64, extra={"node_reference_gflops": "7"}).node_reference == 7.0


def test_node_references_are_per_size_medians_of_the_attached_figures() -> None:
    results = [_r(64, 10.0), _r(64, 30.0), _r(64, 14.0), _r(96, 8.0), _r(96), _r(128),
               _r(64, status=Status.COMPILE_ERROR)]
    assert node_references(results) == {64: 14.0, 96: 8.0}
    assert node_references([]) == {}
