"""Tests of params.yaml validation and `hpcrl config check`. Run: pytest tests/test_config.py"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from hpcrl_core.cli import main
from hpcrl_core.config import Params, load_params, parse_params
from hpcrl_core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def test_shipped_params_are_valid_and_match_the_ladder() -> None:
    p = load_params(ROOT / "params.yaml")
    assert p.reward.format_violation == -100 and p.reward.compile_error == -40 and p.reward.timeout == -30
    assert p.reward.runtime_error == -20 and p.reward.wrong_result == -10
    assert p.bench.cflags == ("-O3", "-march=native", "-fopenmp")


def test_unknown_key_names_path_value_and_allowed_keys() -> None:
    with pytest.raises(ConfigError) as err:
        parse_params({"bench": {"timing": {"min_rep": 3}}})
    msg = str(err.value)
    assert "bench.timing.min_rep" in msg and "min_reps" in msg and "3" in msg


def test_every_problem_is_listed_at_once() -> None:
    with pytest.raises(ConfigError) as err:
        parse_params({"bench": {"n": -5, "compiler": ""}, "reward": {"mode": "fast"}, "extra": 1})
    problems = err.value.problems
    joined = "\n".join(problems)
    assert len(problems) == 4
    for path in ("bench.n", "bench.compiler", "reward.mode", "extra"):
        assert path in joined
    assert "'fast'" in joined and "gflops" in joined  # received value and what is allowed


def test_cross_field_rule_and_flag_screen() -> None:
    with pytest.raises(ConfigError, match="max_reps"):
        parse_params({"bench": {"timing": {"min_reps": 10, "max_reps": 5}}})
    with pytest.raises(ConfigError, match="cflags"):
        parse_params({"bench": {"cflags": ["-O2", "-lcblas"]}})


def test_params_are_frozen() -> None:
    p = Params()
    with pytest.raises(ValidationError):
        p.bench.n = 3  # type: ignore[misc]


def test_config_check_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("bench:\n  n: 256\n")
    assert main(["config", "check", str(good)]) == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("bench:\n  n: big\n  flagz: 1\nreward:\n  timeout: -30\n")
    assert main(["config", "check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "bench.n" in err and "'big'" in err and "bench.flagz" in err
    assert main(["config", "check", str(tmp_path / "missing.yaml")]) == 1
    broken = tmp_path / "broken.yaml"
    broken.write_text("bench: [1, 2\n")
    assert main(["config", "check", str(broken)]) == 1
    assert "not valid YAML" in capsys.readouterr().err


@pytest.mark.parametrize(("rl", "needle"), [
    ({"per_device_train_batch_size": 12, "num_generations": 8}, "multiple of num_generations"),
    ({"rewards": []}, "rl_dgemm.rewards"),
    ({"sqd": {"start_stage": 4, "max_stage": 2}}, "start_stage (4) must be <= max_stage (2)"),
    ({"sqd": {"windows": 4}}, "rl_dgemm.sqd.windows: unknown key"),
    ({"elite_replay_behind": 0.9}, "set elite_replay > 0"),  # a rescue rule with no visit ever drawn for it
    ({"elite_replay": 0.5, "elite_replay_behind": 1.5}, "rl_dgemm.elite_replay_behind"),
])
def test_rl_dgemm_rules_name_the_key(rl: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_params({"rl_dgemm": rl})
    assert needle in str(err.value)
