"""The surface reader of benchmarks/race_ngram.py: it learns a rule that its n-grams show, finds nothing where the
labels do not follow the text, and its script scores prepared items and a folder of programs.

Run: pytest tests/test_race_ngram.py
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from benchmarks.race_ngram import NgramClassifier, cross_validated, main, ngrams, pair_groups, program_text
from hpcrl_core.data.schema import Record, write_jsonl
from hpcrl_core.evaluation.race_scores import roc_auc

WORDS = ["a", "b", "i", "n", "sum", "tmp", "x", "y", "for", "+=", "=", "[", "]", ";"]


def texts(rng: random.Random, k: int, marker: str | None = None) -> list[str]:
    out = []
    for _ in range(k):
        body = [rng.choice(WORDS) for _ in range(30)]
        if marker is not None:
            body.insert(rng.randrange(len(body)), marker)
        out.append(" ".join(body))
    return out


def test_ngrams_count_every_window() -> None:
    assert ngrams("a[i] = b;", 2) == ["a", "[", "i", "]", "=", "b", ";",
                                      "a [", "[ i", "i ]", "] =", "= b", "b ;"]
    assert program_text([{"role": "system", "content": "s"}, {"role": "user", "content": "prog"}]) == "prog"


def test_it_learns_a_visible_rule_and_nothing_from_noise() -> None:
    rng = random.Random(0)
    racy, safe = texts(rng, 100, "shared"), texts(rng, 100, "private")
    clf = NgramClassifier(n=2).fit(racy + safe, [True] * 100 + [False] * 100)
    fresh_racy, fresh_safe = texts(rng, 50, "shared"), texts(rng, 50, "private")
    fresh_labels = [True] * 50 + [False] * 50
    assert roc_auc(clf.scores(fresh_racy + fresh_safe), fresh_labels) == 1.0
    # labels drawn independently of texts that carry the marker words too: the reader memorises its training set
    # (so it is not a constant) but knows nothing of the rule the fresh texts follow
    noise = texts(rng, 200, "shared") + texts(rng, 200, "private")
    noise_labels = [rng.random() < 0.5 for _ in noise]
    clf = NgramClassifier(n=2).fit(noise, noise_labels)
    assert roc_auc(clf.scores(noise), noise_labels) > 0.9
    assert 0.35 < roc_auc(clf.scores(fresh_racy + fresh_safe), fresh_labels) < 0.65


def test_the_script_scores_held_out_items_and_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(1)
    data = tmp_path / "data"
    for family in ("race_c", "race_fortran"):
        (data / family).mkdir(parents=True)
        for split, k in (("train", 40), ("eval", 10)):
            write_jsonl(data / family / f"{split}.jsonl", [
                Record(family=family, prompt=[{"role": "user", "content": t}],
                       completion=[{"role": "assistant", "content": "yes: x" if racy else "no: y"}],
                       answer="yes" if racy else "no", id=f"{family}-{split}-{racy}-{i}")
                for racy in (True, False) for i, t in enumerate(texts(rng, k, "shared" if racy else "private"))])
    suite = tmp_path / "suite" / "micro-benchmarks"
    suite.mkdir(parents=True)
    program = ("int main(void) {{ int s = 0, {0} = 1;\n#pragma omp parallel for\n"
               "for (int i = 0; i < 9; i++) s += {0};\n}}\n")
    (suite / "001-sum-yes.c").write_text(program.format("shared"))
    (suite / "002-sum-no.c").write_text(program.format("private"))
    assert main([str(tmp_path / "suite"), "--data", str(data), "--ngram", "1", "--folds", "2"]) == 0
    out = capsys.readouterr().out
    assert "2-fold, twins split" in out and "too few pairs for 2 folds (twins kept)" in out
    assert "fitted on 160 synthetic items (80 racy)" in out
    held = next(line for line in out.splitlines() if "held-out synthetic" in line).split()
    assert held[-6:-4] == ["40", "1.000"]  # n and AUC: the marker word decides every held-out item
    assert any(line.split()[-6] == "2" for line in out.splitlines() if "suite" in line)


def test_cross_validation_scores_each_text_from_the_other_folds() -> None:
    rng = random.Random(2)
    racy, safe = texts(rng, 40, "shared"), texts(rng, 40, "private")
    labels = [True] * 40 + [False] * 40
    assert roc_auc(cross_validated(racy + safe, labels, n=1, folds=4), labels) == 1.0
    # minimal pairs: twin k and k + 40 share their body and differ in one word that does not decide the label
    base = texts(rng, 40)
    pairs = [t + " lock" for t in base] + [t + " unlock" for t in base]
    flipped = [i % 2 == 0 for i in range(40)] + [i % 2 == 1 for i in range(40)]
    split = roc_auc(cross_validated(pairs, flipped, n=1, folds=4), flipped)
    kept = roc_auc(cross_validated(pairs, flipped, n=1, folds=4, groups=[str(i % 40) for i in range(80)]), flipped)
    assert split < 0.3, "with twins in the training folds, the twin's opposite label misleads the reader"
    assert 0.3 < kept < 0.7, "with each pair in one fold, the reader has nothing to go on"
    with pytest.raises(SystemExit, match="between 2 and the number of groups"):
        cross_validated(pairs, flipped, n=1, folds=1)


def test_pairs_follow_the_file_numbers_within_a_language() -> None:
    assert pair_groups(["001-sum", "002-sum-fixed", "003-x", "DRB004-y", "plain"], ["c", "c", "c", "c", "c"]) == [
        "c:1", "c:1", "c:2", "c:2", "c:#4"]
    assert pair_groups(["001-a", "001-a"], ["c", "fortran"]) == ["c:1", "fortran:1"]


def test_missing_data_says_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="dvc repro prepare"):
        main(["--data", str(tmp_path)])
    with pytest.raises(SystemExit, match="--folds must be 0"):
        main(["--data", str(tmp_path), "--folds", "1"])
