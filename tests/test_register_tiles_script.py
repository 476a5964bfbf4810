"""benchmarks/register_tiles.py: verified vector kernels grouped by (plan kind, VW, MR, NV) with the registers the
tile holds and whether that fits; scalar kernels, failed samples and kernels without the constants left out; a
verified sample without GFLOPS and a folder without samples refused by name.

Run: pytest tests/test_register_tiles_script.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.register_tiles import main, tile_shape


def _code(kind: str, mr: int, nv: int, vector: bool = True) -> str:
    vec = "typedef double v4d __attribute__((vector_size(VW * sizeof(double))));\n" if vector else ""
    return f"```c\n// plan: {kind}: x\n#define VW 4\n#define NV {nv}\n#define MR {mr}\n{vec}void dgemm(void) {{}}\n```"


def _sample(kind: str, mr: int, nv: int, gflops: float | None, status: str = "ok", model: str = "rl",
            vector: bool = True) -> dict:
    return {"model": model, "status": status, "gflops": gflops, "completion": _code(kind, mr, nv, vector)}


def _write(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True)
    (folder / "eval_dgemm_samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_tile_shape_needs_a_vector_type_and_all_three_constants() -> None:
    assert tile_shape(_code("packed", 6, 2)) == ("packed", 4, 6, 2)
    assert tile_shape(_code("packed", 6, 2, vector=False)) is None
    assert tile_shape(_code("packed", 6, 2).replace("#define MR 6\n", "")) is None
    assert tile_shape(_code("packed", 0, 2)) is None


def test_rows_per_shape_with_fit_and_percentiles(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _write(tmp_path / "a", [_sample("packed", 6, 2, 30.0), _sample("packed", 6, 2, 40.0, model="sft"),
                                _sample("packed", 4, 4, 20.0), _sample("packed", 4, 4, 99.0, status="wrong_result"),
                                _sample("packed", 6, 2, 5.0, vector=False)])
    b = _write(tmp_path / "b", [_sample("tile_vec", 4, 3, 25.0)])
    assert main([str(a), str(b / "eval_dgemm_samples.jsonl"), "--registers", "16"]) == 0
    rows = {line.split("|")[1].strip() + line.split("|")[3].strip(): line
            for line in capsys.readouterr().out.splitlines()[2:]}
    assert set(rows) == {"packed6 x 2", "packed4 x 4", "tile_vec4 x 3"}
    assert "| 15 | yes | rl 1, sft 1 | 35.0 | 30.0 | 40.0 |" in rows["packed6 x 2"]
    assert "| 21 | no (16) | rl 1 | 20.0 |" in rows["packed4 x 4"]  # the failed 99 GFLOPS sample is not counted
    assert "| 16 | yes |" in rows["tile_vec4 x 3"]


def test_bad_input_is_refused_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path)]) == 2
    assert "no eval_dgemm_samples.jsonl" in capsys.readouterr().err
    bad = _write(tmp_path / "bad", [_sample("packed", 6, 2, None)])
    assert main([str(bad)]) == 2
    assert "eval_dgemm_samples.jsonl:1: a verified sample without a GFLOPS figure" in capsys.readouterr().err
    empty = _write(tmp_path / "empty", [_sample("naive", 1, 1, 2.0, vector=False)])
    assert main([str(empty)]) == 0
    assert "no verified sample" in capsys.readouterr().out
