"""Does the synthetic race data carry a signal that transfers? A surface reader trained on it, scored like a policy.

A logistic regression over the token n-grams (1 to ``--ngram``) of the program text is fitted on the prepared
synthetic race items (``data/race_c`` and ``data/race_fortran``, ``train.jsonl``) and scored on their held-out items
and on folders of labelled programs (default ``benchmarks/race_transfer``; a DataRaceBench checkout works too), with
the measures of ``hpcrl_core.evaluation.race_scores``: AUC and the best F1 any threshold reaches. Set beside the
policy's own figures (``benchmarks/race_transfer.py``), it separates the two causes of a policy that does not
transfer: if a linear surface reader fitted on the same items transfers no better, the items hold no signal the
policy failed to find; if it transfers better, the policy is the limit.

With ``--folds K`` a reader is also fitted on each folder's own programs, K-fold cross-validated, twice: with
programs drawn into folds one by one ("twins split": a program's twin, which differs from it in one detail and has
the other label, is usually in the training folds, so the score shows how far near-twins mislead a surface reader)
and with each numbered pair kept in one fold ("twins kept": how far the folder's n-grams tell labels apart on
programs whose twin the reader never saw). Held-out grammar items
(``prepare.race.grammar_pairs``) are also scored apart from the template patterns.

Run: ``.venv/bin/python benchmarks/race_ngram.py --data data [FOLDER ...] [--folds 8]``.
Test: ``pytest tests/test_race_ngram.py``.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from hpcrl_core.data.schema import read_jsonl
from hpcrl_core.evaluation.race_programs import load_programs
from hpcrl_core.evaluation.race_scores import separation
from hpcrl_core.evaluation.runner import RACE_FAMILIES

DEFAULT = Path(__file__).resolve().parent / "race_transfer"
TOKEN = re.compile(r"[A-Za-z_]\w*|\d+|[^\s\w]")


def program_text(prompt: object) -> str:
    """The user turn of a chat prompt (the question and the program), or the prompt itself when it is a string."""
    if isinstance(prompt, list):
        return str(next(m["content"] for m in reversed(prompt) if m.get("role") == "user"))
    return str(prompt)


def ngrams(text: str, n: int) -> list[str]:
    """Every run of 1 to ``n`` consecutive tokens (names, numbers, single punctuation marks), joined by spaces."""
    tokens = TOKEN.findall(text)
    return [" ".join(tokens[i:i + k]) for k in range(1, n + 1) for i in range(len(tokens) - k + 1)]


class NgramClassifier:
    """L2-regularised logistic regression on tf-idf n-gram features ((1 + log count) x idf, each row scaled to unit
    length). Only n-grams seen in at least two training texts are features: a one-off name cannot carry a rule.
    """

    def __init__(self, n: int = 3, l2: float = 6e-5, steps: int = 300) -> None:
        self.n, self.l2, self.steps = n, l2, steps
        self.vocab: dict[str, int] = {}
        self.idf = np.zeros(0)
        self.w = torch.zeros(0)
        self.b = torch.zeros(1)

    def _features(self, texts: Sequence[str]) -> torch.Tensor:
        """The tf-idf rows of ``texts`` over the fitted vocabulary, as a sparse (len(texts), vocabulary) tensor."""
        rows, cols, vals = [], [], []
        for r, text in enumerate(texts):
            counts: dict[int, int] = {}
            for g in ngrams(text, self.n):
                j = self.vocab.get(g)
                if j is not None:
                    counts[j] = counts.get(j, 0) + 1
            v = (1 + np.log(np.array(list(counts.values()), float))) * self.idf[list(counts)]
            v = v / (np.linalg.norm(v) or 1.0)
            rows += [r] * len(counts)
            cols += list(counts)
            vals += v.tolist()
        idx = torch.tensor([rows, cols], dtype=torch.long).reshape(2, -1)
        return torch.sparse_coo_tensor(idx, torch.tensor(vals, dtype=torch.float32), (len(texts), len(self.vocab)),
                                       check_invariants=False)  # built here from distinct (row, col) pairs

    def fit(self, texts: Sequence[str], labels: Sequence[bool]) -> NgramClassifier:
        """Choose the vocabulary and idf from ``texts`` and fit the weights to ``labels`` (True = racy)."""
        df: dict[str, int] = {}
        for text in texts:
            for g in set(ngrams(text, self.n)):
                df[g] = df.get(g, 0) + 1
        self.vocab = {g: i for i, g in enumerate(sorted(g for g, c in df.items() if c >= 2))}
        self.idf = np.log((1 + len(texts)) / (1 + np.array([df[g] for g in self.vocab], float))) + 1
        x = self._features(texts)
        y = torch.tensor([float(v) for v in labels])
        w = torch.zeros(len(self.vocab), requires_grad=True)
        b = torch.zeros(1, requires_grad=True)
        opt = torch.optim.LBFGS([w, b], max_iter=self.steps, line_search_fn="strong_wolfe")

        def loss() -> torch.Tensor:
            opt.zero_grad()
            z = torch.sparse.mm(x, w[:, None])[:, 0] + b
            out = torch.nn.functional.binary_cross_entropy_with_logits(z, y) + self.l2 * (w * w).sum()
            out.backward()
            return out

        opt.step(loss)
        self.w, self.b = w.detach(), b.detach()
        return self

    def scores(self, texts: Sequence[str]) -> list[float]:
        """The decision value (logit of "racy") of each text."""
        return (torch.sparse.mm(self._features(texts), self.w[:, None])[:, 0] + self.b).tolist()


def read_items(data: Path, split: str) -> tuple[list[str], list[bool], list[str]]:
    """The program texts, labels (racy) and pattern names of both languages' ``split`` items."""
    texts, labels, patterns = [], [], []
    for family in RACE_FAMILIES:
        path = data / family / f"{split}.jsonl"
        if not path.is_file():
            raise SystemExit(f"{path} is missing; run `dvc repro prepare` or pass --data")
        for r in read_jsonl(path):
            texts.append(program_text(r.prompt))
            labels.append(r.answer == "yes")
            patterns.append(str(r.metadata.get("pattern", "")))
    return texts, labels, patterns


