"""Tests of the SQD curriculum: the promotion rule, stage limits, prompts per stage, the visiting order and resume.

Run: pytest tests/algorithms/test_sqd.py
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from hpcrl_core.algorithms.sqd import SQDCurriculum, read_problems
from hpcrl_core.config import SQDParams
from hpcrl_core.data.dgemm.problems import Problem, make_problems, problem_record
from hpcrl_core.data.schema import Record, write_jsonl
from hpcrl_core.errors import ConfigError, DataError

PROBLEMS = make_problems("train", 3, 6)


def _curriculum(seed: int = 0, problems: list[Problem] | None = None, sizes: tuple[int, ...] = (),
                **params: Any) -> SQDCurriculum:
    return SQDCurriculum(PROBLEMS if problems is None else problems, SQDParams(**params), seed, sizes)


def _visits(cur: SQDCurriculum, pid: str, means: list[float]) -> list[bool]:
    """Record one visit per value (a group of two rewards averaging to it); the promotion flags."""
    return [cur.record(pid, [m - 1.0, m + 1.0]) for m in means]


def test_threshold_promotes_on_the_mean_of_the_window() -> None:
    cur = _curriculum(window=2, promote_reward=5.0, plateau_tol=0.5)
    pid = PROBLEMS[0].id
    assert _visits(cur, pid, [7.0, 2.0]) == [False, False]  # one good visit is not enough: window mean 4.5
    assert cur.stage(pid) == 0 and cur.visits(pid) == 2
    assert _visits(cur, pid, [8.0]) == [True]  # window (2, 8) mean 5.0 reaches the threshold
    assert cur.stage(pid) == 1 and cur.visits(pid) == 0 and cur.history(pid) == []  # history starts afresh
    assert cur.record(pid, [10.0, 0.0]) is False  # a visit's value is its mean (5), and the window is new
    assert cur.record(pid, [5.0]) is True and cur.stage(pid) == 2
    assert cur.promotions == 2


def test_plateau_promotes_only_after_two_windows() -> None:
    cur = _curriculum(window=3, promote_reward=5.0, plateau_tol=0.5)
    pid = PROBLEMS[1].id
    assert _visits(cur, pid, [1.0] * 6) == [False] * 5 + [True]  # flat, below the threshold: stuck
    assert cur.stage(pid) == 1


def test_plateau_tolerance_is_inclusive_and_improvement_blocks_it() -> None:
    flat = _curriculum(window=2, promote_reward=5.0, plateau_tol=0.5)
    assert _visits(flat, PROBLEMS[0].id, [1.0, 1.0, 1.5, 1.5]) == [False, False, False, True]  # +0.5: plateau
    rising = _curriculum(window=2, promote_reward=5.0, plateau_tol=0.5)
    assert _visits(rising, PROBLEMS[0].id, [1.0, 1.0, 1.6, 1.6]) == [False] * 4  # +0.6: still learning


def test_no_promotion_while_improving() -> None:
    cur = _curriculum(window=2, promote_reward=5.0, plateau_tol=0.5)
    pid = PROBLEMS[2].id
    assert _visits(cur, pid, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]) == [False] * 6  # each window beats the last by 2
    assert cur.stage(pid) == 0
    assert _visits(cur, pid, [6.0]) == [True]  # window (5, 6) mean 5.5 reaches the threshold


def test_never_promoted_beyond_max_stage() -> None:
    cur = _curriculum(window=1, promote_reward=5.0, max_stage=2)
    pid = PROBLEMS[0].id
    assert _visits(cur, pid, [9.0] * 6) == [True, True, False, False, False, False]
    assert cur.stage(pid) == 2 and cur.promotions == 2
    assert cur.permitted(pid) == frozenset(PROBLEMS[0].order[:2])


def test_max_stage_none_stages_each_problem_up_to_its_generated_stage() -> None:
    cur = _curriculum(window=1, promote_reward=5.0, max_stage=None)
    assert len({p.stage for p in PROBLEMS}) > 2  # the problems have different targets
    for p in PROBLEMS:
        assert cur.stage(p.id) == 0
        assert _visits(cur, p.id, [9.0] * 7) == [True] * p.stage + [False] * (7 - p.stage)
        assert cur.problem(p.id) == p  # ends at the problem as generated: its own permitted set
    # A saved state at a stage above a problem's own ceiling is refused on load.
    state = cur.state_dict()
    low = next(p for p in PROBLEMS if p.stage < 5)
    state["states"][low.id]["stage"] = low.stage + 1
    with pytest.raises(ConfigError, match="malformed"):
        _curriculum(window=1, promote_reward=5.0, max_stage=None).load_state_dict(state)


def test_disabled_keeps_generated_stages() -> None:
    cur = _curriculum(enabled=False, start_stage=0, max_stage=1, window=1)
    assert {p.id: cur.stage(p.id) for p in PROBLEMS} == {p.id: p.stage for p in PROBLEMS}
    assert any(p.stage > 1 for p in PROBLEMS)  # so max_stage was really ignored
    for p in PROBLEMS:
        assert _visits(cur, p.id, [9.0, 1.0, 1.0]) == [False] * 3
        assert cur.problem(p.id) == p
    assert cur.stats()["sqd/promotions"] == 0


def test_start_stage_none_keeps_generated_stage_capped_to_max() -> None:
    generated = _curriculum(start_stage=None)
    assert [generated.stage(p.id) for p in PROBLEMS] == [p.stage for p in PROBLEMS]
    capped = _curriculum(start_stage=None, max_stage=2)
    assert [capped.stage(p.id) for p in PROBLEMS] == [min(p.stage, 2) for p in PROBLEMS]
    assert [_curriculum().stage(p.id) for p in PROBLEMS] == [0] * len(PROBLEMS)  # default: start at 0


def _sections(messages: list[dict[str, str]]) -> tuple[str, str]:
    head, _, forbidden = messages[-1]["content"].partition("Forbidden techniques")
    return head.partition("Permitted techniques")[2], forbidden


def test_permitted_set_and_prompt_follow_the_stage() -> None:
    cur = _curriculum(window=1, promote_reward=5.0)
    p = PROBLEMS[0]
    first = p.order[0]
    assert cur.permitted(p.id) == frozenset()
    permitted, forbidden = _sections(cur.prompt(p.id))
    assert "none" in permitted and f"- no {first.value}:" in forbidden
    assert cur.record(p.id, [9.0])
    assert cur.permitted(p.id) == frozenset({first})
    permitted, forbidden = _sections(cur.prompt(p.id))
    assert f"- {first.value}:" in permitted and f" {first.value}:" not in forbidden
    assert f"- no {p.order[1].value}:" in forbidden
    assert cur.problem(p.id).stage == 1 and cur.problem(p.id).order == p.order


def _drive(cur: SQDCurriculum, steps: int, first_step: int) -> list[Any]:
    """A deterministic training stand-in: 2 problems per step, in turn, with rewards drawn from (problem, step)."""
    log: list[Any] = []
    ids = cur.problem_ids
    for step in range(first_step, first_step + steps):
        for pid in (ids[2 * step % len(ids)], ids[(2 * step + 1) % len(ids)]):
            rng = random.Random(f"{pid}:{step}")
            rewards = [rng.uniform(-2.0, 8.0) for _ in range(4)]
            shown, n = cur.visit_stage(pid), cur.visit_size(pid)
            log.append((step, pid, shown, n, cur.record(pid, rewards, shown), cur.stage(pid)))
        log.append(cur.stats())
    return log


def test_resume_continues_exactly(tmp_path: Path) -> None:
    params: dict[str, Any] = {"window": 2, "promote_reward": 4.0, "plateau_tol": 0.5, "replay": 0.4,
                              "sizes": (192, 224, 256)}
    uninterrupted = _curriculum(seed=9, **params)
    _drive(uninterrupted, 7, 0)  # 14 visits over 6 problems: saved mid-way through the second pass
    uninterrupted.save(tmp_path / "sqd.json")
    resumed = _curriculum(seed=9, **params)
    resumed.load(tmp_path / "sqd.json")
    assert resumed.state_dict() == uninterrupted.state_dict()
    expected = _drive(uninterrupted, 20, 7)
    assert _drive(resumed, 20, 7) == expected
    assert uninterrupted.promotions > 0 and uninterrupted.replays > 0  # the scenario exercises both
    assert _drive(_curriculum(seed=9, **params), 20, 7) != expected  # a fresh start would differ


def test_load_refuses_another_curriculum(tmp_path: Path) -> None:
    saved = _curriculum(seed=1, window=2)
    _drive(saved, 3, 0)
    saved.save(tmp_path / "sqd.json")
    cases = [(_curriculum(seed=1, window=2, problems=make_problems("train", 4, 6)), "only in this run"),
             (_curriculum(seed=1, window=3), "sqd.window"),
             (_curriculum(seed=2, window=2), "seed")]
    for other, reason in cases:
        before = other.state_dict()
        with pytest.raises(ConfigError, match="cannot resume") as err:
            other.load(tmp_path / "sqd.json")
        assert reason in str(err.value)
        assert other.state_dict() == before  # a refused load changes nothing


def test_load_reports_missing_or_broken_files(tmp_path: Path) -> None:
    cur = _curriculum()
    with pytest.raises(DataError, match="no such SQD state"):
        cur.load(tmp_path / "absent.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON"):
        cur.load(tmp_path / "bad.json")
    state = cur.state_dict()
    state["states"][PROBLEMS[0].id]["stage"] = 9
    with pytest.raises(ConfigError, match="malformed"):
        cur.load_state_dict(state)


def test_record_rejects_unknown_problems_and_empty_groups() -> None:
    cur = _curriculum()
    with pytest.raises(KeyError, match="unknown problem id 'nope'"):
        cur.record("nope", [1.0])
    with pytest.raises(ValueError, match="got none"):
        cur.record(PROBLEMS[0].id, [])
    with pytest.raises(ValueError, match="finite"):
        cur.record(PROBLEMS[0].id, [1.0, float("nan")])
    assert cur.visits(PROBLEMS[0].id) == 0


def test_stats_count_problems_per_stage() -> None:
    cur = _curriculum(window=1, promote_reward=5.0)
    cur.record(PROBLEMS[0].id, [9.0])
    cur.record(PROBLEMS[0].id, [9.0])
    cur.record(PROBLEMS[1].id, [9.0])
    stats = cur.stats()
    assert stats["sqd/stage_0"] == len(PROBLEMS) - 2 and stats["sqd/stage_1"] == 1 and stats["sqd/stage_2"] == 1
    assert sum(stats[f"sqd/stage_{s}"] for s in range(6)) == len(PROBLEMS)
    assert stats["sqd/mean_stage"] == pytest.approx(3 / len(PROBLEMS))
    assert stats["sqd/promotions"] == 3 and stats["sqd/visits"] == 3


def test_problems_are_read_back_from_records(tmp_path: Path) -> None:
    path = tmp_path / "problems_train.jsonl"
    write_jsonl(path, [problem_record(p) for p in PROBLEMS])
    assert read_problems(path) == PROBLEMS
    rec = problem_record(PROBLEMS[0])
    lying = Record(rec.family, rec.prompt, rec.completion, rec.answer,
                   {**rec.metadata, "stage": (PROBLEMS[0].stage + 1) % 6}, rec.provenance)
    write_jsonl(path, [lying])
    with pytest.raises(DataError, match="permitted"):
        read_problems(path)
    write_jsonl(path, [rec, rec])
    with pytest.raises(DataError, match="twice"):
        read_problems(path)


def _at_stage(stage: int, **params: Any) -> SQDCurriculum:
    """A curriculum whose first problem was promoted to ``stage`` (threshold 5, window 1)."""
    cur = _curriculum(window=1, promote_reward=5.0, **params)
    for _ in range(stage):
        assert cur.record(PROBLEMS[0].id, [9.0])
    return cur


def test_replay_shows_earlier_stages_at_the_configured_share() -> None:
    cur = _at_stage(3, replay=0.4, max_stage=3)
    pid = PROBLEMS[0].id
    shown = []
    for _ in range(3000):
        shown.append(cur.visit_stage(pid))
        cur.record(pid, [1.0], shown[-1])
    share = sum(s < 3 for s in shown) / len(shown)
    assert share == pytest.approx(0.4, abs=0.04)
    earlier = [s for s in shown if s < 3]
    assert set(earlier) == {0, 1, 2} and all(abs(earlier.count(s) / len(earlier) - 1 / 3) < 0.05 for s in range(3))
    assert cur.replays == len(earlier) and cur.stats()["sqd/replays"] == len(earlier)
    assert cur.visits(pid) == len(shown) - len(earlier)  # only visits at the current stage count for promotion


def test_replay_off_shows_the_current_stage_and_never_goes_below_the_first_stage() -> None:
    plain = _at_stage(3, replay=0.0)
    assert {plain.visit_stage(PROBLEMS[0].id) for _ in range(50)} == {3}
    cur = _curriculum(replay=0.9, max_stage=0)
    for pid in cur.problem_ids:  # every problem at its first stage: nothing earlier to replay
        for _ in range(20):
            stage = cur.visit_stage(pid)
            assert stage == 0
            cur.record(pid, [-1.0], stage)
    started = _curriculum(replay=0.9, start_stage=None, max_stage=None)
    assert all(started.visit_stage(p.id) == p.stage for p in PROBLEMS)


def test_replayed_visits_leave_the_promotion_rule_alone() -> None:
    cur = _at_stage(2, replay=0.5)
    pid = PROBLEMS[0].id
    assert cur.record(pid, [1.0], 2) is False  # one visit at the current stage, below the threshold
    before = cur.history(pid)
    for stage in (0, 1, 0):
        assert cur.record(pid, [99.0], stage) is False  # far above the threshold, but at an earlier stage
    assert cur.stage(pid) == 2 and cur.history(pid) == before and cur.visits(pid) == 1
    assert cur.record(pid, [9.0], 2) is True  # the current stage's own visit promotes
    assert cur.replays == 3 and cur.stats()["sqd/visits"] == 2 + 5


def test_prompts_and_records_refuse_stages_not_reached() -> None:
    cur = _at_stage(2)
    pid = PROBLEMS[0].id
    assert cur.permitted(pid, 1) == frozenset(PROBLEMS[0].order[:1])
    assert _sections(cur.prompt(pid, 0))[0] == _sections(_curriculum().prompt(pid))[0]
    for bad in (3, -1, 5):
        with pytest.raises(ValueError, match="not one it has reached"):
            cur.prompt(pid, bad)
        with pytest.raises(ValueError, match="not one it has reached"):
            cur.record(pid, [1.0], bad)
    started = _curriculum(start_stage=None, max_stage=None)
    generated = next(p for p in PROBLEMS if p.stage > 0)
    with pytest.raises(ValueError, match="not one it has reached"):
        started.permitted(generated.id, generated.stage - 1)  # below its first stage
    assert cur.stats()["sqd/visits"] == 2


def test_version_2_states_load_with_no_replays() -> None:
    saved = _at_stage(2)
    state = saved.state_dict()
    state["version"] = 2
    del state["replays"], state["params"]["replay"]  # a version-2 state knows neither
    cur = _curriculum(window=1, promote_reward=5.0, replay=0.0)
    cur.load_state_dict(state)
    assert cur.stage(PROBLEMS[0].id) == 2 and cur.replays == 0
    with pytest.raises(ConfigError, match=r"sqd.replay: saved 0.0, this run 0.5"):
        _curriculum(window=1, promote_reward=5.0, replay=0.5).load_state_dict(state)  # it had no replays
    state["replays"] = state["visits"] + 1
    state["version"] = 3
    with pytest.raises(ConfigError, match="malformed"):
        cur.load_state_dict(state)


def test_visit_sizes_are_drawn_per_visit_uniformly_and_reproducibly() -> None:
    sizes = (192, 224, 256)
    cur = SQDCurriculum(PROBLEMS, SQDParams(), 4, sizes=(256, 192, 224, 192))  # order and repeats do not matter
    pid = PROBLEMS[0].id
    drawn = []
    for _ in range(3000):
        drawn.append(cur.visit_size(pid))
        cur.record(pid, [1.0])
    assert set(drawn) == set(sizes)
    assert all(abs(drawn.count(n) / len(drawn) - 1 / 3) < 0.04 for n in sizes)
    again = SQDCurriculum(PROBLEMS, SQDParams(), 4, sizes=sizes)
    replayed = []
    for _ in range(3000):
        replayed.append(again.visit_size(pid))
        again.record(pid, [1.0])
    assert replayed == drawn  # a function of the seed, the problem and the visits so far
    assert cur.visit_size(pid) == cur.visit_size(pid)  # asking twice before a visit draws nothing new


def test_a_visit_size_renders_the_prompt_and_the_problem_at_that_n() -> None:
    p = PROBLEMS[0]
    cur = SQDCurriculum(PROBLEMS, SQDParams(), 0, sizes=(999,))
    assert cur.visit_size(p.id) == 999
    assert cur.problem(p.id, n=999).n == 999 and cur.problem(p.id).n == p.n  # the problem keeps its own n
    assert "tune it for n = 999." in cur.prompt(p.id, 0, 999)[-1]["content"]
    assert f"tune it for n = {p.n}." in cur.prompt(p.id, 0)[-1]["content"]
    assert _curriculum().visit_size(p.id) == p.n  # no visit sizes: every visit asks for the problem's own n
    with pytest.raises(ValueError, match="not a positive integer"):
        cur.problem(p.id, n=0)
    with pytest.raises(KeyError, match="unknown problem id"):
        cur.visit_size("nope")
    for bad in ((0,), (256, -1), (True,)):
        with pytest.raises(ConfigError, match="positive integers"):
            SQDCurriculum(PROBLEMS, SQDParams(), 0, sizes=bad)


def test_a_state_resumes_only_under_the_same_visit_sizes(tmp_path: Path) -> None:
    saved = _curriculum(sizes=(192, 224))
    _drive(saved, 2, 0)
    saved.save(tmp_path / "sqd.json")
    _curriculum(sizes=(224, 192)).load(tmp_path / "sqd.json")
    for other in ((), (192, 256)):
        with pytest.raises(ConfigError, match="visit sizes"):
            _curriculum(sizes=other).load(tmp_path / "sqd.json")
    state = _curriculum().state_dict()
    del state["sizes"]  # a state written before visit sizes existed asked for each problem's own n
    _curriculum().load_state_dict(state)
    with pytest.raises(ConfigError, match="visit sizes"):
        _curriculum(sizes=(192,)).load_state_dict(state)
