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
    verdict, measured = judge_grid([_runs("maxcutpool", [1.0, 0.99, 1.0])])
    assert verdict == "reproduced" and measured["at_or_below_half"] == 0
    verdict, measured = judge_grid([_runs("maxcutpool", [1.0, 0.0, 0.0])])  # two trainings collapsed
    assert verdict == "inconclusive" and measured["at_or_below_half"] == 2  # 3 seeds spread too wide
    assert measured["cut_per_seed"] == {"0": 1.0, "1": 0.0, "2": 0.0}
    assert judge_grid([_runs("maxcutpool", [0.9, 0.92, 0.91])])[0] == "not_reproduced"
    assert judge_grid([_runs("maxcutpool", [1.0, 0.9, 0.99])])[0] == "inconclusive"
    assert judge_grid([[]])[0] == "inconclusive"


def test_grid_judge_fed_random_cuts_reports_no_effect() -> None:
    """Negative control: the judge fed real runs of random signs on the grid (through the runner)."""
    specs = runner.plan(TASK, ["random"], [0, 1, 2], "smoke", {"family": "grid"})
    control = [runner.execute(spec) for spec in specs]
    assert all(r.status == "ok" for r in control)
    assert judge_grid([control])[0] == "not_reproduced"


def test_gw_judge_is_paired_on_the_papers_gw_and_reports_the_best_of_100() -> None:
    paper = _runs("goemans-williamson-paper", [0.70, 0.68, 0.72])
    best = _runs("goemans-williamson", [0.74, 0.73, 0.75])
    close = _runs("maxcutpool", [0.695, 0.675, 0.715])
    verdict, measured = judge_gw([close, paper, best])
    assert verdict == "reproduced"
    assert measured["er_100_0.1_vs_paper_gw"]["ratio_mean"] == pytest.approx(0.9929, 1e-3)
    against_best = measured["er_100_0.1_vs_gw_best_of_100"]
    assert against_best["ratio_mean"] == pytest.approx(0.9391, 1e-3)
    assert against_best["within_2pct"]["verdict"] == "not_reproduced"  # reported, not the verdict
    assert judge_gw([_runs("maxcutpool", [0.6, 0.59, 0.61]), paper, best])[0] == "not_reproduced"
    gset = [_runs("maxcutpool", [0.6] * 3), _runs("gw", [0.62] * 3), _runs("gwb", [0.63] * 3)]
    verdict, measured = judge_gw([close, paper, best, *gset])
    assert measured["gset_800_vs_paper_gw"]["ratio_mean"] == pytest.approx(0.9677, 1e-3)
    assert judge_gw([[], []])[0] == "inconclusive"


def test_gw_judge_fed_random_cuts_reports_no_effect() -> None:
    """Negative control: real runs of random signs in MaxCutPool's place against the paper's GW on
    ER(100, 0.1)."""
    sets = {"family": "er"}
    control = [runner.execute(s) for s in runner.plan(TASK, ["random"], [0, 1, 2], "smoke", sets)]
    gw = [
        runner.execute(s) for s in runner.plan(TASK, ["goemans-williamson-paper"], [0, 1, 2], "smoke", sets)
    ]
    assert all(r.status == "ok" for r in control + gw), [r.error for r in control + gw]
    assert judge_gw([control, gw])[0] == "not_reproduced"


NAMES = ("maxcutpool", "maxcutpool-e", *POOLING_BASELINES)


def test_multipartite_judge_ranks_everyone() -> None:
    best = [_runs(n, [0.9, 0.91, 0.92] if n == "maxcutpool" else [0.5, 0.52, 0.51]) for n in NAMES]
    verdict, measured = judge_multipartite(best)
    assert verdict == "reproduced" and measured["ranking"][0][0] == "maxcutpool"
    assert measured["chance"] == 0.1 and "maxcutpool-e > dmon" in measured["expressive_variant"]
    worse = [_runs(n, [0.5, 0.52, 0.51] if n == "maxcutpool" else [0.9, 0.91, 0.92]) for n in NAMES]
    verdict, measured = judge_multipartite(worse)
    assert verdict == "not_reproduced" and measured["ranking"][-1][0] == "maxcutpool"
    assert judge_multipartite([[] for _ in NAMES])[0] == "inconclusive"


def test_multipartite_judge_does_not_rank_classifiers_that_learned_nothing() -> None:
    """Every arm at chance (1 / 10), MaxCutPool by luck ahead: inconclusive, with the reason and the
    verdict the comparisons alone would have given."""
    noise = [_runs(n, [0.14, 0.15, 0.16] if n == "maxcutpool" else [0.1, 0.08, 0.09]) for n in NAMES]
    verdict, measured = judge_multipartite(noise)
    assert verdict == "inconclusive" and "did not learn" in measured["reason"]
    assert measured["verdict_if_judged"] == "reproduced" and measured["learned"]["verdict"] != "reproduced"


def test_multipartite_judge_fed_a_baseline_as_maxcutpool_reports_no_effect() -> None:
    """Negative control: MaxCutPool's runs replaced by a copy of no pooling's (the method ablated to no
    pooling layer at all), the baselines as measured: no effect is reported."""
    scores = {n: [0.5 + 0.01 * i, 0.52 + 0.01 * i, 0.51 + 0.01 * i] for i, n in enumerate(NAMES)}
    groups = [_runs(n, scores["no-pool"] if n == "maxcutpool" else scores[n]) for n in NAMES]
    assert judge_multipartite(groups)[0] != "reproduced"