def pair_groups(patterns: Sequence[str], languages: Sequence[str]) -> list[str]:
    """A fold group per program: its language and the pair its file number belongs to (1-2, 3-4, ...), since suites
    number a racy program and its race-free twin consecutively; a name without a number is its own group."""
    out = []
    for i, (name, language) in enumerate(zip(patterns, languages, strict=True)):
        m = re.search(r"\d+", name)
        out.append(f"{language}:{(int(m.group()) + 1) // 2}" if m else f"{language}:#{i}")
    return out


def cross_validated(texts: Sequence[str], labels: Sequence[bool], n: int, folds: int,
                    groups: Sequence[str] | None = None, seed: int = 0) -> list[float]:
    """Each text's score from a reader fitted on the other folds only: ``folds`` folds of a shuffled order of the
    ``groups`` (default: each text its own group), a group never split between folds.

    Raises:
        SystemExit: fewer than 2 folds, or more folds than groups.
    """
    keys = list(groups) if groups is not None else [str(i) for i in range(len(texts))]
    distinct = sorted(set(keys))
    if not 2 <= folds <= len(distinct):
        raise SystemExit(f"--folds must be between 2 and the number of groups ({len(distinct)}); got {folds}")
    random.Random(seed).shuffle(distinct)
    fold_of = {g: k % folds for k, g in enumerate(distinct)}
    scores = [0.0] * len(texts)
    for k in range(folds):
        held = [i for i in range(len(texts)) if fold_of[keys[i]] == k]
        train = [i for i in range(len(texts)) if fold_of[keys[i]] != k]
        clf = NgramClassifier(n=n).fit([texts[i] for i in train], [labels[i] for i in train])
        for i, v in zip(held, clf.scores([texts[i] for i in held]), strict=True):
            scores[i] = v
    return scores


def row(n: int, name: str, s: dict[str, float]) -> str:
    """One line of the printed table."""
    return (f"{'1-' + str(n):>7} {name:<40} {s['n']:>4} {s['auc']:>5.3f} {s['best_threshold_f1']:>6.3f} "
            f"{s['f1_at_zero']:>5.3f} {s['accuracy_at_zero']:>5.3f} {s['yes_share_at_zero']:>5.2f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="*", type=Path, default=[DEFAULT], help="folders of labelled programs")
    ap.add_argument("--data", type=Path, default=Path("data"), help="prepared data (race_c, race_fortran)")
    ap.add_argument("--ngram", type=int, nargs="+", default=[1, 3], help="longest n-gram; several give several rows")
    ap.add_argument("--folds", type=int, default=0,
                    help="also fit a reader on each folder itself, cross-validated over this many folds (0: off)")
    a = ap.parse_args(argv)
    if a.folds == 1 or a.folds < 0:
        raise SystemExit(f"--folds must be 0 (off) or at least 2; got {a.folds}")
    train, train_y, _ = read_items(a.data, "train")
    held, held_y, held_pattern = read_items(a.data, "eval")
    sets = [("held-out synthetic", held, held_y)]
    if "grammar" in held_pattern:  # the grammar's loop nests apart from the 14 template patterns
        for name, keep in (("held-out grammar", True), ("held-out templates", False)):
            idx = [i for i, p in enumerate(held_pattern) if (p == "grammar") == keep]
            sets.append((name, [held[i] for i in idx], [held_y[i] for i in idx]))
    folders = []
    for root in a.folders:
        records, _ = load_programs(root)
        groups = pair_groups([str(r.metadata.get("pattern", "")) for r in records],
                             [str(r.metadata["language"]) for r in records])
        folders.append((str(root)[-40:], [program_text(r.prompt) for r in records],
                        [r.answer == "yes" for r in records], groups))
    print(f"fitted on {len(train)} synthetic items ({sum(train_y)} racy) of {a.data}")
    print(f"{'n-grams':>7} {'set':<40} {'n':>4} {'AUC':>5} {'bestF1':>6} {'F1@0':>5} {'acc@0':>5} {'yes@0':>5}")
    for n in a.ngram:
        clf = NgramClassifier(n=n).fit(train, train_y)
        for name, texts, labels, *_ in sets + folders:
            print(row(n, name, separation(clf.scores(texts), labels)))
        for name, texts, labels, groups in folders if a.folds else []:
            for tag, by in (("twins split", None), ("twins kept", groups)):
                if len(set(by if by is not None else range(len(texts)))) < a.folds:
                    print(f"{'':>7} {name}: too few {'pairs' if by else 'programs'} for {a.folds} folds ({tag})")
                    continue
                cv = separation(cross_validated(texts, labels, n, a.folds, by), labels)
                print(row(n, f"{a.folds}-fold, {tag}: {name}"[:40], cv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
