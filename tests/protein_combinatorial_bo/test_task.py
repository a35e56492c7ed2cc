"""protein-combinatorial-bo through the runner: metrics, invariants, bad algorithms, claim judges."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from iclrbench import runner
from iclrbench.algorithms.protein_combinatorial_bo import SequenceOptimizer
from iclrbench.benchmarks.protein_combinatorial_bo import (
    batch_diversity,
    judge_beats_random_and_local,
    judge_matches_exhaustive,
)
from iclrbench.core.result import RunResult
from iclrbench.testing import fake_runs

TASK = "protein-combinatorial-bo"


def test_runs_report_complete_metrics_and_monotone_curves() -> None:
    specs = runner.plan(TASK, ["gameopt-ibr", "random-search"], [0], "smoke")
    for result in (runner.execute(s) for s in specs):
        assert result.status == "ok", result.error
        m = result.metrics
        assert 0 <= m["best_fitness"] <= 1 and m["simple_regret"] >= 0
        assert m["simple_regret"] == pytest.approx(1.0 - m["best_fitness"])
        curve = result.curves["best_fitness"]["y"]
        assert len(curve) == 4 and all(b >= a for a, b in itertools.pairwise(curve))
        assert curve[-1] == m["best_fitness"]


def test_same_seed_same_result() -> None:
    spec = runner.plan(TASK, ["gameopt-ibr"], [1], "smoke")[0]
    a, b = runner.execute(spec), runner.execute(spec)
    assert a.metrics["best_fitness"] == b.metrics["best_fitness"] and a.curves == b.curves


def test_an_algorithm_that_asks_for_nonsense_fails_with_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from iclrbench.baselines.protein_combinatorial_bo import RandomSearch

    monkeypatch.setattr(RandomSearch, "ask", lambda self, n: np.full((n, 4), 25))
    result = runner.execute(runner.plan(TASK, ["random-search"], [0], "smoke")[0])
    assert result.status == "failed" and "letters must lie in 0..19" in result.error


def test_batch_diversity() -> None:
    assert batch_diversity(np.zeros((3, 4), dtype=int)) == 0.0
    assert batch_diversity(np.array([[0, 0], [1, 1]])) == 1.0


def _runs(algorithm: str, best: float, evals: float) -> list[RunResult]:
    metrics = {"best_fitness": best, "acquisition_evaluations": evals}
    return fake_runs(
        TASK, algorithm, (0, 1), metrics, role="reference", config={"rounds": 10, "batch_size": 8}
    )


def test_claim_judges_can_say_no() -> None:
    assert judge_matches_exhaustive([_runs("g", 0.96, 1000), _runs("e", 1.0, 160000)])[0] == "reproduced"
    assert judge_matches_exhaustive([_runs("g", 0.5, 1000), _runs("e", 1.0, 160000)])[0] == "not_reproduced"
    assert judge_matches_exhaustive([_runs("g", 1.0, 5000), _runs("e", 1.0, 160000)])[0] == "not_reproduced"
    groups = [_runs("g", 0.5, 1), _runs("r", 0.6, 0), _runs("l", 0.1, 1)]
    assert judge_beats_random_and_local(groups)[0] == "not_reproduced"
    assert judge_beats_random_and_local([[], *groups[1:]])[0] == "inconclusive"


def test_protocol_is_enforced() -> None:
    assert issubclass(runner.catalog.get_algorithm(TASK, "gameopt-hedge"), SequenceOptimizer)


def test_claim_judges_decide_on_paired_intervals() -> None:
    """Seeds whose landscapes differ in difficulty: pairing by seed removes that, and a mean difference
    within the seeds' noise is inconclusive rather than a win."""
    seeds = (0, 1, 2, 3, 4)
    level = {s: 0.2 * s for s in seeds}  # per-seed difficulty shared by every algorithm

    def group(algorithm: str, shift: dict[int, float]) -> list[RunResult]:
        return [
            fake_runs(
                TASK,
                algorithm,
                (s,),
                {"best_fitness": level[s] + shift[s]},
                config={"rounds": 10, "batch_size": 8},
            )[0]
            for s in seeds
        ]

    gameopt = group("g", dict.fromkeys(seeds, 0.1))
    clear = [
        gameopt,
        group("r", dict.fromkeys(seeds, 0.0)),
        group("l", {0: 0.01, 1: 0.0, 2: 0.02, 3: 0.0, 4: 0.01}),
    ]
    verdict, measured = judge_beats_random_and_local(clear)
    assert verdict == "reproduced", measured
    assert "paired" in measured["gameopt_minus_random"]["method"]
    noisy = [gameopt, group("r", {0: 0.3, 1: -0.2, 2: 0.1, 3: -0.1, 4: 0.2}), clear[2]]
    assert judge_beats_random_and_local(noisy)[0] == "inconclusive"
    for judge in (judge_matches_exhaustive, judge_beats_random_and_local):
        assert judge([[], [], []])[0] == "inconclusive" and judge([])[0] == "inconclusive"
