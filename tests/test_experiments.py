"""The experiments script's verdict and tables (benchmarks/experiments_dgemm.py), on hand-made reports.

Run: ``pytest tests/test_experiments.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks.experiments_dgemm import (
    headroom_line,
    one_run,
    per_run,
    run_settings,
    settings_differences,
    sft_policy,
    table,
    training_found,
    variant_params,
    yardstick_table,
)
from hpcrl_core.config import parse_params
from hpcrl_core.evaluation.report import write_report


def _report(sft_verified: float, sft_median: float, rl_verified: float, rl_median: float) -> dict[str, Any]:
    def block(verified: float, median: float) -> dict[str, Any]:
        return {"verified_rate": verified, "gflops_median": median, "gflops_best": 3 * median, "best_vs_numpy": 0.1}
    return {"sft": block(sft_verified, sft_median), "rl": {**block(rl_verified, rl_median), "winrate_vs_sft": 0.75},
            "meta": {"rl_run": {"promotions": 7}, "sft_seed": 1234, "rl_seed": 1}}


def _good(rl_verified: float = 0.80) -> dict[str, Any]:
    """A run that meets every bar of issue 24 exactly."""
    r = _report(0.80, 2.0, rl_verified, 20.0)
    r["rl"].update(oracle_ratio=0.85, oracle_ratio_rich=0.6, best_vs_numpy=0.8, distinct_kernels=10,
                   headroom_closed=0.5)
    r["sft"].update(distinct_kernels=20)
    return r


def test_tables_show_mean_spread_and_each_run() -> None:
    results = {"sqd": [_good(0.85), _report(0.8, 2.0, 0.70, 6.0)]}
    results["sqd"][1]["meta"].update(sft_seed=7, rl_seed=2)
    summary = table(results)
    assert summary[2].startswith("| sqd | 2 | 0.775 ± 0.075 | 0.8 ± 0 | 13 ± 7 | 6.5 ± 3.5 |")
    rows = per_run(results)
    assert rows[2] == "| sqd | 1234 | 1 | 80.0% | 85.0% | +5.0 | 2.00 | 20.00 | 10.00x | 0.750 | 7 | - | met |"
    assert rows[3].startswith("| sqd | 7 | 2 | 80.0% | 70.0% | -10.0 | 2.00 | 6.00 | 3.00x | 0.750 | 7 | - | missed: ")
    assert headroom_line(results) == ["- sqd: mean headroom closed over 1 runs: 0.500 (meets 0.5)"]
    results["sqd"][1]["rl"]["headroom_closed"] = 0.3
    assert headroom_line(results) == ["- sqd: mean headroom closed over 2 runs: 0.400 (below 0.5)"]
    results["sqd"][1]["rl"]["headroom_closed_measurable"] = 0.7  # one run has the figure: its mean alone
    assert headroom_line(results) == ["- sqd: mean headroom closed over 2 runs: 0.400 (below 0.5); over the problems "
                                      "with a gap of at least 5% of the oracle: 0.700 (1 runs)"]
    results["sqd"][0]["rl"]["headroom_closed_weighted"] = 0.6
    assert headroom_line(results)[0].endswith("0.700 (1 runs); gap-weighted: 0.600 (1 runs)")


def test_yardstick_table_spreads_over_seeds_and_leaves_out_runs_without_it() -> None:
    first, second, old = _report(0.8, 2.0, 0.85, 6.0), _report(0.8, 2.0, 0.85, 6.0), _report(0.8, 2.0, 0.9, 5.0)
    first["rl"].update(oracle_ratio=0.7, oracle_ratio_rich=0.3, headroom_closed=0.4, distinct_kernels=10)
    second["rl"].update(oracle_ratio=0.9, oracle_ratio_rich=None, headroom_closed=0.6, distinct_kernels=20)
    first["rl"].update(oracle_ratio_held_out=0.5, oracle_ratio_drawn=0.9)
    second["rl"].update(oracle_ratio_held_out=0.7, oracle_ratio_drawn=0.9)
    first["sft"].update(oracle_ratio=0.25, distinct_kernels=40)
    first["oracle"], second["oracle"] = {"distinct_kernels": 18}, {"distinct_kernels": 20}
    row = yardstick_table({"sqd": [first, second, old]})[2]
    assert row == ("| sqd | 0.8 ± 0.1 | 0.25 ± 0 | 0.3 ± 0 | 0.6 ± 0.1 | 0.9 ± 0 | 0.5 ± 0.1 | 0.1 ± 0 | 15 ± 5 "
                   "| 40 ± 0 | 19 ± 1 |")


def test_a_finished_run_is_reused_only_with_the_same_settings(tmp_path: Path) -> None:
    params = parse_params({})
    data, sft = tmp_path / "data", tmp_path / "sft"
    report = _report(0.8, 2.0, 0.9, 5.0)
    report["meta"]["settings"] = run_settings(params.model_copy(update={"rl_dgemm": params.rl_dgemm.model_copy(
        update={"seed": 1})}), data, sft)
    write_report(report, tmp_path / "out" / "sqd-sft5-s1" / "eval_dgemm.json")
    assert one_run(params, "sqd", 1, tmp_path / "out", data, sft, None, 5) == report  # nothing retrained
    changed = parse_params({"rl_dgemm": {"beta": 0.1, "sqd": {"replay": 0.5}}})
    with pytest.raises(SystemExit) as err:
        one_run(changed, "sqd", 1, tmp_path / "out", data, sft, None, 5)
    assert f"rl_dgemm.beta: {params.rl_dgemm.beta!r} -> 0.1" in str(err.value)
    assert f"rl_dgemm.sqd.replay: {params.rl_dgemm.sqd.replay!r} -> 0.5" in str(err.value)
    with pytest.raises(SystemExit, match="sft: "):
        one_run(params, "sqd", 1, tmp_path / "out", data, tmp_path / "other", None, 5)
    # the params' own SFT seed is the policy given; no training happens for it
    assert sft_policy(params, params.sft.seed, sft, data, tmp_path / "out") == sft
    assert settings_differences({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}}) == ["a.c: None -> 2"]


def test_variants_change_only_what_they_name() -> None:
    params = parse_params({})
    sqd = variant_params(params, "sqd", 3, None)
    assert sqd.rl_dgemm.seed == 3 and sqd.reward == params.reward and sqd.rl_dgemm.sqd == params.rl_dgemm.sqd
    nosqd = variant_params(params, "nosqd", 3, 50)
    assert not nosqd.rl_dgemm.sqd.enabled and nosqd.rl_dgemm.max_steps == 50 and nosqd.reward == params.reward
    share = variant_params(params, "share", 3, None, share_penalty=7.5)
    assert share.reward.duplicate_penalty == 7.5 and share.rl_dgemm.sqd == params.rl_dgemm.sqd
    assert share.reward.model_copy(update={"duplicate_penalty": params.reward.duplicate_penalty}) == params.reward
    noshare = variant_params(params, "noshare", 3, None)
    assert noshare.reward.duplicate_penalty == 0.0 and params.reward.duplicate_penalty > 0
    assert noshare.reward.model_copy(update={"duplicate_penalty": params.reward.duplicate_penalty}) == params.reward
    assert params.rl_dgemm.plan_vocabulary == params.evaluate.dgemm_plan_vocabulary == "corpus"
    for variant, vocabulary in (("vocab", "corpus"), ("fields", "fields"), ("novocab", "none")):
        held = variant_params(params, variant, 3, None)
        assert held.rl_dgemm.plan_vocabulary == held.evaluate.dgemm_plan_vocabulary == vocabulary
        assert held.evaluate.model_copy(update={"dgemm_plan_vocabulary": "corpus"}) == params.evaluate
        assert held.reward == params.reward
    assert sqd.evaluate == params.evaluate
    assert params.rl_dgemm.visit_sizes == "problem"
    for variant, sizes in (("trainsizes", "train"), ("span", "span")):
        drawn = variant_params(params, variant, 3, None)
        assert drawn.rl_dgemm.visit_sizes == sizes
        assert drawn.rl_dgemm.model_copy(update={"visit_sizes": "problem"}) == sqd.rl_dgemm
        assert drawn.evaluate == params.evaluate and drawn.reward == params.reward
    with pytest.raises(SystemExit, match="unknown variant 'x'; allowed: sqd, nosqd, share, noshare, vocab, fields"):
        variant_params(params, "x", 3, None)


def test_the_fast_kernel_column_reads_the_record_or_the_run_folder(tmp_path: Path) -> None:
    import json

    from tests.evaluation.test_discovery import history

    r = _good()
    assert training_found(r) == "-"  # neither a record nor a folder
    final = tmp_path / "rl" / "final"
    final.mkdir(parents=True)
    (final / "log_history.json").write_text(json.dumps(history([10.0] * 12 + [45.0] * 8)))
    r["meta"]["rl_run"]["final_dir"] = str(final)
    assert training_found(r) == "late (step 13, best 0.90x)"
    r["meta"]["rl_run"]["discovery"] = {"steps": 300, "best": 0.64, "first_step": None, "tail_best": 0.6,
                                        "verdict": "never"}
    assert training_found(r) == "never (best 0.64x)"  # the record wins over the folder
    (final / "log_history.json").write_text(json.dumps([{"step": 1, "loss": 0.2}]))
    del r["meta"]["rl_run"]["discovery"]
    assert training_found(r) == "-"  # a history without the reward's figures
