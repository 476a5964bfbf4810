"""Rewards of the HARGO task families (Li & Tian 2026): ``race_verdict``, ``mlperf_tiered``, ``plp_similarity``, and
``hpc_tasks``, the router that scores a mixed batch item by item with each item's own family's reward.

They are deliberately separate from the evaluation's parsers (``hpcrl_core/evaluation/metrics.py``), as in the
paper: a reward is a strict, cheap rule the policy is trained toward, the evaluation a lenient reading of what it
says. The one thing shared with evaluation is the sentence encoder (``evaluation.embeddings.embed``); the
repetition measure is shared with the reports (``hpcrl_core.textstats``).

Column contract (TRL passes every dataset column but ``prompt``/``completion`` as a list, one entry per completion):

- ``family`` (str): ``race_c``, ``race_fortran``, ``mlperf`` or ``plp``. Required by ``hpc_tasks``; optional for the
  per-family rewards, which, when it is given, check that every item is of their family.
- ``answer`` (str): the reference: ``"yes"``/``"no"`` for race (case and surrounding whitespace ignored), the fact
  for MLPerf, the reference description for PLP. Required; a blank answer is a ``DataError``.
- ``aliases``, ``partial`` (list of str, or None for none): MLPerf's other exact answers and its partial answers
  (the record's ``metadata["aliases"]``/``["partial"]``). Required when the batch holds an MLPerf item; entries
  of other families are not read (use ``[]``).

Every other column is ignored, and an item is scored from its own entries only. A missing or misaligned column is
a ``ConfigError`` (the dataset was built wrong); a malformed entry or an unknown family a ``DataError`` (a data
fault, never the model's mistake, so never a 0 reward). The context's observer is not called (it sees benchmark
results).

The rules (the paper fixes the tiers; the matching rules are this project's, stated exactly here and in the
functions' docstrings):

- ``race_verdict`` (``race_reward``): 1.0 when the answer's verdict is the reference's, else 0.0. The verdict is the
  answer's first word, ``yes`` or ``no`` (case-insensitive), followed by the end of the text or a character that is
  not a letter or digit ("Yes", " no.", "yes: the loop carries a dependence" pay; "Yesterday", "**Yes**",
  "Answer: yes", "The answer is yes" do not). The race prompts ask "Answer yes or no, then explain briefly" and the
  SFT targets read "yes: <reason>.", so the rule reads the verdict where the data puts it and leaves the
  explanation free; it is stricter than the evaluation's parser, which also reads phrases anywhere ("contains a
  data race").
- ``mlperf_tiered`` (``mlperf_reward``): 1.0 exact or numeric match, 0.5 partial, 0.2 keyword overlap > 70 %, 0.1
  keyword overlap > 40 %, else 0.0; the first tier that holds wins (see ``mlperf_reward``).
- ``plp_similarity`` (``plp_rewards``): cosine of the all-MiniLM-L6-v2 embeddings of answer and reference (0.0 for
  a blank answer), + ``task_reward.plp_bonus`` when the answer is not degenerate (``textstats.is_degenerate``:
  empty or looping), - ``task_reward.plp_length_penalty`` per character of the stripped answer beyond
  ``task_reward.plp_length_budget``.

Logged every call through TRL's ``log_metric``: ``reward/<family>/mean`` and ``reward/<family>/share`` (of the
batch) per family present, ``reward/mlperf/exact_share``, ``reward/plp/cosine_mean`` and
``reward/plp/bonus_share``.

Run: ``.venv/bin/python -c "from hpcrl_core.rewards.tasks import mlperf_reward as f; print(f('72%', '0.72', [], []))"``
Test: ``pytest tests/rewards/test_tasks.py tests/rewards/test_registry.py``.
"""

from __future__ import annotations

import re
import statistics
import unicodedata
from collections.abc import Callable, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

from hpcrl_core.config.hargo import TaskRewardParams
from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.rewards.completions import completion_text
from hpcrl_core.rewards.registry import RewardContext, register_reward
from hpcrl_core.textstats import is_degenerate

