"""The promotion rule, plain Python: the same decisions as before it moved out of tracking.py, the policy from the
``registry`` section, and a report that cannot be compared is refused with what is wrong.

Run: pytest tests/evaluation/test_promotion.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcrl_core.config import Params, RegistryParams, load_params, parse_params
from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.evaluation.promotion import decide_promotion, read_eval_report, report_metrics

ROOT = Path(__file__).resolve().parents[2]
POLICY = load_params(ROOT / "params.yaml").registry


def flat(gflops: float, verified: float) -> dict[str, float]:
    return {"rl.gflops_median": gflops, "rl.verified_rate": verified}


@pytest.mark.parametrize(("challenger", "champion", "expected"), [
    ((5.0, 0.1), None, True),                 # no champion: the first version wins
    ((11.0, 0.80), (10.0, 0.80), True),       # faster, as correct
    ((11.0, 0.75), (10.0, 0.80), True),       # faster, verified rate down by exactly the slack
    ((11.0, 0.77), (10.0, 0.80), True),       # faster, verified rate down within the slack
    ((11.0, 0.74), (10.0, 0.80), False),      # faster, but too many more wrong kernels
    ((10.0, 0.95), (10.0, 0.80), False),      # as fast: not strictly better
    ((9.0, 1.00), (10.0, 0.80), False),       # slower, however correct
    ((10.001, 0.90), (10.0, 0.80), True),     # barely faster and more correct
])
def test_a_challenger_needs_higher_gflops_and_at_most_a_small_drop_in_verified_rate(
        challenger: tuple[float, float], champion: tuple[float, float] | None, expected: bool) -> None:
    decision = decide_promotion(flat(*challenger), flat(*champion) if champion else None, POLICY)
    assert decision.promote is expected
    assert decision.reason


def test_the_reason_names_what_decided() -> None:
    assert "no champion" in decide_promotion(flat(1.0, 0.1), None, POLICY).reason
    slower = decide_promotion(flat(9.0, 1.0), flat(10.0, 0.8), POLICY).reason
    assert "rl.gflops_median 9 is not above the champion's 10" in slower
    wrong = decide_promotion(flat(11.0, 0.7), flat(10.0, 0.8), POLICY).reason
    assert "rl.verified_rate 0.7 is more than 0.05 below the champion's 0.8" in wrong
    better = decide_promotion(flat(11.0, 0.78), flat(10.0, 0.8), POLICY).reason
    assert "beats the champion's 10" in better and "within 0.05" in better


def test_the_policy_comes_from_the_registry_section() -> None:
    assert POLICY == RegistryParams() == Params().registry  # params.yaml spells out the schema's defaults
    strict = POLICY.model_copy(update={"verified_slack": 0.0})
    assert not decide_promotion(flat(11.0, 0.79), flat(10.0, 0.8), strict).promote
    assert decide_promotion(flat(11.0, 0.79), flat(10.0, 0.8), POLICY).promote
    # another metric pair: the best kernel instead of the median one
    best = POLICY.model_copy(update={"metric": "rl.gflops_best"})
    challenger, champion = {**flat(9.0, 0.8), "rl.gflops_best": 30.0}, {**flat(10.0, 0.8), "rl.gflops_best": 20.0}
    assert decide_promotion(challenger, champion, best).promote
    assert not decide_promotion(challenger, champion, POLICY).promote


def test_a_side_without_the_metrics_is_refused() -> None:
    with pytest.raises(DataError, match="champion has no rl.gflops_median"):
        decide_promotion(flat(1.0, 1.0), {"rl.verified_rate": 0.5}, POLICY)
    with pytest.raises(DataError, match="challenger has no rl.verified_rate"):
        decide_promotion({"rl.gflops_median": 1.0}, flat(1.0, 1.0), POLICY)


@pytest.mark.parametrize(("registry", "needle"), [
    ({"verified_slack": 1.5}, "registry.verified_slack"),
    ({"metric": "gflops_median"}, "must be a report key as <block>.<key>"),
    ({"model_name": "my model"}, "registry.model_name"),
    ({"slack": 0.1}, "registry.slack: unknown key"),
])
def test_a_bad_policy_names_the_key(registry: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_params({"registry": registry})
    assert needle in str(err.value)


@pytest.mark.parametrize(("content", "message"), [
    (None, "does not exist"),
    ("{not json", "is not JSON"),
    (json.dumps({"sft": {}, "meta": {}}), "has no 'rl' block \\(found \\['meta', 'sft'\\]\\)"),
    (json.dumps([1, 2]), "has no 'rl' block \\(found list\\)"),
    (json.dumps({"rl": {"gflops_median": 3.0, "verified_rate": "high"}}), "lacks numeric rl.verified_rate"),
    (json.dumps({"rl": {"gflops_median": True, "verified_rate": 0.5}}), "lacks numeric rl.gflops_median"),
])
def test_read_eval_report_names_what_is_wrong(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "eval_dgemm.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(DataError, match=message):
        read_eval_report(path, POLICY)


def test_report_metrics_are_the_numbers_without_meta(tmp_path: Path) -> None:
    report = {"sft": {"verified_rate": 0.5}, "rl": {"gflops_median": 3, "verified_rate": 0.75, "note": "x",
                                                   "status_counts": {"ok": 3}, "flag": True}, "meta": {"n": 4}}
    (tmp_path / "r.json").write_text(json.dumps(report))
    assert read_eval_report(tmp_path / "r.json", POLICY) == report
    assert report_metrics(report) == {"sft.verified_rate": 0.5, "rl.gflops_median": 3.0, "rl.verified_rate": 0.75,
                                      "rl.status_counts.ok": 3.0}


def test_the_hargo_policy_promotes_on_winrate_alone() -> None:
    policy = load_params(ROOT / "params.yaml").registry_hargo
    assert policy.model_name == "hpcrl-hargo" and policy.verified_metric is None
    key = policy.metric
    assert decide_promotion({key: 0.61}, {key: 0.60}, policy).promote
    assert not decide_promotion({key: 0.60}, {key: 0.60}, policy).promote  # a tie keeps the champion
    assert not decide_promotion({key: 0.55, "rl.verified_rate": 1.0}, {key: 0.60}, policy).promote
    with pytest.raises(DataError, match=key.replace(".", r"\.")):
        decide_promotion({"other": 1.0}, {key: 0.5}, policy)
