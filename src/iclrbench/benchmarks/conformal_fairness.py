"""conformal-fairness: Vadlamani, Srinivasan, Maneriker, Payani, Parthasarathy, "A generic framework for
conformal fairness", ICLR 2025 (arXiv:2505.16115).

One run = one base model fitted on one split seed (:mod:`iclrbench.envs.conformal_fairness`), its held-out
pool resplit ``resplits`` times into calibration and test halves (stratified by group and label; the same
resplits for every predictor of a seed, so comparisons are paired). Each predictor
(:mod:`iclrbench.algorithms.conformal_fairness`) calibrates on each calibration half; its sets are measured
on the test half, and the run reports means over resplits.

Metrics: ``fairness_violation`` (primary;
:func:`iclrbench.algorithms.conformal_fairness.conformal.fairness_violation`), ``satisfied_fraction``
(resplits whose violation meets the target c), ``coverage`` (marginal), ``worst_group_coverage``,
``set_size``, ``min_threshold_minus_qhat`` (the smallest threshold any test label was held to, minus split
CP's ``q_hat`` on the same calibration half, over resplits; -1 where ``q_hat`` is infinite and a threshold is
not), ``infeasible_fraction`` (resplits where no candidate met the target), ``base_accuracy``, ``seconds``.
"""

from __future__ import annotations

import math
import time
from typing import Any, ClassVar

import numpy as np

from iclrbench.algorithms.conformal_fairness import conformal as cp
from iclrbench.core.algorithm import Algorithm
from iclrbench.core.decision import Evidence, combine, empty, mean_figure, threshold
from iclrbench.core.result import RunResult
from iclrbench.core.seeding import rng_for
from iclrbench.core.task import (
    Budget,
    Claim,
    Metric,
    Outcome,
    Paper,
    Requirement,
    RunRequest,
    Task,
    Verdict,
    ok_runs,
)
from iclrbench.envs.conformal_fairness import (
    TASK_ID,
    ConformalFairnessConfig,
    Pool,
    held_out_pool,
    stratified_split,
)

#: where standard split CP's sets include the favourable label at rates far apart between groups
#: (demographic parity at c = 0.1, randomised APS, alpha = 0.1): the synthetic population and Adult by sex
SCENARIOS = (
    {"dataset": "synthetic", "metric": "demographic_parity"},
    {"dataset": "adult", "sensitive": "sex", "metric": "demographic_parity"},
)
#: the paper's control claim (section 5, its figures of violation against c): the chosen notion is met at
#: each target c, with the coverage guarantee kept, on graph data with a GNN under equalized odds and on
#: tabular data (Adult by sex; the paper's ACSIncome does not load offline)
GRID_SCENARIOS = (
    {"dataset": "sbm", "metric": "equalized_odds"},
    {"dataset": "adult", "sensitive": "sex", "metric": "equalized_odds"},
)
C_GRID = (0.05, 0.1, 0.15, 0.2)
#: the slack on the mean violation: Conformal Fairness brackets the calibration rates, so the test-half
#: violation sits around c, not below it (the share of resplits meeting c is reported beside each verdict)
SLACK = 0.02


def resplit(pool: Pool, config: ConformalFairnessConfig, seed: int, r: int) -> tuple[Any, Any]:
    """The ``r``-th calibration / test split of a seed's pool (the same for every predictor)."""
    from iclrbench.algorithms.conformal_fairness import Split

    cal, test = stratified_split(
        pool.labels, pool.groups, config.calibration_fraction, rng_for(seed, TASK_ID, "resplit", str(r))
    )
    scores = pool_scores(pool, config, seed)
    return tuple(Split(scores[i], pool.labels[i], pool.groups[i], pool.n_groups) for i in (cal, test))


def pool_scores(pool: Pool, config: ConformalFairnessConfig, seed: int) -> np.ndarray:
    """The pool's (n, K) scores; randomised APS draws one ``u`` per point, fixed for the seed."""
    return cp.scores(config.score, pool.probs, rng_for(seed, TASK_ID, "aps-u"))


