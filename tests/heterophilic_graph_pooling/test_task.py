"""heterophilic-graph-pooling through the runner and the CLI: metrics of both problems, pool ratios and
algorithm-problem pairings it cannot run refused, and the claim judges on fake runs (each able to say yes,
no and don't know)."""

from __future__ import annotations

from pathlib import Path

import pytest

from iclrbench import runner
from iclrbench.benchmarks.heterophilic_graph_pooling import (
    POOLING_BASELINES,
    GraphPoolingTask,
    judge_grid,
    judge_gw,
    judge_multipartite,
)
from iclrbench.core.result import RunResult
from iclrbench.testing import fake_runs
from tests.conftest import Refused

TASK = "heterophilic-graph-pooling"
DECLARED = {m.name for m in GraphPoolingTask.metrics}


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICLRBENCH_CACHE", str(tmp_path / "cache"))


def test_maxcut_runs_report_the_declared_metrics() -> None:
    specs = runner.plan(TASK, ["exact", "random", "spectral"], [0], "smoke")
    results = {r.algorithm: r for r in map(runner.execute, specs)}
    for result in results.values():
        assert result.status == "ok", result.error
        assert set(result.metrics) == DECLARED and 0 <= result.metrics["score"] <= 1
    assert results["exact"].metrics["score"] == 1.0 and results["spectral"].metrics["score"] == 1.0
    assert results["exact"].metrics["parameters"] == 0


def test_classification_runs_report_the_declared_metrics() -> None:
    sets = {"problem": "classification", "graphs_per_class": 3}
    specs = runner.plan(TASK, ["maxcutpool", "topk", "diffpool", "no-pool"], [0], "smoke", sets)
    for result in map(runner.execute, specs):
        assert result.status == "ok", result.error
        m = result.metrics
        assert set(m) == DECLARED and 0 <= m["score"] <= 1 and m["parameters"] > 0
        if result.algorithm == "no-pool":
            assert m["nodes_kept"] == 1.0
        if result.algorithm in ("maxcutpool", "topk"):
            assert 0.5 <= m["nodes_kept"] < 0.6  # ceil(0.5 n) of n nodes
        assert result.curves["val_accuracy"]["x"] == [1.0, 2.0]


def test_same_seed_same_classification() -> None:
    sets = {"problem": "classification", "graphs_per_class": 3}
    spec = runner.plan(TASK, ["maxcutpool-e"], [1], "smoke", sets)[0]
    a, b = runner.execute(spec), runner.execute(spec)
    assert a.metrics["score"] == b.metrics["score"] and a.curves == b.curves


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["maxcutpool", "--set", "pool_ratio=0"], "pool_ratio"),
        (["maxcutpool", "--set", "pool_ratio=1.5"], "pool_ratio"),
        (["exact", "--set", "family=er"], "exact"),
        (["topk"], "problem=classification"),
        (["goemans-williamson", "--set", "problem=classification"], "problem=maxcut"),
    ],
)
def test_ratios_and_pairings_it_cannot_run_are_refused(
    refused: Refused, args: list[str], needle: str
) -> None:
    assert needle in refused("run", TASK, *args, "--budget", "smoke", "--quiet")


def _runs(algorithm: str, scores: list[float], seeds: tuple[int, ...] = (0, 1, 2)) -> list[RunResult]:
    runs = []
    for seed, score in zip(seeds, scores, strict=True):
        runs += fake_runs(TASK, algorithm, (seed,), {"score": score})
    return runs


def test_grid_judge() -> None:
    assert judge_grid([_runs("maxcutpool", [1.0, 0.99, 1.0])])[0] == "reproduced"
    assert judge_grid([_runs("maxcutpool", [0.9, 0.92, 0.91])])[0] == "not_reproduced"
    assert judge_grid([_runs("maxcutpool", [1.0, 0.9, 0.99])])[0] == "inconclusive"
    assert judge_grid([[]])[0] == "inconclusive"


def test_gw_judge_is_paired_and_reports_gset() -> None:
    gw = _runs("goemans-williamson", [0.80, 0.78, 0.82])
    close = _runs("maxcutpool", [0.795, 0.775, 0.815])
    verdict, measured = judge_gw([close, gw])
    assert verdict == "reproduced" and measured["er_100_0.1"]["ratio_to_gw_mean"] == pytest.approx(
        0.9938, 1e-3
    )
    assert judge_gw([_runs("maxcutpool", [0.7, 0.69, 0.71]), gw])[0] == "not_reproduced"
    verdict, measured = judge_gw([close, gw, _runs("maxcutpool", [0.6] * 3), _runs("gw", [0.62] * 3)])
    assert verdict == "reproduced" and measured["gset_800"]["ratio_to_gw_mean"] == pytest.approx(0.9677, 1e-3)
    assert judge_gw([[], []])[0] == "inconclusive"


def test_multipartite_judge_ranks_everyone() -> None:
    names = ("maxcutpool", "maxcutpool-e", *POOLING_BASELINES)
    best = [_runs(n, [0.9, 0.91, 0.92] if n == "maxcutpool" else [0.5, 0.52, 0.51]) for n in names]
    verdict, measured = judge_multipartite(best)
    assert verdict == "reproduced" and measured["ranking"][0][0] == "maxcutpool"
    worse = [_runs(n, [0.5, 0.52, 0.51] if n == "maxcutpool" else [0.9, 0.91, 0.92]) for n in names]
    verdict, measured = judge_multipartite(worse)
    assert verdict == "not_reproduced" and measured["ranking"][-1][0] == "maxcutpool"
    assert judge_multipartite([[] for _ in names])[0] == "inconclusive"
