"""SQD (Staged Quality-Diversity) curriculum: per-problem stages of permitted techniques, promoted on progress.

Every DGEMM problem has an unlock ``order`` of the five techniques; at stage s the first s are permitted. The
curriculum keeps each problem's current stage, records one visit per group of completions (their rewards),
promotes a problem by one stage when the rule of ``SQDParams`` says so. Which problem is visited when is not its
business: the trainer's seeded sampler decides (one dataset row per problem). Its whole state saves to JSON with a
checkpoint and resumes exactly. With visit sizes, each visit also draws the matrix size its prompt asks for (and
its kernels are timed at), so a few problems do not tie the policy to a few values of n. The rule and what is ours
rather than the paper's: ``docs/sqd.md``.

Use::

    cur = SQDCurriculum(read_problems(Path("data/dgemm/problems_train.jsonl")), params.rl_dgemm.sqd, seed=1234,
                        sizes=params.prepare.dgemm.train_sizes)
    stage = cur.visit_stage(pid)             # the current stage, or an earlier one for a replay visit
    n = cur.visit_size(pid)                  # the problem's own n, or one of the visit sizes
    messages = cur.prompt(pid, stage, n)     # rendered at that stage and size
    ...                                      # generate a group of completions, benchmark them
    cur.record(pid, rewards, stage)          # True when the problem was promoted

Test: ``pytest tests/algorithms/test_sqd.py``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from statistics import fmean
from typing import Any

from hpcrl_core.bench.techniques import ALL_TECHNIQUES, Technique
from hpcrl_core.config import SQDParams
from hpcrl_core.data.dgemm.problems import Problem, problem_prompt
from hpcrl_core.data.schema import Record, read_jsonl
from hpcrl_core.data.stable import stable_index, stable_unit
from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.files import read_json_file, write_text_atomic

STATE_FILE = "sqd_state.json"  # the name of the curriculum's state inside a checkpoint folder
STATE_VERSION = 3  # 2: a visit count instead of the visiting position (the sampler owns the order); 3: replays
READABLE_VERSIONS = (2, 3)  # a version-2 state has had no replays
STAGES: tuple[int, ...] = tuple(range(len(ALL_TECHNIQUES) + 1))  # 0 (plain kernel) .. 5 (anything)
_PROBLEM_KEYS = ("problem_id", "n", "order", "stage")
_ADDED_PARAMS: dict[str, Any] = {"replay": 0.0}  # sqd params newer than state version 2, with their old behaviour


def problem_from_record(record: Record) -> Problem:
    """Rebuild a ``Problem`` from a dgemm record (a line of ``data/dgemm/problems_*.jsonl``).

    Raises:
        DataError: not a dgemm record, missing or malformed metadata, or a ``permitted`` list that disagrees
            with ``order[:stage]``.
    """
    md = record.metadata
    where = f"record {record.id}"
    if record.family != "dgemm":
        raise DataError(f"{where}: family {record.family!r} is not a DGEMM problem; expected family 'dgemm'")
    missing = [k for k in _PROBLEM_KEYS if k not in md]
    if missing:
        raise DataError(f"{where}: metadata lacks {missing}; a problem record needs {list(_PROBLEM_KEYS)}")
    for key in ("n", "stage"):
        if not isinstance(md[key], int) or isinstance(md[key], bool):
            raise DataError(f"{where}: metadata.{key} must be an integer, got {md[key]!r}")
    try:
        order = tuple(Technique(t) for t in md["order"])
    except (TypeError, ValueError):
        raise DataError(f"{where}: metadata.order must list technique names "
                        f"({', '.join(t.value for t in ALL_TECHNIQUES)}), got {md['order']!r}") from None
    p = Problem(id=str(md["problem_id"]), n=md["n"], order=order, stage=md["stage"])
    if "permitted" in md and sorted(map(str, md["permitted"])) != sorted(t.value for t in p.permitted):
        raise DataError(f"{where}: metadata.permitted {md['permitted']} is not the first {p.stage} techniques of "
                        f"its order {md['order']}")
    return p


def problems_from_records(records: Iterable[Record]) -> list[Problem]:
    """Rebuild the problems of dgemm records, in file order.

    Raises:
        DataError: a malformed record (see ``problem_from_record``) or a problem id listed twice.
    """
    out: dict[str, Problem] = {}
    for record in records:
        p = problem_from_record(record)
        if p.id in out:
            raise DataError(f"record {record.id}: problem {p.id} appears twice; each problem must be listed once")
        out[p.id] = p
    return list(out.values())


def read_problems(path: Path) -> list[Problem]:
    """The problems of a problems JSONL file such as ``data/dgemm/problems_train.jsonl``.

    Raises:
        DataError: a missing file or malformed record, naming the file.
    """
    try:
        return problems_from_records(read_jsonl(path))
    except DataError as err:
        raise DataError(f"{path}: {err}") from None


def should_promote(visit_means: Sequence[float], params: SQDParams) -> bool:
    """The promotion rule of ``SQDParams`` on the visits of one problem at its current stage.

    Args:
        visit_means: mean reward of each visit at the stage, oldest first (only the last ``2 * window`` matter).
        params: ``window``, ``promote_reward`` and ``plateau_tol`` are used.

    Returns:
        True when the mean of the last ``window`` visits reaches ``promote_reward`` (threshold), or when there are
        at least ``2 * window`` visits and that mean is not above the mean of the ``window`` before it by more
        than ``plateau_tol`` (plateau).
    """
    w = params.window
    if len(visit_means) < w:
        return False
    last = fmean(visit_means[-w:])
    if last >= params.promote_reward:
        return True
    if len(visit_means) < 2 * w:
        return False
    return last - fmean(visit_means[-2 * w:-w]) <= params.plateau_tol


@dataclasses.dataclass
class _ProblemState:
    """Mutable per-problem state. Invariant: ``len(recent) <= min(visits, 2 * window)``."""

    stage: int
    visits: int = 0  # visits at the current stage
    recent: list[list[float]] = dataclasses.field(default_factory=list)  # rewards of the last 2*window visits


class SQDCurriculum:
    """The SQD curriculum over a fixed set of problems (see the module docstring).

    Args:
        problems: the training problems (ids unique); their ``stage`` is the generated stage.
        params: the ``rl_dgemm.sqd`` section.
        seed: the run's seed (the trainer's sampler orders the visits with it); a saved state resumes only under
            the same one.
        sizes: the matrix sizes a visit may be rendered at, one drawn per visit (``visit_size``); empty: every visit
            asks for its problem's own n. A saved state resumes only under the same sizes.

    Raises:
        ConfigError: no problems, a problem id listed twice, or a size below 1.
    """

    def __init__(self, problems: Sequence[Problem], params: SQDParams, seed: int, sizes: Sequence[int] = ()) -> None:
        if not problems:
            raise ConfigError("SQD needs at least one problem; got none (check rl_dgemm.problems and the data)")
        dupes = sorted(pid for pid, c in Counter(p.id for p in problems).items() if c > 1)
        if dupes:
            raise ConfigError(f"SQD problems must have unique ids; listed more than once: {dupes[:5]}")
        if not all(map(_is_size, sizes)):
            raise ConfigError(f"SQD visit sizes must be positive integers; got {list(sizes)}")
        self._params = params
        self._seed = seed
        self._sizes = tuple(sorted(set(sizes)))
        self._problems = {p.id: p for p in problems}
        self._ids = sorted(self._problems)
        self._states = {p.id: _ProblemState(self._initial_stage(p)) for p in problems}
        self._visits = 0  # visits recorded, all problems and stages (replays included)
        self._promotions = 0
        self._replays = 0  # visits rendered at an earlier stage than the problem's current one

    def _initial_stage(self, p: Problem) -> int:
        if not self._params.enabled:
            return p.stage
        start = p.stage if self._params.start_stage is None else self._params.start_stage
        return min(start, self._ceiling(p))

    def _ceiling(self, p: Problem) -> int:
        """The highest stage the problem may reach: ``max_stage``, or its generated stage when that is null."""
        return p.stage if self._params.max_stage is None else self._params.max_stage

    def _state(self, pid: str) -> _ProblemState:
        try:
            return self._states[pid]
        except KeyError:
            raise KeyError(f"unknown problem id {pid!r}: not one of the curriculum's {len(self._ids)} problems "
                           f"(e.g. {self._ids[0]!r})") from None

    @property
    def params(self) -> SQDParams:
        return self._params

    @property
    def problem_ids(self) -> list[str]:
        """The problem ids, sorted."""
        return list(self._ids)

    @property
    def promotions(self) -> int:
        """Promotions since the curriculum started (survives save/load)."""
        return self._promotions

    def stage(self, pid: str) -> int:
        """The problem's current stage (0..5). Raises KeyError for an unknown id."""
        return self._state(pid).stage

    def visits(self, pid: str) -> int:
        """Visits recorded for the problem at its current stage."""
        return self._state(pid).visits

    def history(self, pid: str) -> list[list[float]]:
        """The rewards of the problem's last (up to ``2 * window``) visits at its current stage, oldest first."""
        return [list(v) for v in self._state(pid).recent]

    @property
    def replays(self) -> int:
        """Visits so far rendered at an earlier stage than their problem's current one (survives save/load)."""
        return self._replays

    def _checked_stage(self, pid: str, stage: int | None) -> int:
        """``stage``, or the current one when None; ValueError outside the stages the problem has reached."""
        current = self._state(pid).stage
        if stage is None:
            return current
        lowest = self._initial_stage(self._problems[pid])
        if isinstance(stage, bool) or not isinstance(stage, int) or not lowest <= stage <= current:
            raise ValueError(f"problem {pid}: stage {stage!r} is not one it has reached ({lowest}..{current})")
        return stage

    def visit_stage(self, pid: str) -> int:
        """The stage the problem's next visit is rendered at: its current stage, or with probability
        ``replay`` one of the earlier stages it passed (uniformly). A function of the seed, the problem and the
        visits recorded so far, so a resumed run draws the same stages."""
        state = self._state(pid)
        lowest = self._initial_stage(self._problems[pid])
        if self._params.replay <= 0 or state.stage <= lowest:
            return state.stage
        if stable_unit("sqd-replay", self._seed, pid, self._visits) >= self._params.replay:
            return state.stage
        return lowest + stable_index(state.stage - lowest, "sqd-replay-stage", self._seed, pid, self._visits)

    def visit_size(self, pid: str) -> int:
        """The matrix size the problem's next visit asks for and is timed at: its own n without visit sizes, else one
        of them drawn uniformly from the seed, the problem and the visits recorded so far (a resumed run draws the
        same). Every completion of a visit gets the same size, so a group compares kernels at one n."""
        self._state(pid)  # the KeyError for an unknown id
        if not self._sizes:
            return self._problems[pid].n
        return self._sizes[stable_index(len(self._sizes), "sqd-size", self._seed, pid, self._visits)]

    def problem(self, pid: str, stage: int | None = None, n: int | None = None) -> Problem:
        """The problem at ``stage`` (default: its current stage) and size ``n`` (default: its own);
        ``permitted``/``forbidden`` follow the stage.

        Raises:
            KeyError: an unknown problem id.
            ValueError: a stage the problem has not reached, or a size below 1.
        """
        checked = self._checked_stage(pid, stage)  # raises the KeyError for an unknown id first
        if n is not None and not _is_size(n):
            raise ValueError(f"problem {pid}: size {n!r} is not a positive integer")
        p = self._problems[pid]
        return dataclasses.replace(p, stage=checked, n=p.n if n is None else n)

    def permitted(self, pid: str, stage: int | None = None) -> frozenset[Technique]:
        """The techniques permitted at ``stage`` (default: the current one): the first ``stage`` of its order."""
        return self.problem(pid, stage).permitted

    def prompt(self, pid: str, stage: int | None = None, n: int | None = None) -> list[dict[str, str]]:
        """The problem's chat messages rendered at ``stage`` (default: its current stage) and size ``n`` (default:
        its own)."""
        return problem_prompt(self.problem(pid, stage, n))

    def record(self, pid: str, rewards: Sequence[float], stage: int | None = None) -> bool:
        """Record one visit (the rewards of one group of completions) and apply the promotion rule.

        Args:
            pid: the problem visited.
            rewards: one reward per completion of the group (length G); the visit's value is their mean.
            stage: the stage the visit was rendered at (``visit_stage``); None = the current one. A visit at an
                earlier stage (a replay) is counted but is not part of the promotion rule.

        Returns:
            True when the problem was promoted to the next stage (its visit history then starts afresh).

        Raises:
            KeyError: an unknown problem id.
            ValueError: no rewards, a reward that is not a finite number, or a stage the problem has not reached.
        """
        state = self._state(pid)
        values = [float(r) for r in rewards]
        if not values:
            raise ValueError(f"problem {pid}: a visit needs the rewards of its group (one per completion); got none")
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"problem {pid}: rewards must be finite numbers, got {values}")
        shown = self._checked_stage(pid, stage)
        self._visits += 1
        if shown < state.stage:
            self._replays += 1
            return False
        state.visits += 1
        state.recent.append(values)
        del state.recent[:-2 * self._params.window]
        if not self._params.enabled or state.stage >= self._ceiling(self._problems[pid]):
            return False
        if not should_promote([fmean(v) for v in state.recent], self._params):
            return False
        state.stage += 1
        state.visits = 0
        state.recent = []
        self._promotions += 1
        return True

    def stats(self) -> dict[str, float]:
        """Numbers to log each step: ``sqd/mean_stage``, ``sqd/stage_0`` .. ``sqd/stage_5`` (problem counts),
        ``sqd/promotions``, ``sqd/visits`` and ``sqd/replays`` (so far, all problems)."""
        stages = [s.stage for s in self._states.values()]
        counts = Counter(stages)
        out = {"sqd/mean_stage": fmean(stages)}
        out.update({f"sqd/stage_{s}": float(counts.get(s, 0)) for s in STAGES})
        out["sqd/promotions"] = float(self._promotions)
        out["sqd/visits"] = float(self._visits)
        out["sqd/replays"] = float(self._replays)
        return out

    def _fingerprint(self) -> dict[str, Any]:
        return {"seed": self._seed, "params": self._params.model_dump(mode="json"), "sizes": list(self._sizes),
                "problems": {pid: {"n": p.n, "order": [t.value for t in p.order], "stage": p.stage}
                             for pid, p in sorted(self._problems.items())}}

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly: stages, visit histories, promotions, visits, and
        the problems, params and seed it belongs to (checked on load). JSON-serialisable."""
        return {"version": STATE_VERSION, **self._fingerprint(),
                "visits": self._visits, "promotions": self._promotions, "replays": self._replays,
                "states": {pid: {"stage": s.stage, "visits": s.visits, "recent": s.recent}
                           for pid, s in sorted(self._states.items())}}

    def load_state_dict(self, state: dict[str, Any], source: str = "SQD state") -> None:
        """Replace this curriculum's state by a saved one; nothing changes when it fails.

        Raises:
            ConfigError: the state belongs to other problems, params or seed (each difference listed), or is
                malformed.
        """
        if not isinstance(state, dict) or state.get("version") not in READABLE_VERSIONS:
            found = state.get("version") if isinstance(state, dict) else type(state).__name__
            raise ConfigError(f"{source}: not an SQD state of version {' or '.join(map(str, READABLE_VERSIONS))} "
                              f"(found {found!r})")
        diffs = _differences(state, self._fingerprint())
        if diffs:
            raise ConfigError(f"{source}: cannot resume: the saved curriculum differs from this run's; start a fresh "
                              f"run (or clear the checkpoints) instead of mixing curricula", diffs)
        try:
            states = {pid: self._parse_problem_state(pid, state["states"][pid]) for pid in self._ids}
            visits, promotions = int(state["visits"]), int(state["promotions"])
            replays = int(state.get("replays", 0))
        except (KeyError, TypeError, ValueError) as err:
            raise ConfigError(f"{source}: malformed SQD state ({type(err).__name__}: {err})") from None
        at_stages = sum(s.visits for s in states.values())
        if visits < at_stages + replays or not 0 <= promotions <= visits or replays < 0:
            raise ConfigError(f"{source}: malformed SQD state: {visits} visits, {replays} replays and {promotions} "
                              f"promotions do not fit the {at_stages} visits recorded at the problems' current stages")
        self._states, self._visits, self._promotions, self._replays = states, visits, promotions, replays

    def _parse_problem_state(self, pid: str, raw: dict[str, Any]) -> _ProblemState:
        stage, visits = int(raw["stage"]), int(raw["visits"])
        recent = [[float(r) for r in visit] for visit in raw["recent"]]
        lowest = self._initial_stage(self._problems[pid])
        highest = self._ceiling(self._problems[pid]) if self._params.enabled else lowest
        if not lowest <= stage <= max(lowest, highest):
            raise ValueError(f"problem {pid}: stage {stage} outside {lowest}..{max(lowest, highest)}")
        if visits < 0 or len(recent) > min(visits, 2 * self._params.window) or not all(recent):
            raise ValueError(f"problem {pid}: {visits} visits do not fit {len(recent)} recorded visits")
        if not all(math.isfinite(r) for visit in recent for r in visit):
            raise ValueError(f"problem {pid}: non-finite reward in the history")
        return _ProblemState(stage, visits, recent)

    def save(self, path: Path) -> None:
        """Write ``state_dict()`` as JSON, atomically."""
        write_text_atomic(path, json.dumps(self.state_dict(), indent=1, sort_keys=True) + "\n")

    def load(self, path: Path) -> None:
        """Resume from a file written by ``save``.

        Raises:
            DataError: the file is missing or not JSON.
            ConfigError: see ``load_state_dict``.
        """
        self.load_state_dict(read_json_file(path, "SQD state"), source=str(path))


def _is_size(n: object) -> bool:
    """Whether ``n`` is a matrix size: a whole number (not a bool) of at least 1."""
    return isinstance(n, int) and not isinstance(n, bool) and n >= 1


def _differences(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """One line per way a saved state's seed, params or problems differ from the current curriculum's."""
    lines = []
    if saved.get("seed") != current["seed"]:
        lines.append(f"seed: saved {saved.get('seed')!r}, this run {current['seed']!r}")
    if saved.get("sizes", []) != current["sizes"]:  # a state without sizes predates them: own sizes
        lines.append(f"visit sizes (rl_dgemm.visit_sizes): saved {saved.get('sizes', [])!r}, this run "
                     f"{current['sizes']!r}")
    saved_params = _mapping(saved.get("params"))
    for key, now in current["params"].items():
        # a key the saved state predates ran with the behaviour of that key's no-op value (replay: 0)
        then = saved_params.get(key, _ADDED_PARAMS.get(key))
        if then != now:
            lines.append(f"sqd.{key}: saved {then!r}, this run {now!r}")
    saved_problems = _mapping(saved.get("problems"))
    missing = sorted(set(current["problems"]) - set(saved_problems))
    extra = sorted(set(saved_problems) - set(current["problems"]))
    changed = sorted(pid for pid in set(saved_problems) & set(current["problems"])
                     if saved_problems[pid] != current["problems"][pid])
    for label, ids in (("problems only in this run", missing), ("problems only in the saved state", extra),
                       ("problems whose size, order or generated stage changed", changed)):
        if ids:
            lines.append(f"{label} ({len(ids)}): {', '.join(ids[:3])}{' ...' if len(ids) > 3 else ''}")
    return lines


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
