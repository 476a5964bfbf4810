"""Tests of the QD archive: best kernel per niche, coverage and QD score, JSON round trip and the heatmap PNG.

Run: pytest tests/algorithms/test_archive.py
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from hpcrl_core.algorithms.archive import COMBINATIONS, QDArchive, combination_label
from hpcrl_core.bench.techniques import Technique
from hpcrl_core.data.dgemm.problems import make_problems
from hpcrl_core.errors import ConfigError, DataError

T = Technique
IDS = [p.id for p in make_problems("train", 3, 4)]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _filled() -> QDArchive:
    archive = QDArchive(IDS)
    archive.add(IDS[0], [], 1.5, "plain", step=1, stage=0)
    archive.add(IDS[0], [T.SIMD], 6.0, "simd", step=2, stage=1)
    archive.add(IDS[0], [T.SIMD, T.OPENMP], 40.0, "simd+omp", step=5, stage=2)
    archive.add(IDS[2], ["cache_blocking"], 3.0, "tiled", step=3, stage=1)
    return archive


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_a_niche_keeps_only_its_fastest_kernel() -> None:
    archive = QDArchive(IDS)
    assert archive.add(IDS[0], [T.SIMD], 10.0, "first", step=1, stage=1) is True
    assert archive.add(IDS[0], [T.SIMD], 5.0, "slower", step=2, stage=1) is False
    assert archive.add(IDS[0], [T.SIMD], 10.0, "tie", step=3, stage=1) is False  # a tie keeps the earlier one
    kept = archive.niche(IDS[0], [T.SIMD])
    assert kept is not None and kept.code == "first"
    assert archive.add(IDS[0], ["simd"], 12.5, "faster", step=4, stage=2) is True
    elite = archive.niche(IDS[0], [T.SIMD])
    assert elite is not None and (elite.gflops, elite.code, elite.step, elite.stage) == (12.5, "faster", 4, 2)
    assert len(archive.niches()) == 1


def test_each_technique_set_is_its_own_niche() -> None:
    archive = _filled()
    assert [(e.problem_id, combination_label(e.techniques)) for e in archive.niches()] == [
        (IDS[0], "-"), (IDS[0], "S"), (IDS[0], "OS"), (IDS[2], "C")]
    best = archive.best(IDS[0])
    assert best is not None and best.code == "simd+omp"
    assert archive.best(IDS[1]) is None
    assert archive.coverage() == pytest.approx(4 / (len(IDS) * 32))
    assert archive.qd_score() == pytest.approx(1.5 + 6.0 + 40.0 + 3.0)
    assert archive.stats() == {"archive/niches": 4.0, "archive/coverage": pytest.approx(4 / 128),
                               "archive/qd_score": pytest.approx(50.5), "archive/best_gflops": 40.0}


def test_the_best_kernel_within_a_permitted_set() -> None:
    archive = _filled()
    within = archive.best_within
    assert within(IDS[0], [T.SIMD, T.OPENMP, T.LOOP_REORDER]).code == "simd+omp"  # type: ignore[union-attr]
    assert within(IDS[0], ["simd"]).code == "simd"  # type: ignore[union-attr]  # the faster one uses OpenMP
    assert within(IDS[0], []).code == "plain"  # type: ignore[union-attr]
    assert within(IDS[2], []) is None and within(IDS[1], list(T)) is None
    with pytest.raises(ValueError):
        within(IDS[0], ["warp_shuffle"])


def test_the_32_combinations_are_distinct_subsets_with_distinct_labels() -> None:
    assert len(set(COMBINATIONS)) == 32 and COMBINATIONS[0] == frozenset() and len(COMBINATIONS[-1]) == 5
    assert len({combination_label(c) for c in COMBINATIONS}) == 32


@pytest.mark.parametrize("gflops", [0.0, -3.0, float("nan"), float("inf")])
def test_rejects_gflops_of_no_verified_kernel(gflops: float) -> None:
    archive = QDArchive(IDS)
    with pytest.raises(ValueError, match="gflops"):
        archive.add(IDS[0], [T.SIMD], gflops, "code", step=0, stage=0)
    assert archive.niches() == []


def test_rejects_unknown_problems_techniques_and_stages() -> None:
    archive = QDArchive(IDS)
    with pytest.raises(KeyError, match="unknown problem id"):
        archive.add("nope", [], 1.0, "code", step=0, stage=0)
    with pytest.raises(ValueError, match="unknown technique"):
        archive.add(IDS[0], ["vectorise"], 1.0, "code", step=0, stage=0)
    with pytest.raises(ValueError, match="stage"):
        archive.add(IDS[0], [], 1.0, "code", step=0, stage=6)
    with pytest.raises(ConfigError, match="more than once"):
        QDArchive([IDS[0], IDS[0]])
    assert archive.stats()["archive/niches"] == 0


def test_json_round_trip(tmp_path: Path) -> None:
    archive = _filled()
    path = tmp_path / "ckpt" / "qd_archive.json"
    archive.save(path)
    loaded = QDArchive.load(path, problem_ids=IDS)
    assert loaded.niches() == archive.niches() and loaded.stats() == archive.stats()
    assert loaded.problem_ids == IDS
    assert loaded.add(IDS[0], [T.SIMD, T.OPENMP], 39.0, "slower", step=9, stage=2) is False  # bests survive


def test_load_refuses_other_problems_and_broken_files(tmp_path: Path) -> None:
    path = tmp_path / "qd_archive.json"
    _filled().save(path)
    with pytest.raises(ConfigError, match="other problems"):
        QDArchive.load(path, problem_ids=IDS[:3])
    state = json.loads(path.read_text())
    state["elites"][0]["gflops"] = -1
    path.write_text(json.dumps(state))
    with pytest.raises(DataError, match="elite #0"):
        QDArchive.load(path)
    with pytest.raises(DataError, match="no such"):
        QDArchive.load(tmp_path / "absent.json")


def test_the_last_visit_of_each_problem_is_kept_and_saved(tmp_path: Path) -> None:
    archive = _filled()
    assert archive.last_visit(IDS[0]) is None  # never visited
    archive.record_visit(IDS[0], 30.0)
    archive.record_visit(IDS[0], 0.0)  # the next visit verified nothing: it replaces the faster one
    archive.record_visit(IDS[1], 12.5)
    assert (archive.last_visit(IDS[0]), archive.last_visit(IDS[1])) == (0.0, 12.5)
    path = tmp_path / "qd_archive.json"
    archive.save(path)
    loaded = QDArchive.load(path, problem_ids=IDS)
    assert (loaded.last_visit(IDS[0]), loaded.last_visit(IDS[1]), loaded.last_visit(IDS[2])) == (0.0, 12.5, None)
    state = json.loads(path.read_text())
    del state["last_visit"]  # an archive saved before visits were kept still loads, with none
    path.write_text(json.dumps(state))
    assert QDArchive.load(path).last_visit(IDS[1]) is None
    state["last_visit"] = {IDS[0]: -1.0}
    path.write_text(json.dumps(state))
    with pytest.raises(DataError, match="last visit"):
        QDArchive.load(path)
    with pytest.raises(KeyError, match="unknown problem"):
        archive.record_visit("nope", 1.0)
    with pytest.raises(ValueError, match="finite number >= 0"):
        archive.record_visit(IDS[0], float("nan"))


def test_heatmap_of_empty_and_filled_archives(tmp_path: Path) -> None:
    empty, filled = tmp_path / "empty.png", tmp_path / "sub" / "filled.png"
    QDArchive(IDS).heatmap(empty)
    _filled().heatmap(filled)
    for path in (empty, filled):
        width, height = _png_size(path)
        assert width >= 600 and height >= 300
        assert path.stat().st_size > 10_000  # a drawn grid, labels and colour bar, not a blank canvas
    assert empty.read_bytes() != filled.read_bytes()
    assert not list(tmp_path.rglob(".*.tmp"))  # written atomically, no leftovers


def test_heatmap_size_is_capped_for_many_problems(tmp_path: Path) -> None:
    ids = [f"p{i:04d}" for i in range(2000)]
    archive = QDArchive(ids)
    for i in range(0, 2000, 7):
        archive.add(ids[i], list(COMBINATIONS[i % 32]), 1.0 + i, f"k{i}", step=i, stage=len(COMBINATIONS[i % 32]))
    archive.heatmap(tmp_path / "many.png")
    width, height = _png_size(tmp_path / "many.png")
    assert width <= 1200 and height <= 2400
