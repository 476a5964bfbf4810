"""benchmarks/register_tiles.py: verified vector kernels grouped by (plan kind, VW, MR, NV, k unroll) with the
registers the tile holds and whether that fits; scalar kernels, failed samples and kernels without the constants left
out; a verified sample without GFLOPS and a folder without samples refused by name; the corpus's generated packed
kernels timed with ``--data`` under their own unroll.

Run: pytest tests/test_register_tiles_script.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from benchmarks.register_tiles import k_unroll, main, tile_shape
from hpcrl_core.data.dgemm.kinds.packed import packed
from hpcrl_core.data.dgemm.kinds.style import random_style


def _code(kind: str, mr: int, nv: int, vector: bool = True, unroll: int = 1) -> str:
    vec = "typedef double v4d __attribute__((vector_size(VW * sizeof(double))));\n" if vector else ""
    loop = f"    for (; k + {unroll - 1} < kc; k += {unroll}) {{}}\n" if unroll > 1 else ""
    return (f"```c\n// plan: {kind}: x\n#define VW 4\n#define NV {nv}\n#define MR {mr}\n{vec}void dgemm(void) {{\n"
            f"{loop}}}\n```")


def _sample(kind: str, mr: int, nv: int, gflops: float | None, status: str = "ok", model: str = "rl",
            vector: bool = True, unroll: int = 1) -> dict:
    return {"model": model, "status": status, "gflops": gflops, "completion": _code(kind, mr, nv, vector, unroll)}


def _write(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True)
    (folder / "eval_dgemm_samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_tile_shape_needs_a_vector_type_and_all_three_constants() -> None:
    assert tile_shape(_code("packed", 6, 2)) == ("packed", 4, 6, 2, 1)
    assert tile_shape(_code("packed", 6, 2, unroll=4)) == ("packed", 4, 6, 2, 4)
    assert tile_shape(_code("packed", 6, 2), kind="corpus-kind") == ("corpus-kind", 4, 6, 2, 1)
    assert tile_shape(_code("packed", 6, 2, vector=False)) is None
    assert tile_shape(_code("packed", 6, 2).replace("#define MR 6\n", "")) is None
    assert tile_shape(_code("packed", 0, 2)) is None


def test_k_unroll_reads_the_unrolled_loop_of_generated_kernels() -> None:
    assert k_unroll("for (; kk + 1 < kc; kk += 2) {}") == 2
    assert k_unroll("for (int i = 0; i < n; i += 4) {}\nfor (; k + 3 < kc; k += 4) {}") == 4
    assert k_unroll("for (; k + 1 < kc; k += 4) {}") == 1  # not an unrolled loop's bound
    assert k_unroll("for (int k = 0; k < kc; k++) {}") == 1
    seen = set()
    for seed in range(40):  # the generator's own packed kernels: the unroll their names state
        draft = packed(random.Random(seed), random_style(random.Random(seed), vary_names=True))
        unroll = int(draft.desc.split("-u")[1].split("-")[0])
        assert k_unroll(draft.code) == unroll, draft.desc
        seen.add(unroll)
    assert seen == {1, 2, 4}


def test_rows_per_shape_with_fit_and_percentiles(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _write(tmp_path / "a", [_sample("packed", 6, 2, 30.0), _sample("packed", 6, 2, 40.0, model="sft"),
                                _sample("packed", 6, 2, 20.0, unroll=2),
                                _sample("packed", 4, 4, 20.0), _sample("packed", 4, 4, 99.0, status="wrong_result"),
                                _sample("packed", 6, 2, 5.0, vector=False)])
    b = _write(tmp_path / "b", [_sample("tile_vec", 4, 3, 25.0)])
    assert main([str(a), str(b / "eval_dgemm_samples.jsonl"), "--registers", "16"]) == 0
    rows = {line.split("|")[1].strip() + line.split("|")[3].strip() + " u" + line.split("|")[4].strip(): line
            for line in capsys.readouterr().out.splitlines()[2:]}
    assert set(rows) == {"packed6 x 2 u1", "packed6 x 2 u2", "packed4 x 4 u1", "tile_vec4 x 3 u1"}
    assert "| 15 | yes | rl 1, sft 1 | 35.0 | 30.0 | 40.0 |" in rows["packed6 x 2 u1"]
    assert "| 15 | yes | rl 1 | 20.0 |" in rows["packed6 x 2 u2"]
    assert "| 21 | no (16) | rl 1 | 20.0 |" in rows["packed4 x 4 u1"]  # the failed 99 GFLOPS sample is not counted
    assert "| 16 | yes |" in rows["tile_vec4 x 3 u1"]


def test_bad_input_is_refused_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path)]) == 2
    assert "no eval_dgemm_samples.jsonl" in capsys.readouterr().err
    assert main(["--data", str(tmp_path)]) == 2
    assert "no dgemm/corpus.jsonl there" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([])
    bad = _write(tmp_path / "bad", [_sample("packed", 6, 2, None)])
    assert main([str(bad)]) == 2
    assert "eval_dgemm_samples.jsonl:1: a verified sample without a GFLOPS figure" in capsys.readouterr().err
    empty = _write(tmp_path / "empty", [_sample("naive", 1, 1, 2.0, vector=False)])
    assert main([str(empty)]) == 0
    assert "no verified sample" in capsys.readouterr().out


def test_the_corpus_is_timed_at_the_held_out_sizes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HPCRL_CACHE_DIR", str(tmp_path / "cache"))
    drafts = [packed(random.Random(seed), random_style(random.Random(seed), vary_names=True)) for seed in range(40)]
    vector = next(d for d in drafts if d.desc.startswith(("packed-ext", "packed-intrin")))
    scalar = next(d for d in drafts if d.desc.startswith("packed-scalar"))  # no vector type: not a row
    (tmp_path / "dgemm").mkdir()
    corpus = [{"name": f"000{i}:packed:{d.desc}", "code": d.code, "kind": "packed"}
              for i, d in enumerate((vector, scalar))]
    (tmp_path / "dgemm" / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    problems = [{"id": f"p{n}", "family": "dgemm", "prompt": [{"role": "user", "content": "x"}], "completion": [],
                 "answer": "", "metadata": {"n": n}}
                for n in (48, 64, 48)]
    (tmp_path / "dgemm" / "problems_eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in problems))
    assert main(["--data", str(tmp_path)]) == 0
    rows = capsys.readouterr().out.splitlines()[2:]
    shape = tile_shape(vector.code)
    assert shape is not None and len(rows) == 1, rows
    cells = [c.strip() for c in rows[0].split("|")]
    assert cells[1:5] == ["packed", str(shape[1]), f"{shape[2]} x {shape[3]}", str(shape[4])]
    assert cells[7] == "corpus 2"  # one sample per held-out size, 48 and 64
    assert float(cells[8]) > 0
