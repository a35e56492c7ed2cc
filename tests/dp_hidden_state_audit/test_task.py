"""dp-hidden-state-audit through the runner: metrics, invariants, determinism, claim judges."""

from __future__ import annotations

import pytest

from iclrbench import runner
from iclrbench.benchmarks.dp_hidden_state_audit import judge_input, judge_k, judge_tight
from iclrbench.core.result import RunResult
from iclrbench.testing import fake_runs

TASK = "dp-hidden-state-audit"


def test_audits_report_bounds_that_respect_the_accountant() -> None:
    specs = runner.plan(
        TASK, ["gc-r", "gc-s", "input-canary", "gc-single-step"], [0], "smoke", {"insertions": "50"}
    )
    results = {r.algorithm: r for r in (runner.execute(s) for s in specs)}
    for r in results.values():
        assert r.status == "ok", r.error
        m = r.metrics
        assert 0 <= m["epsilon_lower"] <= m["epsilon_upper"] + 1e-9 and 0 <= m["tightness"] <= 1 + 1e-9
        assert m["runs"] == 400
    assert results["gc-r"].metrics["epsilon_upper"] == pytest.approx(4.0, rel=1e-6)
    assert results["gc-single-step"].metrics["epsilon_upper"] < 1.0  # one insertion only


def test_same_seed_same_audit() -> None:
    spec = runner.plan(TASK, ["gc-r"], [2], "smoke", {"insertions": "30"})[0]
    assert runner.execute(spec).metrics["epsilon_lower"] == runner.execute(spec).metrics["epsilon_lower"]


def _runs(metrics: dict[str, float], spread: float = 0.02, **config: object) -> list[RunResult]:
    """Three audits (seeds 0-2) whose metrics spread by +-``spread`` around ``metrics``."""
    runs = fake_runs(
        TASK, "a", (0, 1, 2), metrics, role="reference", config={"runs": 1000, **config}, budget="small"
    )
    for run, shift in zip(runs, (-spread, 0.0, spread), strict=True):
        run.metrics.update({k: v + shift for k, v in metrics.items()})
    return runs


def test_claim_judges_can_say_no() -> None:
    tight = [
        _runs({"tightness": t, "epsilon_lower": 1.0}, epsilon_target=e)
        for t, e in ((0.8, 2), (0.6, 4), (0.9, 8))
    ]
    verdict, measured = judge_tight(tight)
    assert verdict == "not_reproduced"
    assert measured["tightness_eps_4"]["verdict"] == "not_reproduced"
    assert measured["tightness_eps_2"]["verdict"] == "reproduced"
    few = [[r for r in g] for g in tight]
    for g in few:
        for r in g:
            r.config["runs"] = 200
    assert judge_tight(few)[0] == "inconclusive"
    assert (
        judge_k(
            [_runs({"tightness": 0.5, "epsilon_lower": 2}), _runs({"tightness": 0.6, "epsilon_lower": 2})]
        )[0]
        == "not_reproduced"
    )
    groups = [_runs({"epsilon_lower": 1.0}), _runs({"epsilon_lower": 3.0}), _runs({"epsilon_lower": 2.0})]
    assert judge_input(groups)[0] == "not_reproduced"


def test_claim_judges_say_yes_only_on_clear_evidence() -> None:
    assert judge_k([_runs({"tightness": 0.7}), _runs({"tightness": 0.4})])[0] == "reproduced"
    # a difference within the seeds' noise decides nothing
    assert judge_k([_runs({"tightness": 0.5}, spread=0.2), _runs({"tightness": 0.45}, spread=-0.2)])[0] == (
        "inconclusive"
    )
    groups = [_runs({"epsilon_lower": 3.0}), _runs({"epsilon_lower": 2.5}), _runs({"epsilon_lower": 1.0})]
    verdict, measured = judge_input(groups)
    assert verdict == "reproduced"
    assert measured["gc_r_minus_input"]["seeds"] == 3 and "paired" in measured["gc_r_minus_input"]["method"]


@pytest.mark.parametrize("judge", [judge_tight, judge_k, judge_input])
def test_empty_groups_are_inconclusive(judge) -> None:  # type: ignore[no-untyped-def]
    assert judge([[], [], []])[0] == "inconclusive"
    assert judge([])[0] == "inconclusive"