# ---------------------------------------------------------------------------------------------- claims
TRIO = ("split-cp", "cf-framework", "mondrian-cp")


def scenario_requests(budget: str, scenarios: tuple[dict[str, str], ...] = SCENARIOS) -> list[RunRequest]:
    seeds = ConformalFairnessTask.claim_seeds(budget)
    return [RunRequest(name, scenario, seeds) for scenario in scenarios for name in TRIO]


def grid_requests(budget: str) -> list[RunRequest]:
    """Split CP and Conformal Fairness at every c of :data:`C_GRID` in every :data:`GRID_SCENARIOS`."""
    seeds = ConformalFairnessTask.claim_seeds(budget)
    return [
        RunRequest(name, {**scenario, "c": c}, seeds)
        for scenario in GRID_SCENARIOS
        for c in C_GRID
        for name in ("split-cp", "cf-framework")
    ]


def _label(scenario: dict[str, Any]) -> str:
    return scenario["dataset"] + (f"/{scenario['sensitive']}" if "sensitive" in scenario else "")


def _by_scenario(
    groups: list[list[RunResult]], scenarios: tuple[dict[str, str], ...] = SCENARIOS
) -> list[tuple[str, dict[str, list[RunResult]]]]:
    """(scenario label, algorithm -> runs) in request order."""
    out = []
    for i, scenario in enumerate(scenarios):
        trio = groups[3 * i : 3 * i + 3]
        out.append((_label(scenario), {n: ok_runs(g) for n, g in zip(TRIO, trio, strict=False)}))
    return out


def judge_control(groups: list[list[RunResult]]) -> tuple[Verdict, dict[str, Any]]:
    """Per scenario: split CP's mean violation lies above c (the scenario is one where CP violates), and
    Conformal Fairness's lies at or below c + 0.02 with marginal coverage >= 1 - alpha - 0.005; each on
    the Student-t interval over seeds, every part required."""
    parts, figures = {}, {}
    for label, runs in _by_scenario(groups):
        split, fair = runs["split-cp"], runs["cf-framework"]
        if len(split) < 2 or len(fair) < 2:
            return empty(f"{label}: fewer than 2 seeds of split-cp or cf-framework")
        config = fair[0].config
        c, alpha = config["c"], config["alpha"]
        precondition = threshold(
            [r.metrics["fairness_violation"] for r in split], ">", c, quantity="split-cp violation"
        )
        if precondition.verdict != "reproduced":  # not a scenario the claim speaks of: no verdict on it
            return "inconclusive", {
                "reason": f"{label}: split CP's violation is not above c, so the scenario tests nothing",
                f"{label}: split-cp violation > c": precondition.as_dict(),
            }
        parts[f"{label}: split-cp violation > c"] = precondition
        parts[f"{label}: cf-framework violation <= c + 0.02"] = threshold(
            [r.metrics["fairness_violation"] for r in fair], "<=", c + 0.02, quantity="violation"
        )
        parts[f"{label}: cf-framework coverage >= 1 - alpha - 0.005"] = threshold(
            [r.metrics["coverage"] for r in fair], ">=", 1 - alpha - 0.005, quantity="coverage"
        )
        figures[label] = {
            name: {
                m: mean_figure(rs, m)
                for m in ("fairness_violation", "satisfied_fraction", "coverage", "set_size")
            }
            for name, rs in runs.items()
        }
    return combine(parts, means=figures)


