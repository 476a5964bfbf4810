"""The nine-method table's rendering and claims (benchmarks/experiments_hargo.py), on hand-made reports.

Run: ``pytest tests/test_experiments_hargo.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks import experiments_hargo as ex
from benchmarks.doc_sections import write_section
from hpcrl_core.config import parse_params
from hpcrl_core.errors import ConfigError

KEYS = ("winrate", "race_f1", "plp_similarity", "mlperf_em", "accuracy_race_fortran")


def _entry(*values: float) -> dict[str, Any]:
    mean = sum(values) / len(values)
    return {"mean": mean, "seeds": {str(i + 1): v for i, v in enumerate(values)}, "ci": [mean - 0.02, mean + 0.02]}


def _block(values: dict[str, tuple[float, ...]], seeds: list[Any]) -> dict[str, Any]:
    return {"seeds": seeds, "metrics": {k: _entry(*values[k]) for k in KEYS}, "runs": {}}


def _diff(d: float, lo: float, hi: float) -> dict[str, Any]:
    return {"diff": d, "ci": [lo, hi], "excludes_zero": lo > 0 or hi < 0}


def _report() -> dict[str, Any]:
    base = {"winrate": (0.5,), "race_f1": (0.80,), "plp_similarity": (0.70,), "mlperf_em": (0.20,),
            "accuracy_race_fortran": (0.85,)}
    hargo = {"winrate": (0.56, 0.58), "race_f1": (0.90, 0.92), "plp_similarity": (0.72, 0.70),
             "mlperf_em": (0.21, 0.21), "accuracy_race_fortran": (0.86, 0.88)}
    grpo = {"winrate": (0.54, 0.54), "race_f1": (0.93, 0.93), "plp_similarity": (0.69, 0.69),
            "mlperf_em": (0.22, 0.22), "accuracy_race_fortran": (0.86, 0.86)}
    dpo = {**base, "winrate": (0.45,), "accuracy_race_fortran": (0.60,), "mlperf_em": (0.30,)}
    vs = {"sft": {"winrate": _diff(0.07, 0.05, 0.09), "race_f1": _diff(0.11, 0.08, 0.14),
                  "plp_similarity": _diff(0.01, -0.01, 0.03), "mlperf_em": _diff(0.01, -0.02, 0.04),
                  "accuracy_race_fortran": _diff(0.02, -0.01, 0.05)},
          "grpo": {"winrate": _diff(0.03, 0.01, 0.05), "race_f1": _diff(-0.02, -0.04, -0.01),
                   "plp_similarity": _diff(0.02, 0.001, 0.04), "mlperf_em": _diff(-0.01, -0.03, 0.01),
                   "accuracy_race_fortran": _diff(0.01, -0.02, 0.04)},
          "dpo": {"winrate": _diff(0.12, 0.1, 0.14), "race_f1": _diff(0.11, 0.08, 0.14),
                  "plp_similarity": _diff(0.01, 0.005, 0.03), "mlperf_em": _diff(-0.09, -0.12, -0.06),
                  "accuracy_race_fortran": _diff(0.27, 0.2, 0.3)}}
    return {"sft": _block(base, ["sft"]), "grpo": _block(grpo, [1, 2]), "dpo": _block(dpo, [1]),
            "hargo": _block(hargo, [1, 2]),
            "meta": {"items": {"race_c": 10, "all": 40}, "vs_reference": vs,
                     "provenance": {"start": "sha256:" + "a" * 64, "rewards_hash": "sha256:" + "b" * 64, "runs": 5}}}


def test_rows_follow_the_papers_order_with_spread_intervals_and_the_papers_figures() -> None:
    lines = ex.table(_report())
    assert [line.split(" | ")[0] for line in lines[2:]] == ["| SFT", "| DPO", "| GRPO", "| HARGO"]
    hargo = lines[5]
    assert "| HARGO | 1, 2 | 0.570 ± 0.014 [0.550, 0.590] (paper 0.5462) |" in hargo
    assert lines[2].startswith("| SFT | - | 0.500 [0.480, 0.520] |")  # one start: no sd, no seeds
    assert "0.600 [0.580, 0.620] (paper 0.7325)" in lines[3]


def test_the_claims_say_holds_not_shown_or_does_not_hold() -> None:
    text = "\n".join(ex.claims(_report()))
    assert "HARGO best on WinRate (paper 54.62): holds (HARGO 0.570" in text
    assert "HARGO best on race F1 (paper 91.30): does not hold; GRPO is above HARGO (0.930 vs 0.910" in text
    assert "HARGO best on PLP similarity (paper 0.8558): HARGO has the highest mean (0.710), but its paired " \
           "interval holds 0 against SFT" in text
    assert "KTO best on MLPerf EM (paper 27.47): not measured here" in text
    assert "DPO collapses on Fortran races (paper 73.25%): holds (lowest) (DPO 0.600, SFT 0.850)." in text


def test_the_section_names_the_command_the_time_and_the_shared_start(tmp_path: Path) -> None:
    text = ex.section(_report(), command="benchmarks/experiments_hargo.py --seeds 1 2", seconds=3600.0,
                      commit="abc1234", data_dir=None)
    assert "Commit abc1234. Command: `benchmarks/experiments_hargo.py --seeds 1 2`. Run time: 60 min." in text
    assert "one start (`sha256:aaaaaaaaaaaa...`)" in text and "5 runs, checked by evaluate_hargo" in text
    assert "| GRPO | +0.030 [+0.010, +0.050]* | -0.020 [-0.040, -0.010]* |" in text
    doc = tmp_path / "experiments.md"
    doc.write_text("# Experiments\n\nearlier entries\n")
    write_section(doc, ex.MARKER, text, "## The HARGO table", "# Experiments")
    write_section(doc, ex.MARKER, "replaced", "## The HARGO table", "# Experiments")
    assert doc.read_text().count("experiments_hargo:begin") == 1 and "replaced" in doc.read_text()
    assert "earlier entries" in doc.read_text()


def test_the_twin_counts_come_from_the_data_cards(tmp_path: Path) -> None:
    (tmp_path / "mlperf").mkdir()
    (tmp_path / "mlperf" / "card.json").write_text(
        '{"hygiene": {"split": "raw", "eval": 182, "eval_exact_twins_in_train": 51, '
        '"eval_conflicting_twins_in_train": 23}}')
    assert ex.twin_counts(tmp_path)[2] == "| mlperf | raw | 182 | 51 | 23 | 0 |"
    assert ex.twin_counts(tmp_path / "none") == []


def test_overrides_set_every_methods_seeds_and_are_validated() -> None:
    base = yaml.safe_load((ex.ROOT / "params.yaml").read_text())
    over = ex.overrides([1, 2, 3], "raw", None, {"prepare": {"rl_fraction": 0.1}})
    params = parse_params(ex.merged(base, over))
    assert params.rl_hargo.seeds == params.offline.seeds == params.hpcgpt.seeds == (1, 2, 3)
    assert params.prepare.split == "raw" and params.prepare.rl_fraction == 0.1
    assert params.rl_hargo.methods == parse_params(base).rl_hargo.methods  # the rest of the section stays
    with pytest.raises(ConfigError):
        parse_params(ex.merged(base, ex.overrides([1, 1], "cleaned", None, {})))
