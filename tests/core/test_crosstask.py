"""Cross-task views: normalised scores, performance profiles, probability-of-improvement matrices."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from iclrbench.core.result import RunResult
from iclrbench.core.task import ClaimResult
from iclrbench.leaderboard import crosstask
from iclrbench.leaderboard.aggregate import aggregate
from iclrbench.leaderboard.html import render_html
from iclrbench.testing import fake_run


def _run(task: str, algorithm: str, role: str, seed: int, regret: float) -> RunResult:
    return fake_run(task, algorithm, seed, {"regret": regret}, role=role, config={"d": 2}, wall_s=0.5)


def _tables(values: dict[str, dict[str, list[float]]]) -> list:
    runs = [
        _run(task, algo, "reference" if algo.startswith("ref") else "baseline", seed, v)
        for task, algos in values.items()
        for algo, vs in algos.items()
        for seed, v in enumerate(vs)
    ]
    return aggregate(runs)


def test_normalised_scores_put_the_best_at_one_and_the_worst_at_zero() -> None:
    # contextual-bilateral-trade's primary metric is regret: lower is better
    (table,) = _tables({"contextual-bilateral-trade": {"ref": [1, 1], "base": [3, 3], "mid": [2, 2]}})
    assert crosstask.normalised_scores(table) == {"ref": 1.0, "base": 0.0, "mid": 0.5}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=30))
def test_performance_profiles_are_monotone_fractions_reaching_one(scores: list[float]) -> None:
    profile = crosstask.performance_profile(scores)
    assert all(0 <= f <= 1 for f in profile)
    assert all(a <= b for a, b in itertools.pairwise(profile))
    assert profile[-1] == 1.0
    assert profile[0] == np.mean(np.asarray(scores) >= 1.0 - 1e-12)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(0, 100, allow_nan=False), min_size=1, max_size=8),
    st.lists(st.floats(0, 100, allow_nan=False), min_size=1, max_size=8),
)
def test_improvement_matrix_is_complementary(a: list[float], b: list[float]) -> None:
    (table,) = _tables({"contextual-bilateral-trade": {"ref": a, "base": b}})
    names, matrix = crosstask.improvement_matrix(table)
    assert len(names) == 2 and np.isnan(matrix[0, 0])
    assert abs(matrix[0, 1] + matrix[1, 0] - 1.0) < 1e-12


def test_summaries_shared_algorithms_and_families_across_tasks() -> None:
    tables = _tables(
        {
            "contextual-bilateral-trade": {"ref": [1, 2], "random": [5, 6]},
            "other-task": {"ref-b": [0.1, 0.2], "random": [0.3, 0.3], "base": [0.2, 0.2]},
        }
    )
    claims = [ClaimResult("contextual-bilateral-trade", "c1", "s", "reproduced", {}, "small")]
    summaries = {s.task: s for s in crosstask.task_summaries(tables, claims)}
    assert summaries["contextual-bilateral-trade"].leader == "ref"
    assert summaries["contextual-bilateral-trade"].claims_reproduced == 1
    assert summaries["other-task"].runs == 6 and summaries["other-task"].seconds == 3.0
    assert set(crosstask.shared_algorithms(tables)) == {"random"}
    families = crosstask.family_scores(tables)
    assert len(families["reference"]) == 2 and len(families["baseline"]) == 2
    page = render_html(tables, claims, {})
    assert "Algorithms shared between tasks" in page and 'id="overview"' in page
