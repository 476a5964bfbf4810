"""Exploration aids that use the QD archive (our design; docs/sqd.md): which rows of an RL batch get an archived
elite in place of a sample (elite replay), and which are generated after a forced plan opening (plan novelty).

Both act on whole groups (``group`` consecutive rows of one problem, as TRL's sampler lays them out), in a share of
the visits drawn from (seed, step, problem, row), so a resumed run treats the same visits alike.

**Elite replay** (``rl_dgemm.elite_replay``): the last row of a drawn group becomes the archive's fastest kernel of
the problem within the visit's permitted set; with ``elite_replay_behind`` only when the problem's last visit wrote
nothing as fast as that share of it (the policy fell behind a kernel it wrote before).

**Plan novelty** (``rl_dgemm.plan_novelty``): SFT completions open with a plan line naming the kernel's kind
(``// plan: packed: packed-ext8-...``, ``prepare.dgemm.plan_line``). A policy can fit a kind it rarely chooses: at
the temperatures RL samples at, a kind that is a few percent of the first tokens may never be sampled on a problem
in the few visits it gets. In a drawn group the first row is generated after a forced opening (the code fence, then
``// plan: <kind>``, in the token ids an SFT completion of one of the kind's kernels opens with, drawn: the DGEMM
tokenizer joins the kind's name to the parameters after it), the kind drawn among those that

- the visit's permitted set allows: every corpus kernel of the kind uses at least the kind's *required*
  techniques (the intersection of their detected techniques in ``data/dgemm/corpus.jsonl``), and the visit
  permits all of them;
- the problem's archive holds no verified kernel of (its elites' plan lines, within the permitted set).

The policy writes the rest of the completion itself; it is scored and trained on like any sample, the forced
tokens included, so a fast kernel of a new kind raises the policy's own odds of choosing that kind, and it enters
the archive, after which that kind is no longer forced there.

Use::

    elites = plan_elites(rows, group, archive, share, (seed, step), behind)  # {row: elite completion}
    needs = kind_requirements(data_dir / "dgemm" / "corpus.jsonl")
    forced = plan_novel_kinds(rows, group, archive, needs, share, (seed, step))  # {row: kind}
    texts = kind_openings(data_dir / "dgemm" / "corpus.jsonl")  # how each kind's SFT completions open
    choices = opening_ids(tokenizer, kind, texts[kind])  # the ids a forced row may open with, one per kernel

Test: ``pytest tests/algorithms/test_exploration.py``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from hpcrl_core.algorithms.archive import QDArchive
from hpcrl_core.bench.techniques import Technique, parse_techniques
from hpcrl_core.data.dgemm.corpus import CODE_FENCE, corpus_rows, plan_line, plan_prefix
from hpcrl_core.errors import ConfigError, DataError

__all__ = ["drawn_groups", "kind_of", "kind_openings", "kind_requirements", "novel_kinds", "opening_ids",
           "opening_plan_line", "plan_elites", "plan_novel_kinds", "plan_prefix"]

# the plan line a completion opens with, inside its code fence, as the SFT data writes it (``data.dgemm.corpus``:
# the fence, then ``// plan: <kind>: <parameters>``); a model may drop the fence
_OPENING = r"\A\s*(?:```[A-Za-z]*[ \t]*\n)?\s*"
_PLAN = re.compile(_OPENING + r"// plan: ([A-Za-z0-9_]+):")
_PLAN_LINE = re.compile(_OPENING + r"(// plan: [^\n]*\n)")


def opening_plan_line(completion: str) -> str | None:
    """The whole plan line (newline included) a completion opens with, or None when it opens without one."""
    m = _PLAN_LINE.match(completion)
    return m.group(1) if m else None


def kind_of(completion: str) -> str | None:
    """The kind a completion's plan line names, or None when it opens without one."""
    m = _PLAN.match(completion)
    return m.group(1) if m else None


def kind_requirements(corpus: Path) -> dict[str, frozenset[Technique]]:
    """Per kernel kind of the corpus, the techniques every kernel of that kind uses (as detected when the corpus
    was prepared): the least a problem must permit for a kernel of the kind to respect it.

    Raises:
        DataError: the corpus is missing, a line lacks a string ``kind`` or a list ``techniques``, or names an
            unknown technique.
    """
    needs: dict[str, frozenset[Technique]] = {}
    for i, row in corpus_rows(corpus, {"kind": str, "techniques": list}):
        try:
            techs = parse_techniques(str(t) for t in row["techniques"])
        except ValueError as e:
            raise DataError(f"{corpus}:{i}: {e}") from None
        needs[row["kind"]] = needs[row["kind"]] & techs if row["kind"] in needs else techs
    return needs


