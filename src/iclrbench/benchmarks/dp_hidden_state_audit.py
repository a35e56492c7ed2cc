"""dp-hidden-state-audit: Cebere, Bellet, Papernot, "Tighter privacy auditing of DP-SGD in the hidden state
threat model", ICLR 2025 (arXiv:2405.14457).

One evaluation is one audit: 2 x ``runs`` DP-SGD trainings (canary in / out), the adversary's scores, an
empirical lower bound on epsilon, the accountant's upper bound for the same run, and their ratio.

Lower bound (Sec. 2.3, after Nasr et al. 2023): a threshold on the scores is a membership test; 95%
Clopper-Pearson (1934) upper bounds on its false positive and false negative rates give
mu = Phi^-1(1 - FPR) - Phi^-1(FNR), converted to epsilon at delta through the mu-GDP trade-off curve
(Dong, Roth, Su 2022). The threshold is chosen on the first half of each world's runs (the one whose
bound is largest there) and the Clopper-Pearson bounds are computed on the second half only: a bound at
a threshold picked as the best of ~2,000 on the same runs exceeded the true epsilon 9-15% of the time
at a nominal 5% (issue 21), whereas a threshold fixed before the held-out runs are seen keeps the
Clopper-Pearson guarantee (P(eps_lower > eps) <= 5%). Half the runs bound the rates, so the bound is
lower than the all-thresholds figure (task version 2).
Upper bound: with known batches there is no subsampling, so the canary's ``n`` insertions compose n
Gaussian mechanisms of sensitivity C and noise sigma C: exactly mu-GDP with mu = sqrt(n) / sigma, whose
epsilon(delta) is the closed form below (Opacus's PRV accountant agrees; its RDP accountant is looser).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from iclrbench.algorithms.dp_hidden_state_audit import AuditAdversary
from iclrbench.core import decision
from iclrbench.core.algorithm import Algorithm
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
    mean_of_ok_runs,
    ok_runs,
)
from iclrbench.envs.dp_hidden_state_audit import DpAuditConfig, DpSgdGame
from iclrbench.models.torch_threads import one_torch_thread

TASK_ID = "dp-hidden-state-audit"
CONFIDENCE_ALPHA = 0.05


def clopper_pearson_upper(errors: np.ndarray, trials: int, alpha: float = CONFIDENCE_ALPHA) -> np.ndarray:
    """Upper end of the two-sided (1 - alpha) Clopper-Pearson interval for a binomial rate.

    At zero errors it is 1 - (alpha / 2)^(1 / trials).
    """
    from scipy.stats import beta as beta_dist

    k = np.asarray(errors, dtype=float)
    upper = beta_dist.ppf(1 - alpha / 2, k + 1, np.maximum(trials - k, 1e-12))
    return np.where(k >= trials, 1.0, upper)


def gdp_delta(epsilon: float, mu: float) -> float:
    """delta(epsilon) of mu-GDP: Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) (Dong et al., Cor. 2.13)."""
    from scipy.stats import norm

    if mu <= 0:
        return 0.0
    # e^eps Phi(.) in log space: e^eps alone overflows for the large epsilons a root search visits
    return float(norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon + norm.logcdf(-epsilon / mu - mu / 2)))


def gdp_epsilon(mu: float, delta: float) -> float:
    """The smallest epsilon with gdp_delta(epsilon, mu) <= delta (0 if mu-GDP already gives delta at 0)."""
    from scipy.optimize import brentq

    if mu <= 0 or gdp_delta(0.0, mu) <= delta:
        return 0.0
    high = 1.0
    while gdp_delta(high, mu) > delta:
        high *= 2
    return float(brentq(lambda e: gdp_delta(e, mu) - delta, 0.0, high, xtol=1e-10))


def mu_for_epsilon(epsilon: float, delta: float) -> float:
    """The mu whose GDP curve gives exactly ``epsilon`` at ``delta``."""
    from scipy.optimize import brentq

    return float(brentq(lambda m: gdp_epsilon(m, delta) - epsilon, 1e-6, 50.0, xtol=1e-12))


def _z_tables(trials: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """For k = 0..trials errors: Phi^-1(1 - CP upper) (false positives) and Phi^-1(CP upper) (false
    negatives), so that mu = zf[FP] - zn[FN] needs no per-threshold quantile computations."""
    from scipy.stats import norm

    upper = clopper_pearson_upper(np.arange(trials + 1), trials, alpha)
    with np.errstate(divide="ignore"):
        return norm.ppf(1 - upper), norm.ppf(upper)


def best_threshold(
    scores_in: np.ndarray, scores_out: np.ndarray, alpha: float = CONFIDENCE_ALPHA
) -> tuple[np.ndarray, np.ndarray]:
    """(threshold, mu) of the threshold whose Clopper-Pearson mu is largest on these runs ("in" when
    score >= threshold), over every distinct score; vectorised over leading axes (..., runs).

    The mu returned is *not* a valid lower bound: it is the best of many on the same runs. Use it only
    to choose a threshold for held-out runs (:func:`audit_mu_lower`)."""
    s_in, s_out = np.asarray(scores_in, dtype=float), np.asarray(scores_out, dtype=float)
    n_in, n_out = s_in.shape[-1], s_out.shape[-1]
    zf, _ = _z_tables(n_out, alpha)
    _, zn = _z_tables(n_in, alpha)
    both = np.concatenate([s_in, s_out], axis=-1)
    order = np.argsort(both, axis=-1, kind="stable")
    ordered = np.take_along_axis(both, order, axis=-1)
    is_in = order < n_in
    in_below = np.cumsum(is_in, axis=-1) - is_in  # "in" scores strictly before each position
    position = np.arange(both.shape[-1])
    false_neg = in_below  # in scored < threshold (only first positions of ties are used below)
    false_pos = n_out - (position - in_below)  # out scored >= threshold
    first = np.ones(ordered.shape, dtype=bool)
    first[..., 1:] = ordered[..., 1:] > ordered[..., :-1]
    mu = np.where(first, zf[false_pos] - zn[false_neg], -np.inf)
    best = np.argmax(mu, axis=-1)[..., None]
    return np.take_along_axis(ordered, best, axis=-1)[..., 0], np.take_along_axis(mu, best, axis=-1)[..., 0]


def audit_mu_lower(
    scores_in: np.ndarray, scores_out: np.ndarray, alpha: float = CONFIDENCE_ALPHA
) -> np.ndarray:
    """A valid (1 - alpha) lower bound on mu: threshold chosen on the first half of each world's runs,
    Clopper-Pearson bounds on the second half (a union bound over the two rates at alpha / 2 each).
    Vectorised over leading axes (..., runs); at least 0."""
    s_in, s_out = np.asarray(scores_in, dtype=float), np.asarray(scores_out, dtype=float)
    half_in, half_out = s_in.shape[-1] // 2, s_out.shape[-1] // 2
    threshold, _ = best_threshold(s_in[..., :half_in], s_out[..., :half_out], alpha)
    held_in, held_out = s_in[..., half_in:], s_out[..., half_out:]
    false_pos = (held_out >= threshold[..., None]).sum(axis=-1)
    false_neg = (held_in < threshold[..., None]).sum(axis=-1)
    zf, _ = _z_tables(held_out.shape[-1], alpha)
    _, zn = _z_tables(held_in.shape[-1], alpha)
    return np.maximum(zf[false_pos] - zn[false_neg], 0.0)


def audit_lower_bound(
    scores_in: np.ndarray, scores_out: np.ndarray, delta: float, alpha: float = CONFIDENCE_ALPHA
) -> tuple[float, float]:
    """(mu, epsilon) (1 - alpha) lower bounds from membership scores (higher = "in") of one audit,
    by :func:`audit_mu_lower` (threshold from one half of the runs, bound from the other)."""
    mu = float(audit_mu_lower(scores_in, scores_out, alpha))
    return mu, gdp_epsilon(mu, delta)


def noise_multiplier(config: DpAuditConfig) -> float:
    """sigma such that ``insertions`` compositions give epsilon_target at delta: sqrt(n) / mu."""
    return math.sqrt(config.insertions) / mu_for_epsilon(config.epsilon_target, config.delta)


# -------------------------------------------------------------------------------------------- claims
CLAIM_RUNS = {"smoke": 200, "small": 1000, "paper": 5000}
#: 3 audits could not tell GC-S from the input canary (paired interval [-1.05, 2.19] on eps_lower at
#: small); at k = 1 an audit costs ~5 s of CPU, so this claim asks for 10
INPUT_CLAIM_SEEDS = {"smoke": (0, 1), "small": tuple(range(10)), "paper": tuple(range(20))}


def _requests_tight(budget: str) -> list[RunRequest]:
    return [
        RunRequest(
            "gc-r", {"k": 1, "epsilon_target": e, "runs": CLAIM_RUNS[budget]}, DpAuditTask.claim_seeds(budget)
        )
        for e in (2.0, 4.0, 8.0)
    ]


def judge_tight(groups: list[list[RunResult]]) -> tuple[Verdict, dict[str, Any]]:
    """k = 1, GC-R: tightness >= 0.7 at each epsilon_upper in {2, 4, 8} (>= 1000 runs per world), each
    judged on the Student-t interval of tightness over audits (seeds), all three required."""
    if not groups or any(not ok_runs(g) for g in groups):
        return decision.empty("a configuration has no successful audit")
    parts = {
        f"tightness_eps_{ok_runs(g)[0].config['epsilon_target']:g}": decision.threshold(
            [r.metrics["tightness"] for r in ok_runs(g)], ">=", 0.7, quantity="tightness"
        )
        for g in groups
    }
    runs = ok_runs(groups[0])[0].config["runs"]
    verdict, measured = decision.combine(parts, runs_per_world=runs)
    if runs < 1000:
        return "inconclusive", {**measured, "reason": "the claim is stated for >= 1000 runs per world"}
    return verdict, measured


def _requests_k(budget: str) -> list[RunRequest]:
    return [
        RunRequest(
            "gc-r",
            {"k": k, "epsilon_target": 4.0, "runs": CLAIM_RUNS[budget]},
            DpAuditTask.claim_seeds(budget),
        )
        for k in (1, 25)
    ]


def judge_k(groups: list[list[RunResult]]) -> tuple[Verdict, dict[str, Any]]:
    """k = 25 gives strictly lower tightness than k = 1 (GC-R, epsilon_upper = 4): paired by seed."""
    if len(groups) < 2 or not ok_runs(groups[0]) or not ok_runs(groups[1]):
        return decision.empty("no successful audit for k = 1 or k = 25")
    k1, k25 = groups[0], groups[1]
    parts = {
        "tightness_k1_minus_k25": decision.compare_runs(
            k1, k25, "tightness", ">", quantity="tightness k=1 - k=25"
        )
    }
    return decision.combine(
        parts,
        tightness_k1=decision.mean_figure(k1, "tightness"),
        tightness_k25=decision.mean_figure(k25, "tightness"),
        epsilon_upper=4.0,
    )


def _requests_input(budget: str) -> list[RunRequest]:
    overrides = {"k": 1, "epsilon_target": 4.0, "runs": CLAIM_RUNS[budget]}
    return [RunRequest(a, overrides, INPUT_CLAIM_SEEDS[budget]) for a in ("gc-r", "gc-s", "input-canary")]


def judge_input(groups: list[list[RunResult]]) -> tuple[Verdict, dict[str, Any]]:
    """Crafted gradients (GC-R and GC-S) each give a higher epsilon lower bound than the input-space
    canary: two paired comparisons, each at alpha, both required."""
    if len(groups) < 3 or any(not ok_runs(g) for g in groups[:3]):
        return decision.empty("an adversary has no successful audit")
    gcr, gcs, inp = groups[:3]
    parts = {
        "gc_r_minus_input": decision.compare_runs(
            gcr, inp, "epsilon_lower", ">", quantity="eps_lower GC-R - input"
        ),
        "gc_s_minus_input": decision.compare_runs(
            gcs, inp, "epsilon_lower", ">", quantity="eps_lower GC-S - input"
        ),
    }
    means = {
        name: round(mean_of_ok_runs(g, "epsilon_lower"), 3)
        for name, g in zip(("gc_r", "gc_s", "input"), groups, strict=False)
    }
    return decision.combine(parts, **{f"epsilon_lower_{k}": v for k, v in means.items()}, epsilon_upper=4.0)


class DpAuditTask(Task):
    id = TASK_ID
    # 2: the lower bound picks its threshold on half of each world's runs and bounds on the other half
    version = 2
    paper = Paper(
        title="Tighter Privacy Auditing of DP-SGD in the Hidden State Threat Model",
        authors="Tudor Cebere, Aurelien Bellet, Nicolas Papernot",
        arxiv="2405.14457",
    )
    summary = (
        "Audit DP-SGD when only the final model is seen: how close does an adversary's empirical epsilon "
        "lower bound get to the accountant's upper bound?"
    )
    Config = DpAuditConfig
    budgets = {  # noqa: RUF012  (read-only class data, as in Task)
        "smoke": Budget(
            "smoke", {"runs": 200}, "2 x 200 trainings: about a second per audit at k = 1", claim_seeds=(0, 1)
        ),
        "small": Budget(
            "small",
            {"runs": 1000},
            "2 x 1000 trainings of T = 250 k steps, batched: seconds at k = 1; at k = 25 (T = 6,250) 25x the "
            "steps: minutes of one core (one gc-r audit took 347 s on a 2-core machine shared ~5 ways)",
            claims_minutes=3.9,  # tests/test_claims_small.py: 233 s, -j 2, 2 cores (2026-12-03)
            # audits per configuration: 3 decide the tightness and k = 25 claims (tightness at eps 2 lies
            # wholly below 0.7; k = 1 vs k = 25 is 0.65 vs 0.00), and a k = 25 audit costs ~25x a k = 1 audit
            claim_seeds=(0, 1, 2),
        ),
        "paper": Budget(
            "paper",
            {"runs": 5000},
            "2 x 5000 trainings per audit: minutes each on 2 cores",
            claim_seeds=tuple(range(5)),
        ),
    }
    metrics = (
        Metric("tightness", True, "", "epsilon_lower / epsilon_upper"),
        Metric(
            "epsilon_lower",
            True,
            "",
            "95% lower bound: threshold chosen on half the runs, Clopper-Pearson on the other half, mu-GDP",
        ),
        Metric("epsilon_upper", False, "", "accountant: mu = sqrt(insertions) / sigma, no subsampling"),
        Metric("mu_lower", True, "", "95% lower bound on mu at the held-out threshold"),
        Metric("runs", False, "", "trainings in the audit (both worlds)"),
        Metric("seconds", False, "s", "wall-clock seconds of training and scoring"),
    )
    protocol = "AuditAdversary: craft(game) -> Canary(steps, gradient | example); score(game, final_params)"
    requires = Requirement("privacy", ("torch", "opacus"))
    algorithm_modules = (
        "iclrbench.algorithms.dp_hidden_state_audit",
        "iclrbench.baselines.dp_hidden_state_audit",
    )
    claims = (
        Claim(
            "gc-r-tight-at-k1",
            "Crafted gradient canary at every step (k = 1, GC-R): tightness >= 0.7 at epsilon_upper in "
            "{2, 4, 8} with >= 1000 runs per world.",
            _requests_tight,
            judge_tight,
            version=2,
            # decision rule 2 (positive tightness ratios also hold the log-normal mean's interval): at 3
            # seeds, eps 2 gives 0.468 (0.251 to 1.087), no longer wholly below 0.7 (rule 1: not reproduced)
            expected="inconclusive",
        ),
        Claim(
            "k25-less-tight",
            "Inserting the canary only every 25th step gives strictly lower tightness than every step.",
            _requests_k,
            judge_k,
            version=2,
            expected="reproduced",
        ),
        Claim(
            "crafted-beats-input-canary",
            "Crafted gradient canaries give a higher epsilon lower bound than an input-space canary.",
            _requests_input,
            judge_input,
            version=2,
            expected="reproduced",
        ),
    )

    def evaluate(self, algorithm: Algorithm, config: DpAuditConfig, seed: int) -> Outcome:
        if not isinstance(algorithm, AuditAdversary):
            raise TypeError(f"{type(algorithm).__name__} does not implement the AuditAdversary protocol")
        with one_torch_thread():
            start = time.perf_counter()
            sigma = noise_multiplier(config)
            game = DpSgdGame(config, rng_for(seed, self.id, "env"), sigma)
            canary = algorithm.craft(game)
            members = np.repeat([True, False], config.runs)
            final = game.play(canary, members)
            scores = algorithm.score(game, final)
            seconds = time.perf_counter() - start
        mu_lower, eps_lower = audit_lower_bound(scores[members], scores[~members], config.delta)
        mu_upper = math.sqrt(canary.insertions) / sigma
        eps_upper = gdp_epsilon(mu_upper, config.delta)
        return Outcome(
            metrics={
                "tightness": eps_lower / eps_upper if eps_upper > 0 else 0.0,
                "epsilon_lower": eps_lower,
                "epsilon_upper": eps_upper,
                "mu_lower": mu_lower,
                "runs": float(2 * config.runs),
                "seconds": seconds,
            },
            notes=f"sigma {sigma:.4f}; mu_upper {mu_upper:.4f}; insertions {canary.insertions}; "
            f"T {config.steps}",
        )
