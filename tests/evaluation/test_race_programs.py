"""Race detection on folders of programs (hpcrl_core/evaluation/race_programs.py): loading both languages, the
long-input rule, the scores against a hand count, the bootstrap interval and the report's table.

Run: pytest tests/evaluation/test_race_programs.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcrl_core.data.race.loaders import load_dataracebench
from hpcrl_core.errors import DataError
from hpcrl_core.evaluation.race_programs import (
    by_pattern,
    evaluate_race_programs,
    f1_interval,
    load_programs,
    score,
    summary_lines,
)
from hpcrl_core.evaluation.race_scores import roc_auc
from hpcrl_core.models.tiny import build_tiny_model
from tests.models import TINY, sample_tokenizer

RACY = """#include <stdio.h>
int main(void) {
    int total = 0, vals[100];
    for (int i = 0; i < 100; i++) vals[i] = i;
#pragma omp parallel for
    for (int i = 0; i < 100; i++) total += vals[i];
    printf("%d\\n", total);
    return 0;
}
"""
FIXED = RACY.replace("#pragma omp parallel for", "#pragma omp parallel for reduction(+:total)")
FORTRAN = """program demo
  implicit none
  integer :: i, s, v(10)
  v = 1
  s = 0
  !$omp parallel do reduction(+:s)
  do i = 1, 10
    s = s + v(i)
  end do
  print *, s
end program demo
"""


def write_suite(root: Path) -> Path:
    c, f = root / "micro-benchmarks", root / "micro-benchmarks-fortran"
    c.mkdir(parents=True)
    f.mkdir()
    (c / "001-sum-yes.c").write_text("/* a sum over an array */\n" + RACY)
    (c / "002-sum-no.c").write_text(FIXED)
    (c / "003-other-yes.c").write_text(RACY.replace("total", "acc"))
    (c / "004-huge-no.c").write_text(FIXED + "".join(f"int g{k} = {k};\n" for k in range(20000)))  # > positions
    (c / "README.c.txt").write_text("not a program")
    (f / "005-sum-no.f90").write_text(FORTRAN)
    return root


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_suite(tmp_path_factory.mktemp("suite"))


def test_scores_match_a_hand_count(suite: Path) -> None:
    records = load_dataracebench(suite, "c")
    by_name = {r.metadata["source_name"].split("/")[-1]: r for r in records}
    chosen = [by_name["001-sum-yes.c"], by_name["002-sum-no.c"], by_name["003-other-yes.c"]]
    # right "yes", wrong "yes" on a race-free program, unreadable on a racy one (a false negative)
    s = score(chosen, ["yes: total is shared", "yes, there is a race", "I cannot tell"], seed=0)
    assert (s["tp"], s["fp"], s["fn"], s["tn"], s["unreadable"]) == (1, 1, 1, 0, 1)
    assert s["precision"] == pytest.approx(0.5) and s["recall"] == pytest.approx(0.5) and s["f1"] == pytest.approx(0.5)
    assert s["always_yes_f1"] == pytest.approx(2 * (2 / 3) / (1 + 2 / 3))  # precision 2/3, recall 1
    lo, hi = s["f1_interval"]
    assert 0.0 <= lo <= 0.5 <= hi <= 1.0
    counts = by_pattern(chosen, ["yes", "yes", "no"])
    assert counts == {"other": {"n": 1, "right": 0, "racy": 1}, "sum": {"n": 2, "right": 1, "racy": 1}}


def test_f1_interval_is_degenerate_when_every_resample_agrees() -> None:
    gold = [True, False] * 20  # a resample without a racy program (F1 0 by convention) is vanishingly rare
    assert f1_interval(gold, gold, seed=1) == (1.0, 1.0)
    assert f1_interval(gold, [not g for g in gold], seed=1) == (0.0, 0.0)
    lo, hi = f1_interval([True] * 20 + [False] * 20, [True] * 30 + [False] * 10, seed=1)
    assert lo < 0.8 < hi  # point estimate: precision 2/3, recall 1, F1 0.8


def test_folders_without_programs_are_data_errors(tmp_path: Path, suite: Path) -> None:
    with pytest.raises(DataError, match="no such folder"):
        load_programs(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no program named"):
        load_programs(tmp_path / "empty")
    records, notes = load_programs(suite)
    assert sorted(r.metadata["language"] for r in records) == ["c", "c", "c", "c", "fortran"]
    assert notes == {}


def test_a_saved_model_answers_every_program_that_fits(tmp_path: Path, suite: Path) -> None:
    tokenizer = sample_tokenizer()
    model = build_tiny_model(TINY, tokenizer, seed=3)
    model.save_pretrained(str(tmp_path / "model"))
    tokenizer.save_pretrained(str(tmp_path / "model"))
    root = suite
    report = evaluate_race_programs(tmp_path / "model", [root], max_new_tokens=8, batch_size=2)
    part = report["folders"][str(root)]
    assert report["meta"]["programs"] == 5 and report["meta"]["skipped"] == 1
    assert part["notes"]["too_long"].startswith("1 of 5 items skipped")
    assert len(part["rows"]) == 4 and part["pooled"]["n"] == 4
    assert part["c"]["n"] == 3 and part["fortran"]["n"] == 1
    # the pooled score is race_f1 of the rows' answers, recomputed here from what the rows say
    rows = part["rows"]
    tp = sum(r["parsed"] == "yes" and r["gold"] == "yes" for r in rows)
    fp = sum((r["parsed"] == "yes" or r["parsed"] is None) and r["gold"] == "no" for r in rows)
    assert (part["pooled"]["tp"], part["pooled"]["fp"]) == (tp, fp)
    assert sum(c["n"] for c in part["patterns"].values()) == 4
    # the verdict scores' separation where both labels occur (C: two racy, one race-free), from the rows' scores
    c_rows = [r for r in rows if r["language"] == "c"]
    assert part["c"]["separation"]["auc"] == roc_auc([r["verdict_score"] for r in c_rows],
                                                     [r["gold"] == "yes" for r in c_rows])
    assert "separation" not in part["fortran"]  # one race-free program: no AUC to give
    opening = sum(r["prediction"].lstrip().lower()[:2] in ("ye", "no") for r in c_rows) / len(c_rows)
    assert part["c"]["separation"]["verdict_first_share"] == pytest.approx(opening, abs=1 / len(c_rows))
    assert report["meta"]["peak_rss_mb"] > 0
    table = "\n".join(summary_lines(report))
    assert "pooled" in table and "1 skipped as too long" in table and "AUC" in table
