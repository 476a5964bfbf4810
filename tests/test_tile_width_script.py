"""benchmarks/tile_width.py: samples whose NR disagrees with VW x NV found and counted by status, derived and
consistent kernels left out, bad input refused by name, and (``--rerun``) a generated packed kernel whose NV was
changed verifying once its width is derived.

Run: pytest tests/test_tile_width_script.py
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from benchmarks.tile_width import derive_width, kernel_source, main, width_mismatch
from hpcrl_core.data.dgemm.kinds.packed import packed
from hpcrl_core.data.dgemm.kinds.style import random_style


def _packed(derived: bool = False) -> str:
    for seed in range(60):
        rng = random.Random(seed)
        draft = packed(rng, random_style(rng, False, False), derived_nr=derived)
        if draft.desc.startswith("packed-ext") and "#define NV 2" in draft.code:
            return draft.code
    raise AssertionError("no 2-vector ext packed kernel in 60 draws")


def _other_nv(code: str, nv: int = 1) -> str:
    return re.sub(r"^#define NV \d+$", f"#define NV {nv}", code, flags=re.M)


def _write(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True)
    (folder / "eval_dgemm_samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def _sample(code: str, status: str, model: str = "rl") -> dict:
    return {"model": model, "status": status, "n": 48, "permitted": [], "completion": f"```c\n{code}```"}


def test_the_width_disagrees_only_when_nr_is_a_number_other_than_vw_times_nv() -> None:
    literal = _packed()
    vw = int(re.search(r"^#define VW (\d+)$", literal, re.M).group(1))  # type: ignore[union-attr]
    assert width_mismatch(literal) is None
    assert width_mismatch(_other_nv(literal)) == (vw, 1, 2 * vw)
    assert width_mismatch(_packed(derived=True)) is None  # NR is an expression, not a number
    assert width_mismatch(_other_nv(_packed(derived=True))) is None
    assert width_mismatch(derive_width(_other_nv(literal))) is None
    assert "#define NR (VW * NV)" in derive_width(literal) and derive_width(literal).count("#define NR") == 1
    assert kernel_source("```c\nvoid dgemm(void) {}\n```\ntrailing") == "void dgemm(void) {}\n"
    assert kernel_source("int y;") == "int y;"


def test_mismatched_samples_are_counted_per_report_and_model(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    bad, good = _other_nv(_packed()), _packed()
    run = _write(tmp_path / "run", [_sample(bad, "wrong_result"), _sample(bad, "wrong_result"),
                                    _sample(bad, "compile_error"), _sample(good, "ok"),
                                    _sample(bad, "wrong_result", model="sft"), _sample("int z;", "format_violation")])
    assert main([str(run)]) == 0
    out = capsys.readouterr().out.splitlines()
    cells = [c.strip() for c in out[2].split("|")]
    assert cells[1:6] == [str(run), "rl", "5", "3", "wrong_result 2, compile_error 1"]
    assert out[-1] == "mismatched: 3"
    assert main([str(run), "--models", "rl", "sft"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [c.strip() for c in out[3].split("|")][2:5] == ["sft", "1", "1"]


def test_bad_input_is_refused_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "none")]) == 2
    assert "none: no none there" in capsys.readouterr().err
    run = _write(tmp_path / "run", [{"model": "rl", "status": "ok"}])
    assert main([str(run)]) == 2
    assert "without a completion or status" in capsys.readouterr().err
    no_n = _write(tmp_path / "no_n", [{**_sample(_other_nv(_packed()), "wrong_result"), "n": None}])
    assert main([str(no_n)]) == 2
    assert "without its problem's n" in capsys.readouterr().err


def test_rerun_verifies_a_kernel_whose_nv_changed_once_its_width_is_derived(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HPCRL_CACHE_DIR", str(tmp_path / "cache"))
    run = _write(tmp_path / "run", [_sample(_other_nv(_packed()), "wrong_result")])
    assert main([str(run), "--rerun"]) == 0
    out = capsys.readouterr().out.splitlines()
    cells = [c.strip() for c in out[2].split("|")]
    assert cells[4] == "1" and cells[7] == "1", out
    assert float(cells[9].split()[0]) > 0
    assert out[-1] == "mismatched: 1; verified with NR derived: 1"