RACE_FAMILIES: tuple[str, ...] = ("race_c", "race_fortran")
MLPERF, PLP = "mlperf", "plp"
TASK_FAMILIES: tuple[str, ...] = (*RACE_FAMILIES, MLPERF, PLP)
VERDICTS = ("yes", "no")
# The HARGO paper's MLPerf tiers.
EXACT, PARTIAL, KEYWORDS_HIGH, KEYWORDS_LOW = 1.0, 0.5, 0.2, 0.1
HIGH_OVERLAP, LOW_OVERLAP = Fraction(7, 10), Fraction(4, 10)  # strict thresholds: exactly 70 % pays only 0.1

# --- race --------------------------------------------------------------------------------------------------------


_VERDICT = re.compile(r"\s*(yes|no)(?!\w)", re.IGNORECASE)  # the first word, then no letter, digit or "_"


def race_reward(text: str, answer: str) -> float:
    """The race reward: the answer's leading verdict against the reference (module docstring).

    Args:
        text: the model's answer.
        answer: the reference verdict, ``"yes"`` or ``"no"`` (case and surrounding whitespace ignored).

    Returns:
        1.0 when ``text`` starts (after whitespace) with the reference verdict as a whole word, else 0.0.

    Raises:
        DataError: ``answer`` is not a yes/no verdict.
    """
    verdict = answer.strip().casefold()
    if verdict not in VERDICTS:
        raise DataError(f"race reward: reference answer {answer!r} is not a verdict; a race item's answer must be "
                        "'yes' or 'no' (the label prepare writes); fix the RL dataset")
    said = _VERDICT.match(text)
    return 1.0 if said is not None and said.group(1).casefold() == verdict else 0.0


# --- MLPerf ------------------------------------------------------------------------------------------------------

# A number (digits, optional thousands groups "1,000", optional decimal part, optional "%") or a run of letters,
# either with optional "+"/"#" marks ("C++", "DeepLabv3+"). Letters and digits split apart ("ResNet50" =
# "ResNet-50" = resnet, 50); every other character (space, punctuation, "-") only separates tokens.
_TOKEN = re.compile(r"(?:(?P<num>\d+(?:,\d{3}(?!\d))*(?:\.\d+)*)(?P<pct>\s?%)?|(?P<word>[^\W\d_]+))(?P<mark>[+#]*)")
# Separators of a list of values: ",", ";", "&", "and" (", and" counted once). A comma between digits is not one.
_ITEM_SEP = re.compile(r"\s*(?:,\s*and\b|;|&|\band\b|(?<!\d),|,(?!\d))\s*", re.IGNORECASE)
STOPWORDS = frozenset(["a", "an", "the", "of", "and", "or", "in", "on", "for", "to", "with", "by", "at", "as", "from",
                       "is", "are", "was", "were", "be", "it", "its", "this", "that"])


def _number(digits: str, percent: bool) -> str:
    """A number's canonical value: "0.720" -> "0.72", "72%" -> "0.72", "1,000" -> "1000"; "1.2.3" stays itself."""
    plain = digits.replace(",", "")
    if plain.count(".") > 1:  # a version or a date, not one number
        return plain
    value = Decimal(plain) / 100 if percent else Decimal(plain)
    return format(value.normalize(), "f")


def mlperf_tokens(text: str) -> list[str]:
    """The tokens MLPerf answers are compared by, in order: NFKC, case-folded words, and numbers by canonical
    value in ``<>`` (``"72%"``, ``"0.720"`` and ``"0.72"`` are all ``"<0.72>"``; ``"C++"`` is ``"c++"``).
    Punctuation and whitespace are dropped."""
    return [(m["word"] or f"<{_number(m['num'], m['pct'] is not None)}>") + m["mark"]
            for m in _TOKEN.finditer(unicodedata.normalize("NFKC", text).casefold())]


def mlperf_key(text: str) -> str:
    """A text's normal form: its tokens joined without separators (the ``<>`` around numbers keep "1 5" apart
    from "15"); "Resnet 50 v1.50" and "ResNet-50 v1.5" are both ``resnet<50>v<1.5>``. Empty without tokens."""
    return "".join(mlperf_tokens(text))


