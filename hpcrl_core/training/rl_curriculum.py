"""Which problems the ``rl_dgemm`` stage visits and how a visit is rendered: the curriculum over the first
``rl_dgemm.problems`` train problems, the sizes its visits draw (``rl_dgemm.visit_sizes``), and the dataset columns
of a problem rendered at a stage and size (``hpcrl_core/training/rl.py`` re-renders each row at generation time).

Test: ``pytest tests/training/test_rl.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from datasets import Dataset

from hpcrl_core.algorithms.sqd import SQDCurriculum, problems_from_records
from hpcrl_core.config import Params
from hpcrl_core.config.prepare import sizes_between
from hpcrl_core.data.dgemm.problems import problem_prompt
from hpcrl_core.data.schema import read_jsonl
from hpcrl_core.errors import DataError


def rendered_columns(curriculum: SQDCurriculum, pid: str, stage: int, n: int | None = None) -> dict[str, Any]:
    """The columns of a dataset row rendered at ``stage`` and size ``n`` (default: the problem's own): ``stage``,
    ``prompt``, ``permitted`` and ``n`` (the size the prompt asks for, at which the reward times the kernel)."""
    problem = curriculum.problem(pid, stage, n)
    return {"stage": stage, "prompt": problem_prompt(problem),
            "permitted": sorted(str(t) for t in problem.permitted), "n": problem.n}


def rl_dataset(curriculum: SQDCurriculum) -> Dataset:
    """One row per problem: ``problem_id``, its current ``stage``, prompt, permitted techniques and size ``n`` (the
    trainer re-renders them at generation time, so the rows only fix which problems exist)."""
    rows = [{"problem_id": pid, **rendered_columns(curriculum, pid, curriculum.stage(pid))}
            for pid in curriculum.problem_ids]
    return Dataset.from_list(rows)


def load_curriculum(params: Params, data_dir: Path) -> SQDCurriculum:
    """The curriculum over the first ``rl_dgemm.problems`` problems of ``data/dgemm/problems_train.jsonl``.

    Raises:
        DataError: the problems file is missing or empty.
    """
    path = data_dir / "dgemm" / "problems_train.jsonl"
    if not path.is_file():
        raise DataError(f"{path} is missing; run `dvc repro prepare` to create the DGEMM problems")
    records = [r for _, r in zip(range(params.rl_dgemm.problems), read_jsonl(path), strict=False)]
    if not records:
        raise DataError(f"{path} holds no problems")
    return SQDCurriculum(problems_from_records(records), params.rl_dgemm.sqd, seed=params.rl_dgemm.seed,
                         sizes=visit_sizes(params))


def visit_sizes(params: Params) -> tuple[int, ...]:
    """The sizes RL visits draw from (``rl_dgemm.visit_sizes``): ``train``, ``prepare.dgemm.train_sizes``; ``span``,
    every size from the smallest to the largest train size that no held-out problem asks for
    (``prepare.dgemm.eval_sizes``); ``problem``, none (each visit asks for its problem's own n)."""
    which, train = params.rl_dgemm.visit_sizes, params.prepare.dgemm.train_sizes
    if which == "train":
        return tuple(train)
    if which == "span":
        return sizes_between(min(train), max(train), params.prepare.dgemm.eval_sizes)
    return ()