def judge_lambda(groups: list[list[RunResult]]) -> tuple[Verdict, dict[str, Any]]:
    """Marginal coverage is never given up: Conformal Fairness's thresholds are never below split CP's
    ``q_hat`` on the same calibration half (the smallest ``lam_hat - q_hat`` over every resplit of every
    run is >= 0, exact), and its marginal coverage is >= 1 - alpha (per scenario, Student-t over seeds)."""
    scenarios = _by_scenario(groups)
    fair = [r for _, runs in scenarios for r in runs["cf-framework"]]
    if not fair:
        return empty("no successful cf-framework run")
    gaps = [r.metrics["min_threshold_minus_qhat"] for r in fair]
    worst = float(min(gaps))
    verdict: Verdict = "reproduced" if worst >= 0 else "not_reproduced"
    resplits = sum(r.config["resplits"] for r in fair)
    parts = {
        "lam_hat >= q_hat": Evidence(
            verdict,
            "min over resplits of min(lam_hat) - q_hat",
            ">=",
            0.0,
            worst,
            worst,
            worst,
            float("nan"),
            tuple(sorted({r.seed for r in fair})),
            f"exact, over {resplits} resplits",
        )
    }
    for label, runs in scenarios:
        cf = runs["cf-framework"]
        if cf:
            alpha = cf[0].config["alpha"]
            parts[f"{label}: coverage >= 1 - alpha"] = threshold(
                [r.metrics["coverage"] for r in cf], ">=", 1 - alpha, quantity="coverage"
            )
    return combine(parts, runs=len(fair))


def judge_grid(groups: list[list[RunResult]]) -> tuple[Verdict, dict[str, Any]]:
    """Per scenario of :data:`GRID_SCENARIOS` and each c of :data:`C_GRID` where split CP's mean violation
    lies above c (a cell where split CP already meets c tests nothing, and is reported as such): Conformal
    Fairness's mean violation is at most c + :data:`SLACK` and its marginal coverage at least
    1 - alpha - 0.005 (Student-t over seeds). Every testable cell is required, and each scenario needs one;
    the share of resplits meeting c exactly is reported beside every cell."""
    parts, cells = {}, {}
    for i, scenario in enumerate(GRID_SCENARIOS):
        label, testable = _label(scenario), 0
        for j, c in enumerate(C_GRID):
            k = 2 * (i * len(C_GRID) + j)
            split, fair = ok_runs(groups[k]), ok_runs(groups[k + 1])
            if len(split) < 2 or len(fair) < 2:
                return empty(f"{label} at c={c:g}: fewer than 2 seeds of split-cp or cf-framework")
            alpha = fair[0].config["alpha"]
            cell = f"{label} c={c:g}"
            figures = ("fairness_violation", "satisfied_fraction", "coverage")
            cells[cell] = {
                name: {m: mean_figure(rs, m) for m in figures}
                for name, rs in (("split-cp", split), ("cf-framework", fair))
            }
            precondition = threshold(
                [r.metrics["fairness_violation"] for r in split], ">", c, quantity="split-cp violation"
            )
            cells[cell]["testable"] = precondition.verdict == "reproduced"
            if not cells[cell]["testable"]:  # split CP meets c (or may): no fairness to enforce here
                continue
            testable += 1
            parts[f"{cell}: cf-framework violation <= c + {SLACK:g}"] = threshold(
                [r.metrics["fairness_violation"] for r in fair], "<=", c + SLACK, quantity="violation"
            )
            parts[f"{cell}: cf-framework coverage >= 1 - alpha - 0.005"] = threshold(
                [r.metrics["coverage"] for r in fair], ">=", 1 - alpha - 0.005, quantity="coverage"
            )
        if testable == 0:
            return "inconclusive", {
                "reason": f"{label}: split CP's violation is not above c at any c, so nothing is enforced",
                "cells": cells,
            }
    return combine(parts, cells=cells)