def mlperf_items(text: str) -> list[str]:
    """The normal forms of the values a text lists, split at ",", ";", "&" and "and" ("Server and Offline" ->
    ``["server", "offline"]``); one entry for a single value."""
    return [k for k in (mlperf_key(part) for part in _ITEM_SEP.split(text)) if k]


def keyword_overlap(prediction: str, reference: str) -> Fraction | None:
    """Share of the reference's content tokens found in the prediction.

    Content tokens are the distinct ``mlperf_tokens`` minus ``STOPWORDS``; the share is
    ``|content(reference) & tokens(prediction)| / |content(reference)|``, exact (a fraction).

    Returns:
        The share, or None when the reference has no content token.
    """
    content = set(mlperf_tokens(reference)) - STOPWORDS
    if not content:
        return None
    return Fraction(len(content & set(mlperf_tokens(prediction))), len(content))


def mlperf_reward(text: str, answer: str, aliases: Sequence[str], partial: Sequence[str]) -> float:
    """The HARGO paper's tiered MLPerf reward, with this project's matching rules. References are the answer and
    its aliases; texts compare by ``mlperf_key`` (case, spacing, punctuation and number formatting ignored). The
    first tier that holds wins:

    - **1.0 exact or numeric match**: the answer's key equals a reference's ("resnet 50 v1.5." = "ResNet-50 v1.5",
      "72% masked LM accuracy" = "0.720 masked LM accuracy"), or, for a reference that lists several values
      (``mlperf_items``), the answer lists the same values in any order ("Offline, Server" = "Server and Offline").
    - **0.5 partial**: the answer's key equals a ``partial`` entry's, or a reference lists several values and the
      answer lists at least one of them but not that list (a value missing, added or repeated).
    - **0.2 / 0.1 keyword overlap**: the best ``keyword_overlap`` over the references is above 7/10 / above 4/10
      (strictly: exactly 70 % pays 0.1, exactly 40 % pays 0).
    - **0.0** otherwise, and for an answer without any token.

    Known limitation: a hedge that names several candidates can reach 0.2 by overlap (never more unless it is the
    listed values); a clean answer always pays more.

    Raises:
        DataError: the reference answer has no token (nothing to match).
    """
    if not mlperf_key(answer):
        raise DataError(f"mlperf reward: reference answer {answer!r} has no word or number to match; fix the item")
    references = [answer, *aliases]
    keys = {k for k in map(mlperf_key, references) if k}
    key = mlperf_key(text)
    if not key:
        return 0.0
    listed = sorted(mlperf_items(text))
    lists = [items for items in map(mlperf_items, references) if len(items) >= 2]
    if key in keys or any(sorted(items) == listed for items in lists):
        return EXACT
    if key in {mlperf_key(p) for p in partial} or any(set(items) & set(listed) for items in lists):
        return PARTIAL
    overlap = max((s for s in (keyword_overlap(text, r) for r in references) if s is not None), default=Fraction(0))
    if overlap > HIGH_OVERLAP:
        return KEYWORDS_HIGH
    return KEYWORDS_LOW if overlap > LOW_OVERLAP else 0.0


# --- PLP ---------------------------------------------------------------------------------------------------------


