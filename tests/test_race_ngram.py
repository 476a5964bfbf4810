"""The surface reader of benchmarks/race_ngram.py: it learns a rule that its n-grams show, finds nothing where the
labels do not follow the text, and its script scores prepared items and a folder of programs.

Run: pytest tests/test_race_ngram.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from benchmarks.race_ngram import NgramClassifier, cross_validated, main, ngrams, program_text
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
    assert roc_auc(clf.scores(fresh_racy + fresh_safe), [True] * 50 + [False] * 50) == 1.0
    # labels drawn independently of the text: the fitted reader has nothing to carry to fresh texts
    noise = texts(rng, 400)
    clf = NgramClassifier(n=2).fit(noise, [rng.random() < 0.5 for _ in noise])
    fresh = texts(rng, 400)
    assert 0.4 < roc_auc(clf.scores(fresh), [rng.random() < 0.5 for _ in fresh]) < 0.6


def test_the_script_scores_held_out_items_and_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(1)
    data = tmp_path / "data"
    for family in ("race_c", "race_fortran"):
        (data / family).mkdir(parents=True)
        for split, k in (("train", 40), ("eval", 10)):
            rows = [{"prompt": [{"role": "user", "content": t}], "answer": "yes: x" if racy else "no: y"}
                    for racy in (True, False) for t in texts(rng, k, "shared" if racy else "private")]
            (data / family / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    suite = tmp_path / "suite" / "micro-benchmarks"
    suite.mkdir(parents=True)
    program = ("int main(void) {{ int s = 0, {0} = 1;\n#pragma omp parallel for\n"
               "for (int i = 0; i < 9; i++) s += {0};\n}}\n")
    (suite / "001-sum-yes.c").write_text(program.format("shared"))
    (suite / "002-sum-no.c").write_text(program.format("private"))
    assert main([str(tmp_path / "suite"), "--data", str(data), "--ngram", "1"]) == 0
    out = capsys.readouterr().out
    assert "fitted on 160 synthetic items (80 racy)" in out
    held = next(line for line in out.splitlines() if "held-out synthetic" in line).split()
    assert held[-6:-4] == ["40", "1.000"]  # n and AUC: the marker word decides every held-out item
    assert any(line.split()[-6] == "2" for line in out.splitlines() if "suite" in line)


def test_cross_validation_scores_each_text_from_the_other_folds() -> None:
    rng = random.Random(2)
    racy, safe = texts(rng, 40, "shared"), texts(rng, 40, "private")
    labels = [True] * 40 + [False] * 40
    assert roc_auc(cross_validated(racy + safe, labels, n=1, folds=4), labels) == 1.0
    # minimal pairs: each text's twin, in the other folds, says the opposite with the same words
    base = texts(rng, 40)
    pairs = [t + " lock" for t in base] + [t + " unlock" for t in base]
    flipped = [i % 2 == 0 for i in range(40)] + [i % 2 == 1 for i in range(40)]
    assert roc_auc(cross_validated(pairs, flipped, n=1, folds=4), flipped) < 0.5


def test_missing_data_says_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="dvc repro prepare"):
        main(["--data", str(tmp_path)])