# ------------------------------------------------------------------------------------------------ task
class ConformalFairnessTask(Task):
    id = TASK_ID
    # 2: predictive parity bracketed and measured as the paper's code does (PPV - prior, by Bayes); the SBM
    #    graph has 20,000 nodes (was 2,000) and group 1's features 8x noisier (was 2x) (issue 42)
    version = 2
    paper = Paper(
        title="A generic framework for conformal fairness",
        authors="Aditya T. Vadlamani, Anutam Srinivasan, Pranav Maneriker, Ali Payani, Srinivasan "
        "Parthasarathy",
        arxiv="2505.16115",
    )
    summary = (
        "Conformal prediction sets whose coverage gap between sensitive groups is controlled (demographic "
        "parity, equal opportunity, ... ) on Adult, COMPAS, German credit, a synthetic population and a GCN "
        "on an SBM graph, against split, Mondrian, class-conditional CP and BatchGCP. Departures: the "
        "paper's ACSIncome and graphs (Pokec, Credit: 30-67k nodes) do not load offline, so Adult and a "
        "20,000-node SBM (its minority's features 8x noisier) stand in; predictive parity is the paper "
        "code's, |PPV - prior| per group with its Bayes bracket."
    )
    Config = ConformalFairnessConfig
    budgets = {  # noqa: RUF012  (read-only class data, as in Task)
        "smoke": Budget(
            "smoke",
            {},
            "20 resplits of one fit: about a second a run once fitted (gradient boosting a few seconds, "
            "the SBM graph's GCN ~25 s)",
            claim_seeds=(0, 1, 2),
        ),
        "small": Budget(
            "small",
            {},
            "as smoke; claims over 5 fits (Adult: a few seconds a fit)",
            claim_seeds=tuple(range(5)),
            # measured: tests/test_claims_small.py's check_claims(jobs=2) from an empty store, 285.6 s on 2
            # otherwise idle cores (2026-12-05)
            claims_minutes=4.8,
        ),
        "paper": Budget(
            "paper", {"resplits": 100}, "100 resplits; claims over 10 fits", claim_seeds=tuple(range(10))
        ),
    }
    metrics = (
        Metric("fairness_violation", False, "", "test gap between groups for the fairness notion"),
        Metric("satisfied_fraction", True, "", "resplits whose violation meets the target c"),
        Metric("coverage", True, "", "marginal coverage of the true label"),
        Metric("worst_group_coverage", True, "", "the lowest group's coverage of the true label"),
        Metric("set_size", False, "", "mean prediction set size"),
        Metric("min_threshold_minus_qhat", True, "", "smallest threshold held to, minus split CP's q_hat"),
        Metric("infeasible_fraction", False, "", "resplits where no candidate met the target"),
        Metric("base_accuracy", True, "", "the base model's held-out accuracy"),
        Metric("seconds", False, "s", "wall-clock seconds of the run (the fit excluded when cached)"),
    )
    protocol = "ConformalPredictor: calibrate(Split) -> Calibrated; Calibrated.sets(Split) -> bool (n, K)"
    requires = Requirement("fairness", ("sklearn", "torch", "torch_geometric"))
    algorithm_modules = (
        "iclrbench.algorithms.conformal_fairness",
        "iclrbench.baselines.conformal_fairness",
    )
    #: its former name was the task's own
    renamed_algorithms: ClassVar[dict[str, str]] = {"conformal-fairness": "cf-framework"}
    claims = (
        Claim(
            "cf-controls-violation",
            "Where standard split CP's group gap exceeds c = 0.1 (demographic parity: synthetic, Adult by "
            "sex), Conformal Fairness keeps the mean violation <= c + 0.02 with marginal coverage >= "
            "1 - alpha - 0.005 (paper, ACSIncome: violation 0.227 -> 0.090, coverage 0.900 -> 0.921).",
            scenario_requests,
            judge_control,
            expected="reproduced",
        ),
        Claim(
            "lambda-above-qhat",
            "Marginal coverage is never given up: Conformal Fairness's thresholds are never below split CP's "
            "q-hat on any resplit, and its coverage is >= 1 - alpha.",
            scenario_requests,
            judge_lambda,
            expected="reproduced",
        ),
        Claim(
            "controls-at-each-c",
            f"Equalized odds is controlled at each c of {', '.join(f'{c:g}' for c in C_GRID)} on graph data "
            "with a GCN (SBM) and on tabular data (Adult by sex): wherever split CP's violation exceeds c, "
            f"Conformal Fairness's mean violation is <= c + {SLACK:g} with marginal coverage >= 1 - alpha - "
            "0.005 (paper, section 5: violation under each c, coverage kept); the share of resplits meeting "
            "c is reported beside each cell.",
            grid_requests,
            judge_grid,
            # small, 2026-12-05: every cell judged is met within the slack; Adult 0.053, 0.103, 0.152 (split
            # CP 0.198, so c 0.2 is not judged), the 20,000-node SBM 0.056, 0.110, 0.162, 0.215 (split CP
            # 0.292); the SBM's mean sits above c, 8-17% of its resplits meet c exactly
            expected="reproduced",
        ),
    )

    def prepare(self, config: ConformalFairnessConfig) -> None:
        """Fit (or load) seed 0's base model before the runs read it."""
        held_out_pool(config, 0)

    def evaluate(self, algorithm: Algorithm, config: ConformalFairnessConfig, seed: int) -> Outcome:
        from iclrbench.algorithms.conformal_fairness import ConformalPredictor

        if not isinstance(algorithm, ConformalPredictor):
            raise TypeError(f"{type(algorithm).__name__} is not a ConformalPredictor")
        started = time.perf_counter()
        pool = held_out_pool(config, seed)
        fitted = time.perf_counter()
        violations, coverages, worst_groups, sizes, margins, infeasible = [], [], [], [], [], []
        for r in range(config.resplits):
            cal, test = resplit(pool, config, seed, r)
            for g in range(pool.n_groups):
                if not (cal.groups == g).any():
                    raise ValueError(f"group {pool.group_names[g]!r} has no calibration point")
            calibrated = algorithm.calibrate(cal)
            sets = calibrated.sets(test)
            violations.append(
                cp.fairness_violation(
                    config.metric, sets, test.labels, test.groups, pool.n_classes, pool.n_groups
                )
            )
            coverage, size = cp.coverage_and_size(sets, test.labels)
            covered = cp.true_label_scores(sets.astype(np.int8), test.labels).astype(bool)
            worst_groups.append(min(covered[test.groups == g].mean() for g in np.unique(test.groups)))
            coverages.append(coverage)
            sizes.append(size)
            lowest = float(calibrated.thresholds(test).min())
            if math.isfinite(calibrated.q_hat):
                margins.append(lowest - calibrated.q_hat)
            else:  # too few calibration points: q_hat is inf, and only an inf threshold is not below it
                margins.append(0.0 if lowest == math.inf else -1.0)
            infeasible.append(not calibrated.feasible)
        met = [cp.satisfied(config.metric, v, config.c) for v in violations]
        return Outcome(
            metrics={
                "fairness_violation": float(np.mean(violations)),
                "satisfied_fraction": float(np.mean(met)),
                "coverage": float(np.mean(coverages)),
                "worst_group_coverage": float(np.mean(worst_groups)),
                "set_size": float(np.mean(sizes)),
                "min_threshold_minus_qhat": float(min(margins)),
                "infeasible_fraction": float(np.mean(infeasible)),
                "base_accuracy": pool.base_accuracy,
                "seconds": time.perf_counter() - fitted,
            },
            notes=(
                f"{config.dataset}/{config.attribute} ({', '.join(pool.group_names)}): {len(pool.labels)} "
                f"held-out points, {pool.n_classes} classes; base model {pool.base_accuracy:.3f} accurate; "
                f"{config.metric} at c={config.c}, {config.score}, alpha={config.alpha}; "
                f"violation max over resplits {max(violations):.3f}; fit/load {fitted - started:.1f} s"
            ),
        )