def plp_rewards(texts: Sequence[str], references: Sequence[str], params: TaskRewardParams
                ) -> tuple[list[float], list[float]]:
    """PLP rewards of a batch, embedding every distinct text once in one ``embed`` call.

    reward = cosine(answer, reference) + ``plp_bonus`` [answer not ``is_degenerate``] - ``plp_length_penalty`` x
    max(0, len(answer.strip()) - ``plp_length_budget``). A blank answer's cosine is 0.0 (it is not embedded).

    Args:
        texts: B answers.
        references: B reference descriptions, aligned with ``texts``.
        params: the ``task_reward`` section.

    Returns:
        ``(rewards, cosines)``, B floats each, in order.

    Raises:
        DataError: a reference is blank.
    """
    for i, ref in enumerate(references):
        if not ref.strip():
            raise DataError(f"plp reward: item {i} has a blank reference answer {ref!r}; a PLP item needs its "
                            "reference description in the 'answer' column")
    answers = [t.strip() for t in texts]
    distinct = list(dict.fromkeys([*(a for a in answers if a), *(r.strip() for r in references)]))
    row = {t: i for i, t in enumerate(distinct)}
    from hpcrl_core.evaluation.embeddings import embed  # torch + transformers: loaded when a PLP item is scored

    vectors = embed(distinct)  # (U, 384), unit-norm rows: a dot product is the cosine
    cosines = [float(vectors[row[a]] @ vectors[row[r.strip()]]) if a else 0.0
               for a, r in zip(answers, references, strict=True)]
    rewards = [c + (params.plp_bonus if not is_degenerate(a) else 0.0)
               - params.plp_length_penalty * max(0, len(a) - params.plp_length_budget)
               for a, c in zip(answers, cosines, strict=True)]
    return rewards, cosines


# --- columns and the reward functions ----------------------------------------------------------------------------


def _column(reward: str, name: str, values: Sequence[Any] | None, count: int, fix: str) -> list[Any]:
    """A dataset column, checked to hold one entry per completion.

    Raises:
        ConfigError: missing, a string, or of another length than the batch.
    """
    if values is None:
        raise ConfigError(f"reward {reward} needs the dataset column {name!r} ({fix}); add it to the RL dataset")
    if isinstance(values, str | bytes) or len(values) != count:
        got = "a string" if isinstance(values, str | bytes) else f"{len(values)} entries"
        raise ConfigError(f"reward {reward}: column {name!r} must hold one entry per completion; got {got} for "
                          f"{count} completions")
    return list(values)


def _text_entry(reward: str, name: str, i: int, value: Any) -> str:
    """Entry ``i`` of a text column. Raises ``DataError`` when it is not a string."""
    if not isinstance(value, str):
        raise DataError(f"reward {reward}: {name}[{i}] is {value!r}; it must be a string")
    return value


def _list_entry(reward: str, name: str, i: int, value: Any) -> list[str]:
    """Entry ``i`` of ``aliases``/``partial``: a list of strings, None for none. Raises ``DataError`` otherwise."""
    if value is None:
        return []
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise DataError(f"reward {reward}: {name}[{i}] is {value!r}; it must be a list of strings ([] for none)")
    return list(value)