def kind_openings(corpus: Path) -> dict[str, list[str]]:
    """Per kernel kind of the corpus, how the SFT completions of its kernels open, as ``sft_records`` writes them
    with plan lines: the code fence, the plan line, the kernel's first line. A forced opening must be a prefix of
    these token for token (``opening_ids``): the tokenizer joins the kind's name to the parameters
    after it (``// plan: packed: packed-`` is one token of the DGEMM tokenizer), so ``plan_prefix`` tokenized on
    its own ends in ids SFT text never holds there.

    Raises:
        DataError: the corpus is missing, or a line lacks a string ``kind``, ``name`` or ``code``.
    """
    out: dict[str, list[str]] = {}
    for _, row in corpus_rows(corpus, {"kind": str, "name": str, "code": str}):
        first = row["code"].partition("\n")[0]
        out.setdefault(row["kind"], []).append(CODE_FENCE + plan_line(row["kind"], row["name"]) + first + "\n")
    return out


def opening_ids(tokenizer: Any, kind: str, texts: Sequence[str]) -> list[list[int]]:
    """The token ids a completion forced to plan ``kind`` may open with: per SFT completion of the kind's kernels
    (``texts``: ``exploration.kind_openings``), its leading ids up to the first whose text reaches the end of the
    kind's name. That id may run on into the parameters (the DGEMM tokenizer holds ``// plan: packed: packed-`` and
    ``// plan: packed: packed-ext4-`` as single tokens) and is kept whole: ``plan_prefix(kind)`` tokenized on its
    own ends in ids no SFT completion holds there, and the policy would go on from ids it never saw. One list per
    text, so drawing one uniformly follows how often the kind's kernels open each way.

    Raises:
        ConfigError: no texts for the kind, or a text whose ids do not spell its plan opening.
    """
    opening = plan_prefix(kind)
    if not texts:
        raise ConfigError(f"plan novelty cannot force kind {kind!r}: the corpus holds no kernel of it")
    out = []
    for text in texts:
        ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
        n = next((n for n in range(1, len(ids) + 1) if str(tokenizer.decode(ids[:n])).startswith(opening)), 0)
        if not n:
            raise ConfigError(f"the tokenizer does not reproduce the plan opening {opening!r} of {text!r}; set "
                              "rl_dgemm.plan_novelty: 0 for this model")
        out.append(ids[:n])
    return out


def novel_kinds(pid: str, permitted: Sequence[str], archive: QDArchive,
                needs: Mapping[str, frozenset[Technique]]) -> list[str]:
    """The kinds ``permitted`` allows for which the archive holds no kernel of ``pid`` within it, sorted."""
    allowed = parse_techniques(permitted)
    held = {kind_of(e.code) for e in archive.niches() if e.problem_id == pid and e.techniques <= allowed}
    return sorted(k for k, need in needs.items() if need <= allowed and k not in held)


def drawn_groups(rows: Sequence[Mapping[str, Any]], group: int, share: float, key: tuple[int, int],
                 salt: str = "") -> Iterator[tuple[int, str, random.Random]]:
    """The whole groups of ``rows`` drawn in a share ``share``: (first row index, problem id, the draw's random
    stream, for any further choice). A run of ``group`` rows that is not all one problem is skipped.

    The draw is a function of ``salt``, ``key`` (seed, step), the problem and the row, nothing else."""
    if share <= 0:
        return
    for start in range(0, len(rows) - group + 1, group):
        members = rows[start:start + group]
        pid = str(members[0]["problem_id"])
        if any(str(m["problem_id"]) != pid for m in members):
            continue  # not a whole group: leave it as sampled
        rng = random.Random(f"{salt}{key[0]}:{key[1]}:{pid}:{start}")
        if rng.random() < share:
            yield start, pid, rng


def plan_elites(rows: Sequence[Mapping[str, Any]], group: int, archive: QDArchive, share: float,
                key: tuple[int, int], behind: float | None = None) -> dict[int, str]:
    """Which rows get an archive elite instead of a sample (module docstring): the last row of each drawn group,
    when the archive holds a kernel of that problem whose techniques the row permits (the fastest such) and, with
    ``behind``, only when the problem's last visit wrote nothing as fast as ``behind`` times that elite
    (``QDArchive.last_visit``, saved with the archive).

    Returns:
        {row index: the elite's completion text}.
    """
    plan: dict[int, str] = {}
    for start, pid, _ in drawn_groups(rows, group, share, key):
        elite = archive.best_within(pid, rows[start + group - 1]["permitted"])
        if elite is None:
            continue
        last = archive.last_visit(pid)
        if behind is not None and last is not None and last >= behind * elite.gflops:
            continue  # the policy still writes a kernel about as fast: nothing to bring back
        plan[start + group - 1] = elite.code
    return plan


def plan_novel_kinds(rows: Sequence[Mapping[str, Any]], group: int, archive: QDArchive,
                     needs: Mapping[str, frozenset[Technique]], share: float,
                     key: tuple[int, int]) -> dict[int, str]:
    """Which rows are generated after a forced plan opening, and the kind (module docstring): the first row of each
    drawn group, with a kind drawn from ``novel_kinds`` (none when it is empty).

    Returns:
        {row index: kind}.
    """
    plan: dict[int, str] = {}
    for start, pid, rng in drawn_groups(rows, group, share, key, salt="novelty:"):
        kinds = novel_kinds(pid, [str(t) for t in rows[start]["permitted"]], archive, needs)
        if kinds:
            plan[start] = rng.choice(kinds)
    return plan
