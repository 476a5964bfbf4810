"""Exploration aids (hpcrl_core/algorithms/exploration.py): which rows elite replay replaces, which kinds plan
novelty may force a visit to (from the corpus and the archive), and which rows it forces.

Run: ``pytest tests/algorithms/test_exploration.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcrl_core.algorithms.archive import QDArchive
from hpcrl_core.algorithms.exploration import (
    kind_of,
    kind_openings,
    kind_requirements,
    novel_kinds,
    opening_ids,
    opening_plan_line,
    plan_elites,
    plan_novel_kinds,
    plan_prefix,
)
from hpcrl_core.bench.techniques import Technique as T
from hpcrl_core.data.dgemm.corpus import CorpusKernel, plan_line, sft_records
from hpcrl_core.data.dgemm.problems import make_problems
from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.models.tokenizer import train_tokenizer

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


def test_the_opening_of_sft_completions_names_its_kind() -> None:
    from hpcrl_core.data.dgemm.problems import make_problems as problems
    from hpcrl_core.data.schema import Record

    kernel = CorpusKernel(name="0007:packed:packed-ext8-12x16", kind="packed", code="void dgemm() {}\n",
                          techniques=frozenset(), gflops=1.0, cv=0.0, intended=frozenset(), n=256)
    records: list[Record] = sft_records([kernel], problems("train", 0, 4), seed=1, per_kernel=1,
                                        kind_weights={"packed": 1.0}, plan=True)
    completion = records[0].completion[0]["content"]  # exactly what SFT trains on
    assert kind_of(completion) == "packed" and completion.startswith(plan_prefix("packed") + ": ")
    assert kind_of(plan_line(kernel.kind, kernel.name)) == "packed"  # a model that drops the fence
    assert kind_of("```c\n#include <omp.h>\n// plan: packed: x\n") is None  # the plan line must open the code
    assert opening_plan_line(completion) == plan_line(kernel.kind, kernel.name)
    assert opening_plan_line(plan_line(kernel.kind, kernel.name)) == plan_line(kernel.kind, kernel.name)
    assert opening_plan_line("```c\n#include <omp.h>\n// plan: packed: x\n") is None
    assert opening_plan_line("```c\n// plan: packed: cut short") is None  # no newline: not a whole line
    without = sft_records([kernel], problems("train", 0, 4), seed=1, per_kernel=1, kind_weights={"packed": 1.0})
    assert kind_of(without[0].completion[0]["content"]) is None


def test_novel_kinds_are_permitted_and_not_yet_archived_for_the_problem(tmp_path: Path) -> None:
    needs = kind_requirements(_corpus(tmp_path / "corpus.jsonl"))
    ids = [p.id for p in make_problems("train", 0, 2)]
    archive = QDArchive(ids)
    rich = ["loop_reorder", "cache_blocking", "register_blocking", "simd"]
    assert novel_kinds(ids[0], rich, archive, needs) == ["naive", "packed", "reorder"]
    assert novel_kinds(ids[0], ["simd"], archive, needs) == ["naive"]  # reorder and packed need more
    archive.add(ids[0], [], 2.0, plan_prefix("naive") + ": x\ncode```", step=1, stage=0)
    archive.add(ids[0], ["loop_reorder", "simd"], 9.0, plan_prefix("reorder") + ": y\ncode", step=2, stage=1)
    assert novel_kinds(ids[0], rich, archive, needs) == ["packed"]
    # a kernel the visit does not permit (simd) does not count as held: reorder is still new under loop_reorder only
    assert novel_kinds(ids[0], ["loop_reorder"], archive, needs) == ["reorder"]
    assert novel_kinds(ids[1], rich, archive, needs) == ["naive", "packed", "reorder"]  # per problem


def test_the_first_row_of_drawn_groups_is_forced_reproducibly(tmp_path: Path) -> None:
    needs = kind_requirements(_corpus(tmp_path / "corpus.jsonl"))
    ids = [p.id for p in make_problems("train", 0, 3)]
    archive = QDArchive(ids)
    archive.add(ids[1], [], 2.0, plan_prefix("naive") + ": x\ncode", step=1, stage=0)
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


def test_elites_replace_the_last_row_of_planned_groups_within_the_permitted_set() -> None:
    ids = [p.id for p in make_problems("train", 0, 3)]
    archive = QDArchive(ids)
    archive.add(ids[0], [], 2.0, "plain", step=1, stage=0)
    archive.add(ids[0], ["openmp"], 9.0, "omp", step=2, stage=1)
    archive.add(ids[1], ["simd"], 5.0, "simd", step=3, stage=1)
    rows = ([{"problem_id": ids[0], "permitted": ["openmp"]}] * 3 + [{"problem_id": ids[0], "permitted": []}] * 3
            + [{"problem_id": ids[1], "permitted": []}] * 3 + [{"problem_id": ids[2], "permitted": ["simd"]}] * 3)
    assert plan_elites(rows, 3, archive, 0.0, (1, 0)) == {}
    # every group drawn: the fastest kernel its permitted set allows; none for a set nothing archived fits
    assert plan_elites(rows, 3, archive, 1.0, (1, 0)) == {2: "omp", 5: "plain"}
    # rows that do not fall into whole groups of one problem are left as sampled (ids0 ids0 ids1 | ids1 ids1 ids2 | ..)
    assert plan_elites(rows[4:], 3, archive, 1.0, (1, 0)) == {}
    # half the visits, drawn by seed, step and problem: the same key gives the same plan (a resume replays it)
    many = [{"problem_id": ids[0], "permitted": []}] * 200
    drawn = plan_elites(many, 2, archive, 0.5, (7, 3))
    assert drawn == plan_elites(many, 2, archive, 0.5, (7, 3)) and 30 <= len(drawn) <= 70
    assert drawn != plan_elites(many, 2, archive, 0.5, (7, 4))
    assert set(drawn) <= set(range(1, 200, 2))


def test_with_behind_only_problems_whose_last_visit_fell_behind_the_elite_get_it() -> None:
    ids = [p.id for p in make_problems("train", 0, 3)]
    archive = QDArchive(ids)
    for pid in ids:
        archive.add(pid, [], 40.0, f"fast {pid}", step=1, stage=0)
    archive.record_visit(ids[0], 37.0)  # within 0.9 of the elite: the policy still writes it
    archive.record_visit(ids[1], 35.0)  # below 36: it fell behind
    rows = [{"problem_id": pid, "permitted": []} for pid in ids for _ in range(2)]
    assert plan_elites(rows, 2, archive, 1.0, (1, 0), behind=0.9) == {3: f"fast {ids[1]}", 5: f"fast {ids[2]}"}
    assert plan_elites(rows, 2, archive, 1.0, (1, 0)) == {1: f"fast {ids[0]}", 3: f"fast {ids[1]}",
                                                          5: f"fast {ids[2]}"}  # without: every drawn visit


# kernels whose plan lines a BPE trained on them joins as the DGEMM tokenizer does: "// plan: packed: packed-ex"
# is one token, and so is "// plan: packed: packed-" where the parameters go on otherwise
PLANNED = [("packed", "packed-ext4-6x8-kc256"), ("packed", "packed-ext4-4x8-kc128"),
           ("packed", "packed-ext4-6x4-kc64"), ("packed", "packed-intrin4-4x12-kc256"),
           ("packed", "packed-scalar-4x4-kc64"), ("naive", "ijk"), ("naive", "ikj")]
CODE = "#include <string.h>\nvoid dgemm(int n) {}\n"


def test_kind_openings_are_how_sft_completions_of_each_kind_open(tmp_path: Path) -> None:
    from hpcrl_core.data.dgemm.problems import make_problems as problems

    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"name": f"{i:04d}:{k}:{p}", "kind": k, "code": CODE, "techniques": []})
                            + "\n" for i, (k, p) in enumerate(PLANNED)))
    texts = kind_openings(path)
    assert sorted(texts) == ["naive", "packed"] and len(texts["packed"]) == 5
    kernel = CorpusKernel(name="0000:packed:packed-ext4-6x8-kc256", kind="packed", code=CODE,
                          techniques=frozenset(), gflops=1.0, cv=0.0, intended=frozenset(), n=256)
    sft = sft_records([kernel], problems("train", 0, 4), seed=1, per_kernel=1, kind_weights={"packed": 1.0},
                      plan=True)
    assert sft[0].completion[0]["content"].startswith(texts["packed"][0])  # exactly how SFT text opens
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"kind": "naive", "techniques": [], "name": "0:naive:x"}) + "\n")
    with pytest.raises(DataError, match="bad.jsonl:1 lacks"):
        kind_openings(bad)


def test_forced_openings_are_the_ids_sft_completions_open_with() -> None:
    texts: dict[str, list[str]] = {}
    for kind, params in PLANNED:
        texts.setdefault(kind, []).append(f"```c\n// plan: {kind}: {params}\n{CODE.splitlines()[0]}\n")
    tok = train_tokenizer([t + CODE + "```" for ts in texts.values() for t in ts] * 40, vocab_size=330,
                          min_frequency=2)
    for kind, kind_texts in texts.items():
        choices = opening_ids(tok, kind, kind_texts)
        assert len(choices) == len(kind_texts)
        for ids, text in zip(choices, kind_texts, strict=True):
            inside = tok(text, add_special_tokens=False)["input_ids"]
            # a prefix of the ids SFT text has, spelling the kind's name whole, and no id longer than that needs
            assert inside[:len(ids)] == ids and tok.decode(ids).startswith(plan_prefix(kind))
            assert not tok.decode(ids[:-1]).startswith(plan_prefix(kind))
    packed = {tuple(ids) for ids in opening_ids(tok, "packed", texts["packed"])}
    assert len(packed) > 1  # the tokenizer opens packed kernels in more than one way: each is kept
    alone = tok(plan_prefix("packed"), add_special_tokens=False)["input_ids"]
    assert not any(tuple(alone) == ids for ids in packed)  # what tokenizing the opening alone would have forced
    with pytest.raises(ConfigError, match="holds no kernel"):
        opening_ids(tok, "tile_vec", [])
    with pytest.raises(ConfigError, match="does not reproduce"):
        opening_ids(tok, "packed", ["```c\n// plan: naive: ijk\n"])
