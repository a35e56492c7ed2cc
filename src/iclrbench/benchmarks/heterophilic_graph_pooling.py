"""heterophilic-graph-pooling: Abate & Bianchi, "MaxCutPool: differentiable feature-aware Maxcut for pooling
in graph neural networks", ICLR 2025 (arXiv:2409.05100).

Two problems behind the config key ``problem``:

- ``maxcut``: every algorithm cuts the same seeded attributed graph (grid, ring, Erdos-Renyi, d-regular,
  planted bipartite, Gset-like); the score is the fraction of the edge weight cut.
- ``classification``: heterophilic graph classification (Multipartite, or a disassortative SBM set) by one
  classifier whose pooling layer is the algorithm; the score is the test accuracy, mean over the folds
  of stratified cross-validation.

Every run reports the same metrics whichever the problem, so that both keep the task contract:
``score`` (primary: cut fraction, or mean test accuracy), ``nodes_kept`` (the share of nodes on the
positive side of the cut, or left after pooling), ``parameters`` and ``seconds``. The ratio to
Goemans-Williamson is a claim figure (paired by seed, from the two algorithms' runs on the same graphs).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from iclrbench.core.algorithm import Algorithm
from iclrbench.core.decision import combine, compare_runs, empty, mean_figure, metric_values, threshold
from iclrbench.core.result import RunResult
from iclrbench.core.task import (
    Budget,
    Claim,
    Curve,
    Metric,
    Outcome,
    Paper,
    Requirement,
    Resources,
    RunRequest,
    Task,
    Verdict,
    mean_of_ok_runs,
    ok_runs,
)
from iclrbench.envs.heterophilic_graph_pooling import TASK_ID, GraphPoolingConfig, cut_fraction, maxcut_graph
from iclrbench.models.torch_threads import one_torch_thread

GRID = {"problem": "maxcut", "family": "grid", "grid_rows": 8, "grid_cols": 12}
ER = {"problem": "maxcut", "family": "er", "nodes": 100, "edge_prob": 0.1}
GSET = {"problem": "maxcut", "family": "gset", "nodes": 800, "gset_density": 0.06}
MULTIPARTITE = {"problem": "classification", "dataset": "multipartite"}
#: the pooling layers MaxCutPool is compared with on Multipartite: the paper's list as far as it runs here
#: (Graclus needs compiled extensions), and no pooling
POOLING_BASELINES = (
    "topk",
    "sagpool",
    "asapool",
    "edgepool",
    "kmis",
    "ndp",
    "diffpool",
    "mincutpool",
    "dmon",
    "no-pool",
)
#: the variant the claims are judged on: the paper's main tables report "MaxCutPool"; MaxCutPool-E (the
#: public pooler config's default, ``expressive: true``) is reported beside it
JUDGED = "maxcutpool"
SHOWN = "maxcutpool-e"
#: curves are kept to at most this many points
CURVE_POINTS = 100
#: "the classifier learned": the best arm's mean accuracy exceeds chance by this, on its interval
LEARNED_MARGIN = 0.1


def _seeds(budget: str) -> tuple[int, ...]:
    return GraphPoolingTask.claim_seeds(budget)


def grid_requests(budget: str) -> list[RunRequest]:
    return [RunRequest(JUDGED, GRID, _seeds(budget))]


def judge_grid(groups: list[list[RunResult]]) -> tuple[Verdict, dict[str, Any]]:
    """MaxCutPool's mean cut fraction on the 8 x 12 grid >= 0.98 (the interval of the mean over seeds);
    each seed's cut reported, with how many trainings ended at or below half the edges (a ScoreNet whose
    ReLU layers died gives a constant score: no cut)."""
    runs = ok_runs(groups[0]) if groups else []
    if not runs:
        return empty("no successful maxcutpool runs on the grid")
    values = metric_values(runs, "score")
    evidence = threshold(list(values.values()), ">=", 0.98, quantity="maxcutpool cut fraction")
    per_seed = {str(seed): round(v, 4) for seed, v in sorted(values.items())}
    collapsed = sum(v <= 0.5 for v in values.values())
    return combine({"cut fraction": evidence}, cut_per_seed=per_seed, at_or_below_half=collapsed)


def gw_requests(budget: str) -> list[RunRequest]:
    seeds = _seeds(budget)
    out = [
        RunRequest(JUDGED, ER, seeds),
        RunRequest("goemans-williamson-paper", ER, seeds),
        RunRequest("goemans-williamson", ER, seeds),
    ]
    if budget == "paper":  # reported beside the verdict: GW on 800 nodes takes minutes a seed
        out += [
            RunRequest(JUDGED, GSET, seeds),
            RunRequest("goemans-williamson-paper", GSET, seeds),
            RunRequest("goemans-williamson", GSET, seeds),
        ]
    return out


def _ratios(mcp: list[RunResult], gw: list[RunResult]) -> dict[str, Any]:
    a, b = metric_values(mcp, "score"), metric_values(gw, "score")
    shared = sorted(a.keys() & b.keys())
    ratios = [a[s] / b[s] for s in shared if b[s] > 0]
    return {
        "maxcutpool_cut_fraction": mean_figure(mcp, "score") if a else None,
        "gw_cut_fraction": mean_figure(gw, "score") if b else None,
        "ratio_per_seed": [round(r, 4) for r in ratios],
        "ratio_mean": round(float(np.mean(ratios)), 4) if ratios else None,
    }


def judge_gw(groups: list[list[RunResult]]) -> tuple[Verdict, dict[str, Any]]:
    """On ER(100, 0.1), MaxCutPool's cut >= 0.98 x the paper's GW's (one hyperplane, ``GW.py``), paired by
    seed (the same graph). Reported beside it: the ratios to the best of 100 roundings, and the Gset-like
    figures where they were run."""
    groups = [ok_runs(g) for g in groups]
    if len(groups) < 2 or not groups[0] or not groups[1]:
        return empty("no successful runs of maxcutpool and goemans-williamson-paper on ER(100, 0.1)")
    mcp, paper = groups[0], groups[1]
    evidence = compare_runs(mcp, paper, "score", ">=", 0.0, scale_b=0.98, quantity="maxcutpool - 0.98 gw")
    extra: dict[str, Any] = {"er_100_0.1_vs_paper_gw": _ratios(mcp, paper)}
    if len(groups) >= 3 and groups[2]:
        best = compare_runs(mcp, groups[2], "score", ">=", 0.0, scale_b=0.98, quantity="mcp - 0.98 gw-best")
        extra["er_100_0.1_vs_gw_best_of_100"] = {**_ratios(mcp, groups[2]), "within_2pct": best.as_dict()}
    if len(groups) >= 6 and groups[3] and groups[4]:
        extra["gset_800_vs_paper_gw"] = _ratios(groups[3], groups[4])
        if groups[5]:
            extra["gset_800_vs_gw_best_of_100"] = _ratios(groups[3], groups[5])
    return combine({"within 2% of the paper's GW on ER(100, 0.1)": evidence}, **extra)


def multipartite_requests(budget: str) -> list[RunRequest]:
    names = (JUDGED, SHOWN, *POOLING_BASELINES)
    return [RunRequest(name, MULTIPARTITE, _seeds(budget)) for name in names]


def judge_multipartite(groups: list[list[RunResult]]) -> tuple[Verdict, dict[str, Any]]:
    """MaxCutPool's mean test accuracy exceeds every pooling baseline's and no pooling's, each paired by
    seed (the same folds). Reported either way: the ranking, MaxCutPool-E's comparisons, and whether the
    classifier learned at all (the best accuracy against chance, 1 / classes)."""
    names = (JUDGED, SHOWN, *POOLING_BASELINES)
    runs = {name: ok_runs(g) for name, g in zip(names, groups, strict=False)}
    if not runs.get(JUDGED):
        return empty("no successful maxcutpool runs on Multipartite")
    ranking = sorted(
        ((name, mean_of_ok_runs(r, "score")) for name, r in runs.items() if r),
        key=lambda item: -item[1],
    )
    parts = {
        f"{JUDGED} > {name}": compare_runs(runs[JUDGED], runs.get(name, []), "score", ">", 0.0)
        for name in POOLING_BASELINES
    }
    shown = {
        f"{SHOWN} > {name}": compare_runs(runs[SHOWN], runs.get(name, []), "score", ">", 0.0).verdict
        for name in POOLING_BASELINES
        if runs.get(SHOWN)
    }
    chance = 1.0 / int(runs[JUDGED][0].config.get("parts", 10))
    figures = {
        "ranking": [[name, round(acc, 4)] for name, acc in ranking],
        "chance": round(chance, 4),
        "expressive_variant": shown,
    }
    # a ranking of classifiers that learned nothing says nothing (design, "a task is done" 12): the best
    # arm must clear chance by LEARNED_MARGIN on its interval before the comparisons are a verdict
    best = ranking[0][0]
    learned = threshold(
        list(metric_values(runs[best], "score").values()), ">", chance + LEARNED_MARGIN, quantity=best
    )
    if learned.verdict != "reproduced":
        verdict, measured = combine(parts, **figures)
        measured["learned"] = learned.as_dict()
        reason = f"the classifier did not learn: the best arm ({best}) is not clearly above chance"
        return "inconclusive", {**measured, "reason": reason, "verdict_if_judged": verdict}
    return combine(parts, learned=learned.as_dict(), **figures)


class GraphPoolingTask(Task):
    id = TASK_ID
    version = 2
    paper = Paper(
        title="MaxCutPool: differentiable feature-aware Maxcut for pooling in graph neural networks",
        authors="Carlo Abate, Filippo Maria Bianchi",
        arxiv="2409.05100",
    )
    summary = (
        "MAXCUT on attributed graphs (MaxCutPool trained on its cut loss vs Goemans-Williamson as the paper "
        "rounds it and at its best of 100 roundings, NDP, spectral, greedy) and heterophilic graph "
        "classification on Multipartite with MaxCutPool vs TopK, SAGPool, ASAPool, EdgePool, k-MIS, NDP, "
        "DiffPool, MinCutPool, DMoN and no pooling. Departures from the paper and its code that remain: "
        "(1) no GPU and one CPU thread; the small budget trains the classifiers for about 200 steps where "
        "the paper takes ~10^5, so nothing learns there, nor with fewer or smaller graphs up to 11,000 "
        "steps (no pooling clears chance at ~25,000: 0.23-0.26; docs), and the Multipartite claim is "
        "inconclusive by design at small (the paper budget is the paper's protocol, its cost per fold "
        "measured in the docs); "
        "(2) claims over seeded generated graphs, 3 seeds at small: ER graphs and Gset-like graphs made "
        "by rudy's recipe, not the paper's one ER draw and the Gset files; "
        "(3) the SDP is solved by SCS (1e-6 for the paper's rounding, whose 1e-6 eigenvalue cut needs it) "
        "where the paper's code uses CVXOPT, not installed here; "
        "(4) NDP's eigenvector by a dense eigh, not ARPACK; k-MIS written here (PyG 2.8 has no "
        "KMISPooling); MaxCutPool on plain torch (no torch_scatter / torch_sparse); "
        "(5) Graclus is not offered: it needs PyG's compiled extensions (pyg-lib or torch_cluster); "
        "(6) DMoN's orthogonality loss weighs 1, as the public forward computes it (its yaml says 0); "
        "(7) training loops are the suite's, not Lightning's, with the same early stopping and "
        "checkpoint rules; folds stratified by class (the public code: shuffled KFold, then a random "
        "85/15 train/validation split)."
    )
    Config = GraphPoolingConfig
    budgets = {  # noqa: RUF012  (read-only class data, as in Task)
        "smoke": Budget(
            "smoke",
            {
                "cut_epochs": 100,
                "cut_patience": 50,
                "graphs_per_class": 6,
                "folds": 2,
                "folds_run": 1,
                "epochs": 2,
                "patience": 2,
            },
            "seconds per run: 100 cut epochs; classification on 60 graphs, 1 fold of 2, 2 epochs",
            claim_seeds=(0, 1),
        ),
        "small": Budget(
            "small",
            {
                "cut_epochs": 2000,
                "cut_patience": 500,
                "graphs_per_class": 20,
                "folds": 5,
                "folds_run": 1,
                "epochs": 40,
                "patience": 15,
            },
            "maxcut: the paper's 2,000 cut epochs (patience 500), 30 s to 2 min a MaxCutPool run on 2 busy "
            "cores, GW under a second at 100 nodes; classification: 200 graphs, 1 fold of 5, 40 epochs "
            "(~200 Adam steps at lr 1e-4: no layer learns), 10 s (TopK) to minutes (ASAPool, EdgePool) a "
            "run. No classifier setting that learns fits here: no pooling on 1,000 graphs for 2,000 steps "
            "(train accuracy 0.11), on 100 graphs for 2,400 (memorises, train 0.46, validation 0.0), on "
            "500 graphs of 1-5-node parts for 11,000 (train 0.35, test 0.10-0.16) and on 2,000 of them "
            "for 8,600 (train 0.19, test 0.10-0.12), MaxCutPool on the 500 for 4,950 (test 0.09), each "
            "2-4 min; no pooling first clears chance at ~25,000 steps (test 0.23-0.26, 8.5 min a run), "
            "where MaxCutPool reaches 0.54 on the same seed and fold (9 min; one run, not a verdict). "
            "bench claims -j 2 from an empty store: 16.2 min of wall (15.5 CPU-minutes) on 2 "
            "cores shared with other work at load ~5; EdgePool and ASAPool are nearly half of it",
            claim_seeds=(0, 1, 2),
            claims_minutes=16.2,
        ),
        "paper": Budget(
            "paper",
            {},
            "the paper's scale: up to 2,000 cut epochs, Gset-like graphs beside ER; Multipartite's 5,000 "
            "graphs, 10-fold CV, up to 1,000 epochs at lr 1e-4 per fold: measured on one busy CPU thread, "
            "an epoch of a fold takes 60 s with MaxCutPool (30 s with no pooling), a fold up to 17 h (8 h); "
            "1,200 fold trainings for the claim: not run here, on CPU or GPU",
            claim_seeds=tuple(range(10)),
        ),
    }
    metrics = (
        Metric("score", True, "", "maxcut: fraction of the edge weight cut; classification: test accuracy"),
        Metric(
            "nodes_kept", False, "", "share of nodes on the cut's + side, or left after pooling (informative)"
        ),
        Metric("parameters", False, "", "trainable parameters (0 for combinatorial solvers)"),
        Metric("seconds", False, "s", "wall-clock seconds of the solve, or of training and testing"),
    )
    protocol = (
        "maxcut: MaxCutSolver.solve(graph) -> +-1 per node; classification: Pooler.build(in, ratio, k) -> "
        "a pooling module in the task's classifier"
    )
    requires = Requirement("graphs", ("torch", "torch_geometric", "cvxpy", "clarabel"))
    algorithm_modules = (
        "iclrbench.algorithms.heterophilic_graph_pooling",
        "iclrbench.baselines.heterophilic_graph_pooling",
    )
    demo_settings = ({}, {"family": "er"}, {"problem": "classification"})
    claims = (
        Claim(
            "maxcutpool-cuts-the-grid",
            "Trained on its cut loss alone (the public MAXCUT ScoreNet: 32 HetMP layers of width 4, an MLP "
            "of 8 x 4), MaxCutPool cuts at least 98% of the edges of the bipartite 8 x 12 grid (whose "
            "maximum cut is every edge).",
            grid_requests,
            judge_grid,
            version=2,
            expected="inconclusive",
        ),
        Claim(
            "maxcutpool-within-2pct-of-gw",
            "MaxCutPool's cut is within 2% of Goemans-Williamson's on ER(100, 0.1), GW rounded as the "
            "paper's code rounds it (one hyperplane); the ratio to the best of 100 roundings is reported "
            "beside it (and Gset-like 800-node graphs at the paper budget).",
            gw_requests,
            judge_gw,
            version=2,
            expected="inconclusive",
        ),
        Claim(
            "maxcutpool-best-on-multipartite",
            "MaxCutPool is more accurate on Multipartite than every other pooling layer that runs here "
            "(TopK, SAGPool, ASAPool, EdgePool, k-MIS, NDP, DiffPool, MinCutPool, DMoN) and than no "
            "pooling; MaxCutPool-E reported beside it.",
            multipartite_requests,
            judge_multipartite,
            version=2,
            expected="inconclusive",
        ),
    )

    def resources(self, config: GraphPoolingConfig) -> Resources:
        if config.problem == "maxcut":
            return Resources(memory_gb=max(0.5, 3e-8 * config.nodes**2 * 100))
        return Resources(memory_gb=1.0 + config.graphs_per_class * config.parts * 2e-4)

    def prepare(self, config: GraphPoolingConfig) -> None:
        """Generate and cache the classification data set once, before parallel runs read it."""
        if config.problem == "classification":
            from iclrbench.envs.heterophilic_graph_pooling import heterophilic_dataset

            with one_torch_thread():
                heterophilic_dataset(config)

    def evaluate(self, algorithm: Algorithm, config: GraphPoolingConfig, seed: int) -> Outcome:
        with one_torch_thread():
            if config.problem == "maxcut":
                return self._maxcut(algorithm, config, seed)
            return self._classify(algorithm, config, seed)

    def _maxcut(self, algorithm: Algorithm, config: GraphPoolingConfig, seed: int) -> Outcome:
        from iclrbench.algorithms.heterophilic_graph_pooling import MaxCutSolver

        if not isinstance(algorithm, MaxCutSolver):
            raise TypeError(f"{type(algorithm).__name__} does not implement MaxCutSolver.solve")
        graph = maxcut_graph(config, seed)
        start = time.perf_counter()
        signs = np.asarray(algorithm.solve(graph))
        seconds = time.perf_counter() - start
        if signs.shape != (graph.n,) or not np.isin(signs, (-1, 1)).all():
            raise ValueError(f"a cut must give +1 or -1 to each of the {graph.n} nodes")
        metrics = {
            "score": cut_fraction(graph, signs),
            "nodes_kept": float(np.mean(signs > 0)),
            "parameters": float(getattr(algorithm, "parameters", 0)),
            "seconds": seconds,
        }
        curves = {}
        losses = getattr(algorithm, "losses", None)
        if losses:  # the cut loss per epoch, padded with its last value after early stopping
            padded = np.array(losses + [losses[-1]] * (config.cut_epochs - len(losses)))
            at = np.unique(
                np.linspace(0, config.cut_epochs - 1, min(CURVE_POINTS, config.cut_epochs)).astype(int)
            )
            curves["cut_loss"] = Curve(
                [float(i + 1) for i in at], [float(padded[i]) for i in at], "epoch", "z^T A z / vol"
            )
        notes = f"{graph.name}: {graph.n} nodes, {graph.m} edges, cut {metrics['score']:.4f}"
        bound = getattr(algorithm, "bound", None)
        if bound is not None:
            notes += f"; SDP bound {bound / graph.weights.sum():.4f} of the edge weight"
        return Outcome(metrics=metrics, curves=curves, notes=notes)

    def _classify(self, algorithm: Algorithm, config: GraphPoolingConfig, seed: int) -> Outcome:
        from iclrbench.algorithms.heterophilic_graph_pooling import Pooler
        from iclrbench.algorithms.heterophilic_graph_pooling.classify import cross_validate

        if not isinstance(algorithm, Pooler):
            raise TypeError(f"{type(algorithm).__name__} does not implement Pooler.build")
        metrics, fold_curves = cross_validate(algorithm, config, seed)
        curves = {}
        if fold_curves and fold_curves[0]:  # validation accuracy of the first fold, padded after stopping
            first = fold_curves[0] + [fold_curves[0][-1]] * (config.epochs - len(fold_curves[0]))
            at = np.unique(np.linspace(0, config.epochs - 1, min(CURVE_POINTS, config.epochs)).astype(int))
            curves["val_accuracy"] = Curve(
                [float(i + 1) for i in at], [float(first[i]) for i in at], "epoch", "validation accuracy"
            )
        return Outcome(
            metrics=metrics,
            curves=curves,
            notes=(
                f"{config.dataset}: {config.folds_run} of {config.folds} folds, "
                f"accuracy {metrics['score']:.4f}"
            ),
        )
