"""dp-hidden-state-audit through the runner: metrics, invariants, determinism, claim judges."""

from __future__ import annotations

import pytest

from iclrbench import runner
from iclrbench.benchmarks.dp_audit import judge_input, judge_k, judge_tight
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


def _runs(metrics: dict[str, float], **config: object) -> list[RunResult]:
    return fake_runs(
        TASK, "a", (0,), metrics, role="reference", config={"runs": 1000, **config}, budget="small"
    )


def test_claim_judges_can_say_no() -> None:
    tight = [
        _runs({"tightness": t, "epsilon_lower": 1.0}, epsilon_target=e)
        for t, e in ((0.8, 2), (0.6, 4), (0.9, 8))
    ]
    assert judge_tight(tight)[0] == "not_reproduced"
    few = [[r for r in g] for g in tight]
    for g in few:
        g[0].config["runs"] = 200
    assert judge_tight(few)[0] == "inconclusive"
    assert (
        judge_k(
            [_runs({"tightness": 0.5, "epsilon_lower": 2}), _runs({"tightness": 0.6, "epsilon_lower": 2})]
        )[0]
        == "not_reproduced"
    )
    groups = [_runs({"epsilon_lower": 1.0}), _runs({"epsilon_lower": 3.0}), _runs({"epsilon_lower": 2.0})]
    assert judge_input(groups)[0] == "not_reproduced"