class TaskReward:
    """A task reward over the families in ``families`` (see the module docstring); call it as TRL does."""

    def __init__(self, name: str, families: tuple[str, ...], params: TaskRewardParams) -> None:
        self.__name__ = name  # TRL names the reward in its logs by this
        self.families = families
        self.params = params

    def __call__(self, completions: Sequence[Any], answer: Sequence[Any] | None = None,
                 family: Sequence[Any] | None = None, aliases: Sequence[Any] | None = None,
                 partial: Sequence[Any] | None = None, log_metric: Callable[[str, float], None] | None = None,
                 **kwargs: Any) -> list[float]:
        """Rewards of a batch, one float per completion, in order.

        Args:
            completions: B completions (strings or conversational message lists).
            answer: B reference answers.
            family: B family names; required when this reward covers several families.
            aliases: B lists of alias answers (read for MLPerf items).
            partial: B lists of partial answers (read for MLPerf items).
            log_metric: TRL's scalar logger, or None.
            **kwargs: other dataset columns and TRL arguments; ignored.

        Raises:
            ConfigError: a column this batch needs is missing or misaligned.
            DataError: an unknown or foreign family, or a malformed entry.
        """
        texts = [completion_text(c) for c in completions]
        n = len(texts)
        refs = [_text_entry(self.__name__, "answer", i, a) for i, a in
                enumerate(_column(self.__name__, "answer", answer, n, "the reference answer of each item"))]
        families = self._families(family, n)
        if MLPERF in families:  # every column is checked before anything is embedded
            alias_col = _column(self.__name__, "aliases", aliases, n, "the MLPerf alias answers, [] for none")
            partial_col = _column(self.__name__, "partial", partial, n, "the MLPerf partial answers, [] for none")
        rewards = [0.0] * n
        plp = [i for i, f in enumerate(families) if f == PLP]
        plp_rewards_, cosines = plp_rewards([texts[i] for i in plp], [refs[i] for i in plp], self.params)
        for i, r in zip(plp, plp_rewards_, strict=True):
            rewards[i] = r
        for i, f in enumerate(families):
            if f in RACE_FAMILIES:
                rewards[i] = race_reward(texts[i], refs[i])
            elif f == MLPERF:
                rewards[i] = mlperf_reward(texts[i], refs[i], _list_entry(self.__name__, "aliases", i, alias_col[i]),
                                           _list_entry(self.__name__, "partial", i, partial_col[i]))
        if log_metric is not None:
            for key, value in _metrics(families, rewards, [texts[i] for i in plp], cosines).items():
                log_metric(key, value)
        return rewards

    def _families(self, family: Sequence[Any] | None, count: int) -> list[str]:
        """Each item's family, checked against this reward's; without a ``family`` column (allowed for a
        one-family reward) every item is of this reward's first family.

        Raises:
            ConfigError: the column is missing where needed, or misaligned.
            DataError: an entry names a family this reward does not score.
        """
        if family is None and len({_kind(f) for f in self.families}) == 1:
            return [self.families[0]] * count
        column = _column(self.__name__, "family", family, count, "each item's task family: "
                         + ", ".join(self.families))
        for i, f in enumerate(column):
            if f not in self.families:
                fix = ("use hpc_tasks for a batch that mixes families" if f in TASK_FAMILIES else
                       "keep other families out of the HARGO dataset (dgemm items belong to rl_dgemm)")
                raise DataError(f"reward {self.__name__}: item {i} has family {f!r}, which it does not score; "
                                f"known families: {', '.join(self.families)}; {fix}")
        return column


def _kind(family: str) -> str:
    """The reward rule a family uses: race_c and race_fortran share one."""
    return "race" if family in RACE_FAMILIES else family


def _metrics(families: Sequence[str], rewards: Sequence[float], plp_texts: Sequence[str],
             cosines: Sequence[float]) -> dict[str, float]:
    """The scalars of one batch (see the module docstring)."""
    out: dict[str, float] = {}
    for f in dict.fromkeys(families):
        mine = [r for g, r in zip(families, rewards, strict=True) if g == f]
        out[f"reward/{f}/mean"] = statistics.fmean(mine)
        out[f"reward/{f}/share"] = len(mine) / len(families)
        if f == MLPERF:
            out["reward/mlperf/exact_share"] = sum(r == EXACT for r in mine) / len(mine)
    if cosines:
        out["reward/plp/cosine_mean"] = statistics.fmean(cosines)
        out["reward/plp/bonus_share"] = sum(not is_degenerate(t.strip()) for t in plp_texts) / len(plp_texts)
    return out


@register_reward("race_verdict")
def race_verdict(ctx: RewardContext) -> TaskReward:
    """Factory of ``race_verdict``: the exact yes/no verdict of race_c and race_fortran items."""
    return TaskReward("race_verdict", RACE_FAMILIES, ctx.params.task_reward)


@register_reward("mlperf_tiered")
def mlperf_tiered(ctx: RewardContext) -> TaskReward:
    """Factory of ``mlperf_tiered``: the tiered MLPerf reward."""
    return TaskReward("mlperf_tiered", (MLPERF,), ctx.params.task_reward)


@register_reward("plp_similarity")
def plp_similarity(ctx: RewardContext) -> TaskReward:
    """Factory of ``plp_similarity``: MiniLM cosine with the non-degeneracy bonus and the length penalty."""
    return TaskReward("plp_similarity", (PLP,), ctx.params.task_reward)


@register_reward("hpc_tasks")
def hpc_tasks(ctx: RewardContext) -> TaskReward:
    """Factory of ``hpc_tasks``: each item of a mixed batch scored by its own family's reward."""
    return TaskReward("hpc_tasks", TASK_FAMILIES, ctx.params.task_reward)
