"""The rl_dgemm trainer: GRPOConfig from params, passthrough checks, and a real (tiny) GRPO run whose rewards come
from the benchmark engine, whose prompts follow SQD, and whose checkpoints carry the curriculum and the archive
across a resume.

Run: ``.venv/bin/python -m pytest tests/training/test_rl.py -q``.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from pathlib import Path
from typing import Any

import pytest

from hpcrl_core.algorithms.archive import QDArchive
from hpcrl_core.algorithms.exploration import plan_prefix
from hpcrl_core.algorithms.sqd import SQDCurriculum
from hpcrl_core.bench.result import BenchResult, Status
from hpcrl_core.config import Params, Settings, SQDParams, parse_params
from hpcrl_core.data.dgemm.corpus import CODE_FENCE
from hpcrl_core.data.dgemm.problems import make_problems, problem_record
from hpcrl_core.data.schema import write_jsonl
from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.models.tiny import build_tiny_model
from hpcrl_core.models.tokenizer import save_tokenizer
from hpcrl_core.training.rl import (
    ARCHIVE,
    SQD_STATE,
    Rollouts,
    check_trl_options,
    grpo_config,
    run_rl,
)
from hpcrl_core.training.rl_curriculum import rl_dataset, visit_sizes
from tests.conftest import FAST_BENCH
from tests.models import TINY, sample_tokenizer


def rl_params(**rl: Any) -> Params:
    defaults: dict[str, Any] = {"max_steps": 2, "per_device_train_batch_size": 2, "num_generations": 2,
                                "max_completion_length": 16, "save_steps": 1, "problems": 2,
                                "learning_rate": 1e-3, "sqd": {"window": 1, "start_stage": 0},
                                "plan_vocabulary": "none"}  # rl_inputs writes no corpus to hold plans to
    return parse_params({"bench": FAST_BENCH, "reward": {"mode": "gflops"}, "rl_dgemm": {**defaults, **rl}})


def test_config_from_params_and_passthrough(tmp_path: Path) -> None:
    cfg = grpo_config(rl_params(beta=1.5, trl={"epsilon_high": 0.28}).rl_dgemm, tmp_path, [])
    assert cfg.num_generations == 2 and cfg.beta == 1.5 and cfg.loss_type == "dapo" and cfg.epsilon_high == 0.28
    with pytest.raises(ConfigError) as err:
        check_trl_options({"num_generation": 4, "beta": 0.1})
    msg = str(err.value)
    assert "rl_dgemm.trl.num_generation" in msg and "did you mean num_generations" in msg
    assert "rl_dgemm.trl.beta: owned by the rl_dgemm stage; set it through rl_dgemm.beta" in msg
    with pytest.raises(ConfigError, match="loss_type"):
        grpo_config(rl_params(loss_type="nonsense").rl_dgemm, tmp_path, [])


def test_scale_rewards_is_ours_and_reaches_grpo(tmp_path: Path) -> None:
    assert grpo_config(rl_params().rl_dgemm, tmp_path, []).scale_rewards == "none"  # the default (docs/experiments.md)
    assert grpo_config(rl_params(scale_rewards="group").rl_dgemm, tmp_path, []).scale_rewards == "group"
    with pytest.raises(ConfigError, match="rl_dgemm.scale_rewards"):
        parse_params({"rl_dgemm": {"scale_rewards": "std"}})
    with pytest.raises(ConfigError, match="set it through rl_dgemm.scale_rewards"):
        check_trl_options({"scale_rewards": "batch"})


def test_loss_types_are_the_ones_trl_documents() -> None:
    from trl import GRPOConfig

    from hpcrl_core.training.rl import LOSS_TYPES

    field = next(f for f in dataclasses.fields(GRPOConfig) if f.name == "loss_type")
    supported = str(field.metadata["help"]).split("Supported values are", 1)[1].split(".", 1)[0]
    documented = set(re.findall(r"'([a-z_]+)'", supported))
    assert set(LOSS_TYPES) == documented


def rl_inputs(root: Path, problems: int = 4) -> tuple[Path, Path]:
    """``problems`` train problems under ``root/data`` and an untrained tiny policy as the SFT model (it writes no
    kernel, so every completion is a format violation: rewards are known without compiling anything)."""
    data = root / "data"
    write_jsonl(data / "dgemm" / "problems_train.jsonl",
                [problem_record(p, "train", 0) for p in make_problems("train", 0, problems)])
    sft = root / "sft" / "final"
    build_tiny_model(TINY, sample_tokenizer(), seed=3).save_pretrained(str(sft))
    save_tokenizer(sample_tokenizer(), sft)
    return data, sft


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path]:
    return rl_inputs(tmp_path)


@pytest.mark.integration
def test_grpo_run_saves_and_resumes_curriculum_and_archive(setup: tuple[Path, Path], tmp_path: Path,
                                                           bench_dirs: Settings) -> None:
    data, sft = setup
    out = tmp_path / "rl"
    first = run_rl(rl_params(), data, sft, out, report_to=[], settings=bench_dirs)
    assert first["global_step"] == 2 and first["resumed_from"] is None
    state = json.loads((out / "checkpoint-2" / SQD_STATE).read_text())
    assert (out / "checkpoint-2" / ARCHIVE).is_file() and (out / "checkpoint-2" / "trainer_state.json").is_file()
    # a random model writes no kernel: every completion is penalised, each problem was visited once, none promoted
    assert first["sqd/promotions"] == 0 and first["sqd/stage_0"] == 2
    history = json.loads((out / "final" / "log_history.json").read_text())
    assert any("reward/status/format_violation" in e for e in history)
    assert (out / "final" / "qd_archive.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert state  # the curriculum state is saved with the checkpoint
    same = run_rl(rl_params(), data, sft, out, report_to=[], settings=bench_dirs)
    assert same["global_step"] == 2 and not (out / "checkpoint-3").exists()  # finished: not resumed
    assert same["sqd/stage_0"] == 2 and same["promotions"] == 0

    second = run_rl(rl_params(max_steps=4), data, sft, out, report_to=[], settings=bench_dirs)
    assert second["resumed_from"] == str(out / "checkpoint-2") and second["global_step"] == 4
    # Each problem now has its second visit with the same mean reward: the plateau rule (window 1) promotes both,
    # which only happens if the first run's visits came back with the checkpoint.
    assert second["sqd/promotions"] == 2 and second["sqd/stage_1"] == 2


def test_missing_problems_or_sft_model_fail_before_training(setup: tuple[Path, Path], tmp_path: Path,
                                                            bench_dirs: Settings) -> None:
    data, sft = setup
    with pytest.raises(DataError, match="problems_train.jsonl"):
        run_rl(rl_params(), tmp_path / "nodata", sft, tmp_path / "out", report_to=[], settings=bench_dirs)
    with pytest.raises(ConfigError, match="sft_dir"):
        run_rl(rl_params(), data, tmp_path / "nosft", tmp_path / "out", report_to=[], settings=bench_dirs)
    with pytest.raises(ConfigError, match="nope"):
        run_rl(rl_params(rewards=["nope"]), data, sft, tmp_path / "out", report_to=[], settings=bench_dirs)


def test_trl_hooks_we_override_still_exist() -> None:
    """SQDGRPOTrainer overrides or calls these GRPOTrainer members; a TRL upgrade that drops one must fail here."""
    from trl import GRPOTrainer

    for name in ("_generate_and_score_completions", "_generate_single_turn", "_save_checkpoint", "_log_metric",
                 "_get_output_dir"):
        assert callable(getattr(GRPOTrainer, name, None)), name
    # and writes its step statistics into this instance attribute, set in GRPOTrainer.__init__
    assert "self._metrics = {" in inspect.getsource(GRPOTrainer.__init__)


def test_rollouts_record_each_group_at_the_stage_it_was_shown() -> None:
    problems = make_problems("train", 0, 2)
    cur = SQDCurriculum(problems, SQDParams(window=1, promote_reward=50.0, replay=0.5), seed=0)
    pid, other = problems[0].id, problems[1].id
    for _ in range(2):
        assert cur.record(pid, [60.0])  # promoted to stage 2 by the threshold
    rollouts = Rollouts(cur, QDArchive(cur.problem_ids), step=7)
    ok = BenchResult(Status.OK, n=32, gflops=3.0, techniques=())
    # one step: a replay of `pid` at stage 0 (rewards above the threshold) and `other` at its current stage 0
    rollouts(["a", "b", "c", "d"], [ok] * 4, [80.0, 80.0, 1.0, 1.0],
             {"problem_id": [pid, pid, other, other], "stage": [0, 0, 0, 0], "permitted": [[], [], [], []]})
    assert cur.stage(pid) == 2 and cur.replays == 1 and not rollouts.promotions  # a replay never promotes
    assert cur.visits(other) == 1
    elite = rollouts.archive.niche(pid, [])
    assert elite is not None and elite.stage == 0 and elite.step == 7  # the stage the kernel was written at
    rollouts(["e", "f"], [ok] * 2, [70.0, 70.0], {"problem_id": [pid, pid], "stage": [2, 2], "permitted": [[], []]})
    assert rollouts.promotions == [(7, pid, 3)]


def test_rollouts_count_distinct_completions_per_group() -> None:
    problems = make_problems("train", 0, 2)
    cur = SQDCurriculum(problems, SQDParams(), seed=0)
    rollouts = Rollouts(cur, QDArchive(cur.problem_ids))
    assert rollouts.stats() == {}
    bad = BenchResult(Status.COMPILE_ERROR, n=32)
    a, b = problems[0].id, problems[1].id
    # group a: the same kernel four times (layout and comments aside); group b: three different kernels in four
    rollouts(["k1", "k1 ", "// plan: a\nk1", "\nk1 /* tile */"] + ["x", "y", "z", "x"], [bad] * 8, [0.0] * 8,
             {"problem_id": [a] * 4 + [b] * 4, "stage": [0] * 8, "permitted": [[]] * 8})
    stats = rollouts.stats()
    assert stats["rollouts/distinct_per_group"] == 2.0  # (1 + 3) / 2
    assert stats["rollouts/distinct_share"] == (1 / 4 + 3 / 4) / 2
    rollouts(["p", "q"], [bad] * 2, [0.0] * 2, {"problem_id": [a, a], "stage": [0, 0], "permitted": [[], []]})
    assert rollouts.stats() == {"rollouts/distinct_per_group": 2.0, "rollouts/distinct_share": 1.0,
                                "rollouts/elites": 0.0}  # the last batch


def test_dataset_rows_carry_the_current_stage_and_the_size_the_prompt_asks_for() -> None:
    problems = make_problems("train", 0, 3, (48, 80))
    cur = SQDCurriculum(problems, SQDParams(start_stage=None, max_stage=None), seed=0)
    rows = rl_dataset(cur).to_list()
    assert [r["stage"] for r in rows] == [cur.stage(r["problem_id"]) for r in rows]
    assert all(r["permitted"] == sorted(str(t) for t in cur.permitted(r["problem_id"])) for r in rows)
    by_id = {p.id: p for p in problems}
    assert [r["n"] for r in rows] == [by_id[r["problem_id"]].n for r in rows]  # the reward times the kernel there
    assert all(f"tune it for n = {r['n']}." in r["prompt"][-1]["content"] for r in rows)


ELITE = ("// plan: naive\n```c\nvoid dgemm(int n, const double *A, const double *B, double *C) {\n"
         "  for (int i = 0; i < n; i++)\n    for (int j = 0; j < n; j++) {\n      double s = 0.0;\n"
         "      for (int k = 0; k < n; k++) s += A[i * n + k] * B[k * n + j];\n      C[i * n + j] = s;\n    }\n}\n```")


def test_rollouts_record_each_visits_fastest_own_kernel_that_counts() -> None:
    problems = make_problems("train", 0, 2)
    cur = SQDCurriculum(problems, SQDParams(window=1), seed=0)
    a, b = (p.id for p in problems)
    rollouts = Rollouts(cur, QDArchive(cur.problem_ids), step=2)
    fast = BenchResult(Status.OK, n=32, gflops=30.0, techniques=())
    slow = BenchResult(Status.OK, n=32, gflops=5.0, techniques=())
    forbidden = BenchResult(Status.OK, n=32, gflops=50.0, techniques=("openmp",))
    failed = BenchResult(Status.COMPILE_ERROR, n=32)
    rollouts.injected = frozenset({1})
    # problem a: the replayed elite (row 1) and a kernel using a forbidden technique do not count; b verified none
    rollouts(["s", "elite", "omp", "x", "y"], [slow, fast, forbidden, failed, failed], [1.0, 9.0, 0.0, -1.0, -1.0],
             {"problem_id": [a, a, a, b, b], "stage": [0] * 5, "permitted": [[]] * 5})
    assert (rollouts.archive.last_visit(a), rollouts.archive.last_visit(b)) == (5.0, 0.0)


def _one_novelty_step(setup: tuple[Path, Path], tmp_path: Path, bench_dirs: Settings, fence_given: bool,
                      plan_novelty: float = 1.0, names: tuple[str, ...] = ("n",),
                      **rl: Any) -> tuple[list[str], Any]:
    """One GRPO step of two groups of two at stage 0 with plan novelty on every visit (a naive corpus, one kernel per
    parameter name): the completions the reward saw, in row order, and the run."""
    from hpcrl_core.training.rl import build_rl_trainer

    data, sft = setup
    (data / "dgemm" / "corpus.jsonl").write_text("".join(json.dumps(
        {"name": f"000{i}:naive:{name}", "kind": "naive", "code": "c", "techniques": []}) + "\n"
        for i, name in enumerate(names)))
    params = rl_params(max_steps=1, per_device_train_batch_size=4, num_generations=2, plan_novelty=plan_novelty,
                       fence_given=fence_given, max_completion_length=40, **rl)
    run = build_rl_trainer(params, data, sft, tmp_path / "rl", report_to=[], settings=bench_dirs)
    seen: list[str] = []
    observer = run.reward_funcs[0].ctx.observer
    run.reward_funcs[0].ctx = dataclasses.replace(
        run.reward_funcs[0].ctx, observer=lambda texts, *a: (seen.extend(texts), observer(texts, *a)))
    try:
        run.trainer.train()
    finally:
        run.close()
    return seen, run


@pytest.mark.integration
def test_a_training_step_generates_forced_rows_after_their_plan_opening(setup: tuple[Path, Path], tmp_path: Path,
                                                                        bench_dirs: Settings) -> None:
    seen, run = _one_novelty_step(setup, tmp_path, bench_dirs, fence_given=False)
    # two groups of two at stage 0 (nothing permitted): the first row of each opens with the only kind allowed
    opening = plan_prefix("naive")  # the code fence, then the plan line, as SFT completions open
    assert len(seen) == 4 and seen[0].startswith(opening) and seen[2].startswith(opening)
    assert not seen[1].startswith(opening) and not seen[3].startswith(opening)
    history = run.trainer.state.log_history
    # logged with the step that generated them (not held for the next step's flush)
    assert [e["rollouts/novel_plans"] for e in history if "rollouts/novel_plans" in e] == [2.0]


@pytest.mark.integration
def test_a_given_fence_opens_every_row_and_a_forced_plan_keeps_its_own_opening(
        setup: tuple[Path, Path], tmp_path: Path, bench_dirs: Settings) -> None:
    seen, _ = _one_novelty_step(setup, tmp_path, bench_dirs, fence_given=True)
    assert len(seen) == 4 and all(text.startswith(CODE_FENCE) for text in seen)
    # the first row of each group opens with its forced plan; the fence was not given a second time before it
    assert seen[0].startswith(plan_prefix("naive")) and seen[2].startswith(plan_prefix("naive"))


@pytest.mark.integration
@pytest.mark.parametrize("novelty", [0.0, 1.0])
def test_a_plan_vocabulary_holds_every_row_to_a_corpus_plan_line(setup: tuple[Path, Path], tmp_path: Path,
                                                                 bench_dirs: Settings, novelty: float) -> None:
    names = ("naive-ijk", "naive-kji-t")
    openings = [f"{CODE_FENCE}// plan: naive: {name}\n" for name in names]
    seen, _ = _one_novelty_step(setup, tmp_path, bench_dirs, fence_given=True, plan_novelty=novelty, names=names,
                                plan_vocabulary="corpus")
    # the untrained policy writes noise (the fence test above), here every row's plan line is a corpus kernel's,
    # forced plan openings included
    assert len(seen) == 4 and all(any(text.startswith(o) for o in openings) for text in seen)


def test_plan_novelty_is_refused_where_it_cannot_act(setup: tuple[Path, Path], tmp_path: Path) -> None:
    from hpcrl_core.training.rl import novelty_needs

    data, _ = setup
    params = rl_params(plan_novelty=0.5)
    with pytest.raises(DataError, match="corpus.jsonl is missing"):
        novelty_needs(params, data, use_vllm=False)
    with pytest.raises(ConfigError, match="rl_dgemm.plan_novelty needs generation by transformers"):
        novelty_needs(params, data, use_vllm=True)
    no_plan = params.model_copy(update={"prepare": params.prepare.model_copy(update={
        "dgemm": params.prepare.dgemm.model_copy(update={"plan_line": False})})})
    with pytest.raises(ConfigError, match="plan_line: true and plan_permitted: false"):
        novelty_needs(no_plan, data, use_vllm=False)
    assert novelty_needs(rl_params(), data, use_vllm=False) == {}  # off: the corpus is not even read
    with pytest.raises(ConfigError, match="rl_dgemm.fence_given needs generation by transformers.*fence_given: false"):
        novelty_needs(rl_params(fence_given=True), data, use_vllm=True)
    with pytest.raises(ConfigError, match="rl_dgemm.plan_vocabulary needs generation by transformers"):
        novelty_needs(rl_params(fence_given=False, plan_vocabulary="fields"), data, use_vllm=True)


def test_rollouts_leave_replayed_elites_out_of_promotion_archive_and_distinct_counts() -> None:
    problems = make_problems("train", 0, 1)
    cur = SQDCurriculum(problems, SQDParams(window=1, promote_reward=50.0), seed=0)
    pid = problems[0].id
    rollouts = Rollouts(cur, QDArchive(cur.problem_ids), step=4)
    ok = BenchResult(Status.OK, n=32, gflops=30.0, techniques=())
    slow = BenchResult(Status.OK, n=32, gflops=1.0, techniques=())
    rollouts.injected = frozenset({2})
    # the elite's reward (90) would promote the problem if counted: the samples' mean (10) does not
    rollouts(["a", "b", "elite"], [slow, slow, ok], [10.0, 10.0, 90.0],
             {"problem_id": [pid] * 3, "stage": [0] * 3, "permitted": [[]] * 3})
    assert cur.stage(pid) == 0 and not rollouts.promotions
    assert rollouts.archive.best(pid).code in ("a", "b")  # type: ignore[union-attr]
    assert rollouts.stats()["rollouts/distinct_per_group"] == 2.0 and rollouts.stats()["rollouts/elites"] == 1.0
    assert rollouts.injected == frozenset()  # one batch only
    rollouts(["c"], [ok], [90.0], {"problem_id": [pid], "stage": [0], "permitted": [[]]})
    assert cur.stage(pid) == 1 and rollouts.stats()["rollouts/elites"] == 0.0


def test_a_trainer_that_refuses_stops_the_executor_it_started(setup: tuple[Path, Path], tmp_path: Path,
                                                              bench_dirs: Settings,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import hpcrl_core.training.rl as rl

    started: list[Any] = []

    class Backend:
        closed = False

        def close(self) -> None:
            self.closed = True

    def backend(*args: Any, **kwargs: Any) -> Backend:
        started.append(Backend())
        return started[-1]

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise ConfigError("refused")

    monkeypatch.setattr(rl, "bench_backend", backend)
    monkeypatch.setattr(rl, "SQDGRPOTrainer", refuse)
    data, sft = setup
    with pytest.raises(ConfigError, match="refused"):
        rl.build_rl_trainer(rl_params(), data, sft, tmp_path / "rl", report_to=[], settings=bench_dirs)
    assert len(started) == 1 and started[0].closed
    # a refusal before the executor (the plan vocabulary without a corpus to read) starts none
    with pytest.raises(DataError, match="corpus"):
        rl.build_rl_trainer(rl_params(plan_vocabulary="corpus"), data, sft, tmp_path / "rl", report_to=[],
                            settings=bench_dirs)
    assert len(started) == 1


@pytest.mark.integration
def test_a_training_step_scores_and_trains_on_the_replayed_elite(setup: tuple[Path, Path], tmp_path: Path,
                                                                 bench_dirs: Settings) -> None:
    from hpcrl_core.training.rl import build_rl_trainer

    data, sft = setup
    params = rl_params(max_steps=1, per_device_train_batch_size=4, num_generations=2, elite_replay=1.0,
                       max_completion_length=200)
    run = build_rl_trainer(params, data, sft, tmp_path / "rl", report_to=[], settings=bench_dirs)
    try:
        for pid in run.rollouts.curriculum.problem_ids:
            run.rollouts.archive.add(pid, [], 1.0, ELITE, step=0, stage=0)
        run.trainer.train()
    finally:
        run.close()
    stats = run.reward_funcs[0].last_stats
    # two groups of two: the untrained policy writes no kernel, each group's second row is the naive elite, timed
    assert stats.outcomes.count("ok") == 2 and stats.outcomes.count("format_violation") == 2
    assert run.rollouts.stats()["rollouts/elites"] == 2.0
    assert all(e.code == ELITE for e in run.rollouts.archive.niches())  # the elite did not re-enter as a sample
    assert run.rollouts.curriculum.stats()["sqd/visits"] == 2.0  # visits count the samples' rewards only


@pytest.mark.integration
@pytest.mark.parametrize("visit_sizes", ["train", "problem"])
def test_each_visit_asks_for_and_is_timed_at_the_size_it_drew(setup: tuple[Path, Path], tmp_path: Path,
                                                              bench_dirs: Settings, visit_sizes: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from trl import GRPOTrainer

    from hpcrl_core.training.rl import build_rl_trainer

    data, sft = setup
    params = parse_params({"bench": FAST_BENCH, "reward": {"mode": "gflops"},
                           "prepare": {"dgemm": {"train_sizes": [40, 56, 72]}},
                           "rl_dgemm": {**rl_params().rl_dgemm.model_dump(mode="json"), "max_steps": 4,
                                        "visit_sizes": visit_sizes}})
    run = build_rl_trainer(params, data, sft, tmp_path / "rl", report_to=[], settings=bench_dirs)
    asked: list[tuple[str, int, str]] = []  # per row generated: problem, n, the prompt's text
    timed: list[int] = []  # per completion scored: the n the reward timed it at
    generate = GRPOTrainer._generate_and_score_completions

    def spy(self: Any, inputs: list[dict[str, Any]]) -> Any:
        asked.extend((x["problem_id"], x["n"], x["prompt"][-1]["content"]) for x in inputs)
        return generate(self, inputs)

    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", spy)
    observer = run.reward_funcs[0].ctx.observer
    run.reward_funcs[0].ctx = dataclasses.replace(
        run.reward_funcs[0].ctx, observer=lambda texts, results, rewards, columns: (
            timed.extend(columns["n"]), observer(texts, results, rewards, columns)))
    try:
        run.trainer.train()
    finally:
        run.close()
    own = {p.id: p.n for p in make_problems("train", 0, 4)}
    assert len(asked) == 8 and [n for _, n, _ in asked] == timed
    assert all(f"tune it for n = {n}." in prompt for _, n, prompt in asked)
    if visit_sizes == "problem":
        assert all(n == own[pid] for pid, n, _ in asked)
    else:  # four visits of one group each: sizes drawn from the train sizes, the same for a whole group
        assert {n for n in timed} <= {40, 56, 72} and len(set(timed)) > 1
        assert all(timed[i] == timed[i + 1] for i in range(0, 8, 2))


def test_visit_sizes_are_the_train_sizes_their_span_less_the_held_out_ones_or_none() -> None:
    params = parse_params({"prepare": {"dgemm": {"train_sizes": [40, 48, 56], "eval_sizes": [44, 52, 60]}},
                           "rl_dgemm": {"visit_sizes": "train"}})
    assert visit_sizes(params) == (40, 48, 56)
    span = params.model_copy(update={"rl_dgemm": params.rl_dgemm.model_copy(update={"visit_sizes": "span"})})
    assert visit_sizes(span) == (40, 41, 42, 43, 45, 46, 47, 48, 49, 50, 51, 53, 54, 55, 56)  # no held-out size
    own = params.model_copy(update={"rl_dgemm": params.rl_dgemm.model_copy(update={"visit_sizes": "problem"})})
    assert visit_sizes(own) == ()
    with pytest.raises(ConfigError, match="visit_sizes"):
        parse_params({"rl_dgemm": {"visit_sizes": "all"}})
