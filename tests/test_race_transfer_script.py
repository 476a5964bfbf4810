"""benchmarks/race_transfer.py: the table carries the verdict score's separation, and ``--synthetic`` scores the
held-out items of a data folder the same way, or says which file is missing.

Run: pytest tests/test_race_transfer_script.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.race_transfer import main
from hpcrl_core.data.race.generator import generate_race_items
from hpcrl_core.data.schema import write_jsonl
from hpcrl_core.models.tiny import build_tiny_model
from tests.models import TINY, sample_tokenizer


def test_synthetic_separation_beside_the_folders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tokenizer = sample_tokenizer()
    model_dir = tmp_path / "model"
    build_tiny_model(TINY, tokenizer, seed=3).save_pretrained(str(model_dir))
    tokenizer.save_pretrained(str(model_dir))
    data = tmp_path / "data"
    for family, language in (("race_c", "c"), ("race_fortran", "fortran")):
        write_jsonl(data / family / "eval.jsonl", generate_race_items(language, 1, seed=2)[:6])
    suite = tmp_path / "suite"
    suite.mkdir()
    racy = "int main(void) {\n int s = 0;\n#pragma omp parallel for\n for (int i = 0; i < 9; i++) s += i;\n}\n"
    (suite / "001-sum-yes.c").write_text(racy)
    (suite / "002-sum-no.c").write_text(racy.replace("parallel for", "parallel for reduction(+:s)"))
    assert main([str(suite), "--model", str(model_dir), "--synthetic", str(data), "--max-new-tokens", "4"]) == 0
    out = capsys.readouterr().out
    assert "AUC" in out.splitlines()[0]
    lines = [line for line in out.splitlines() if line.startswith("held-out synthetic")]
    assert [line.split()[2] for line in lines] == ["race_c", "race_fortran"]
    assert all("n    6" in line and "best-threshold F1" in line for line in lines)
    with pytest.raises(SystemExit, match="race_c/eval.jsonl is missing"):
        main([str(suite), "--model", str(model_dir), "--synthetic", str(tmp_path / "none"), "--max-new-tokens", "4"])
