"""benchmarks/size_probe.py: the corpus kernel a plan names, the held-out problems that permit it, the same prompts
at the train sizes with nothing but n changed, one row per size; an unknown plan refused by name.

Run: pytest tests/test_size_probe_script.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.size_probe import HELD_OUT, at_sizes, main, plan_kernel, probe_problems, probe_rows
from hpcrl_core.algorithms.sqd import problems_from_records
from hpcrl_core.bench.result import BenchResult, Status
from hpcrl_core.data.dgemm.corpus import CODE_FENCE
from hpcrl_core.data.dgemm.problems import make_problems, problem_prompt, problem_record
from hpcrl_core.errors import ConfigError


def _corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    rows = [{"name": "0001:naive:ijk", "kind": "naive", "code": "c", "techniques": []},
            {"name": "0002:tile_vec:tile-vec8-intrin-4x8", "kind": "tile_vec", "code": "c",
             "techniques": ["register_blocking", "simd"]}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_plan_names_a_corpus_kernel_and_its_techniques(tmp_path: Path) -> None:
    opening, techniques = plan_kernel(_corpus(tmp_path), "tile-vec8-intrin-4x8")
    assert opening == CODE_FENCE + "// plan: tile_vec: tile-vec8-intrin-4x8\n"
    assert techniques == {"register_blocking", "simd"}
    with pytest.raises(ConfigError, match="'tile-vec8': no kernel"):
        plan_kernel(_corpus(tmp_path), "tile-vec8")  # a prefix of a name is no plan


def test_problems_are_the_held_out_ones_that_permit_the_kernel_rendered_again_with_only_n_changed() -> None:
    records = [problem_record(p) for p in make_problems("eval", 5, 40)]
    problems = problems_from_records(records)
    chosen = probe_problems(problems, frozenset({"register_blocking", "simd"}))
    assert chosen and len(chosen) < len(problems)
    assert all({"register_blocking", "simd"} <= {str(t) for t in p.permitted} for p in chosen)
    sized = at_sizes(chosen, (192, 224))
    assert list(sized) == [HELD_OUT, "192", "224"]
    by_id = {r.metadata["problem_id"]: r for r in records}
    assert all(problem_prompt(p) == by_id[p.id].prompt for p in sized[HELD_OUT])  # as asked: the record's prompt
    for p, q in zip(sized[HELD_OUT], sized["224"], strict=True):
        asked, moved = problem_prompt(p)[-1]["content"], problem_prompt(q)[-1]["content"]
        assert q.n == 224 and moved == asked.replace(f"tune it for n = {p.n}.", "tune it for n = 224.")


def test_one_row_per_size_with_the_verified_share_and_the_failures_by_status() -> None:
    ok = BenchResult(Status.OK, n=208, gflops=50.0)
    wrong = BenchResult(Status.WRONG_RESULT, n=208)
    rows = probe_rows("rl", {HELD_OUT: [[wrong, wrong], [ok, wrong]], "192": [[ok, ok]], "224": []})
    assert rows == [["rl", HELD_OUT, "4", "0.25", "wrong_result 3"], ["rl", "192", "2", "1.00", "-"],
                    ["rl", "224", "0", "-", "-"]]


def test_an_unknown_plan_is_refused_before_any_policy_is_loaded(tmp_path: Path) -> None:
    (tmp_path / "dgemm").mkdir()
    _corpus(tmp_path).rename(tmp_path / "dgemm" / "corpus.jsonl")
    with pytest.raises(SystemExit, match="'nope'.*no kernel"):
        main([str(tmp_path / "absent-policy"), "--plan", "nope", "--data", str(tmp_path)])


def test_a_size_below_one_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="--sizes.*>= 1.*\\[0, 256\\]"):
        main([str(tmp_path / "absent-policy"), "--sizes", "0", "256", "--data", str(tmp_path)])
