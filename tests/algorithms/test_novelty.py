"""Plan novelty (hpcrl_core/algorithms/novelty.py): which kinds a visit may be forced to, from the corpus and the
archive, and which rows are forced.

Run: ``pytest tests/algorithms/test_novelty.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcrl_core.algorithms.archive import QDArchive
from hpcrl_core.algorithms.novelty import kind_of, kind_requirements, novel_kinds, plan_novel_kinds, plan_prefix
from hpcrl_core.bench.techniques import Technique as T
from hpcrl_core.data.dgemm.corpus import CorpusKernel, plan_line
from hpcrl_core.data.dgemm.problems import make_problems
from hpcrl_core.errors import DataError

CORPUS = [("naive", []), ("naive", ["openmp"]), ("reorder", ["loop_reorder"]),
          ("reorder", ["loop_reorder", "simd"]),
          ("packed", ["cache_blocking", "loop_reorder", "register_blocking", "simd"]),
          ("packed", ["cache_blocking", "loop_reorder", "register_blocking", "openmp"])]


def _corpus(path: Path, rows: list[tuple[str, list[str]]] = CORPUS) -> Path:
    path.write_text("".join(json.dumps({"name": f"{i:04d}:{k}:x", "kind": k, "code": "c", "techniques": t}) + "\n"
                            for i, (k, t) in enumerate(rows)))
    return path


def test_a_kind_requires_what_every_corpus_kernel_of_it_uses(tmp_path: Path) -> None:
    needs = kind_requirements(_corpus(tmp_path / "corpus.jsonl"))
    assert needs == {"naive": frozenset(), "reorder": frozenset({T.LOOP_REORDER}),
                     "packed": frozenset({T.CACHE_BLOCKING, T.LOOP_REORDER, T.REGISTER_BLOCKING})}


def test_a_missing_or_malformed_corpus_is_named(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="dvc repro prepare"):
        kind_requirements(tmp_path / "absent.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"kind": "naive"}) + "\n")
    with pytest.raises(DataError, match="bad.jsonl:1 lacks"):
        kind_requirements(bad)
    with pytest.raises(DataError, match="unknown|not a known"):
        kind_requirements(_corpus(tmp_path / "odd.jsonl", [("naive", ["magic"])]))


def test_the_plan_line_sft_writes_names_its_kind() -> None:
    kernel = CorpusKernel(name="0007:packed:packed-ext8-12x16", kind="packed", code="void dgemm() {}",
                          techniques=frozenset(), gflops=1.0, cv=0.0, intended=frozenset(), n=256)
    assert kind_of(plan_line(kernel) + kernel.code) == "packed"
    assert plan_line(kernel).startswith(plan_prefix("packed") + " ")
    assert kind_of("#include <omp.h>\n// plan: packed: x\n") is None  # a plan line must open the completion


def test_novel_kinds_are_permitted_and_not_yet_archived_for_the_problem(tmp_path: Path) -> None:
    needs = kind_requirements(_corpus(tmp_path / "corpus.jsonl"))
    ids = [p.id for p in make_problems("train", 0, 2)]
    archive = QDArchive(ids)
    rich = ["loop_reorder", "cache_blocking", "register_blocking", "simd"]
    assert novel_kinds(ids[0], rich, archive, needs) == ["naive", "packed", "reorder"]
    assert novel_kinds(ids[0], ["simd"], archive, needs) == ["naive"]  # reorder and packed need more
    archive.add(ids[0], [], 2.0, plan_prefix("naive") + " x\ncode", step=1, stage=0)
    archive.add(ids[0], ["loop_reorder", "simd"], 9.0, plan_prefix("reorder") + " y\ncode", step=2, stage=1)
    assert novel_kinds(ids[0], rich, archive, needs) == ["packed"]
    # a kernel the visit does not permit (simd) does not count as held: reorder is still new under loop_reorder only
    assert novel_kinds(ids[0], ["loop_reorder"], archive, needs) == ["reorder"]
    assert novel_kinds(ids[1], rich, archive, needs) == ["naive", "packed", "reorder"]  # per problem


def test_the_first_row_of_drawn_groups_is_forced_reproducibly(tmp_path: Path) -> None:
    needs = kind_requirements(_corpus(tmp_path / "corpus.jsonl"))
    ids = [p.id for p in make_problems("train", 0, 3)]
    archive = QDArchive(ids)
    archive.add(ids[1], [], 2.0, plan_prefix("naive") + " x\ncode", step=1, stage=0)
    rows = ([{"problem_id": ids[0], "permitted": []}] * 2 + [{"problem_id": ids[1], "permitted": []}] * 2
            + [{"problem_id": ids[2], "permitted": ["loop_reorder"]}] * 2)
    assert plan_novel_kinds(rows, 2, archive, needs, 0.0, (1, 0)) == {}
    # ids[1] already holds the only kind its empty permitted set allows: nothing to force there
    assert plan_novel_kinds(rows, 2, archive, needs, 1.0, (1, 0)) == {0: "naive", 4: plan_novel_kinds(
        rows, 2, archive, needs, 1.0, (1, 0))[4]}
    assert plan_novel_kinds(rows, 2, archive, needs, 1.0, (1, 0))[4] in ("naive", "reorder")
    assert plan_novel_kinds(rows[1:], 2, archive, needs, 1.0, (1, 0)) == {}  # no whole group of one problem
    many = [{"problem_id": ids[0], "permitted": ["loop_reorder"]}] * 400
    drawn = plan_novel_kinds(many, 2, archive, needs, 0.5, (7, 3))
    assert drawn == plan_novel_kinds(many, 2, archive, needs, 0.5, (7, 3)) and 60 <= len(drawn) <= 140
    assert set(drawn) <= set(range(0, 400, 2)) and set(drawn.values()) == {"naive", "reorder"}
    assert drawn != plan_novel_kinds(many, 2, archive, needs, 0.5, (7, 4))
