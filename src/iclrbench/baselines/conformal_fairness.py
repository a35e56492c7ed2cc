"""Baselines of conformal-fairness (the TASKS.md card; Vadlamani et al., "A generic framework for
conformal fairness", ICLR 2025, section 5): the split-CP family Conformal Fairness is compared with, each
a :class:`~iclrbench.algorithms.conformal_fairness.ConformalPredictor` calibrated on the same split.

- ``split-cp``: standard split conformal prediction, one ``q_hat`` for every label and group.
- ``mondrian-cp``: group-conditional (Mondrian) split CP, one ``q_hat`` per sensitive group.
- ``class-conditional-cp``: one ``q_hat`` per label, from that label's calibration points.
- ``batch-gcp``: BatchGCP (Jung et al., ICLR 2023), a threshold linear in the indicators of the sensitive
  groups and the predicted labels, fitted by the pinball loss.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from iclrbench.algorithms.conformal_fairness import Calibrated, ConformalPredictor, Split
from iclrbench.algorithms.conformal_fairness.conformal import conformal_quantile, true_label_scores
from iclrbench.core.algorithm import register_algorithm
from iclrbench.envs.conformal_fairness import TASK_ID

Array = np.ndarray


def mondrian_thresholds(cal_score: Array, labels: Array, groups: Array, alpha: float, n_groups: int) -> Array:
    """Group-conditional (Mondrian) split CP (Vovk et al. 2003): one ``q_hat`` per group from its own
    calibration points; (G,) thresholds, applied by each test point's group."""
    true = true_label_scores(cal_score, labels)
    return np.array([conformal_quantile(true[groups == g], alpha) for g in range(n_groups)])


def class_conditional_thresholds(cal_score: Array, labels: Array, alpha: float) -> Array:
    """Class-conditional split CP (Vovk 2012; Sadinle et al. 2019): ``q_hat[y]`` from the calibration
    points of true label ``y``; (K,) thresholds."""
    true = true_label_scores(cal_score, labels)
    return np.array([conformal_quantile(true[labels == y], alpha) for y in range(cal_score.shape[1])])


def batch_gcp_thresholds(cal_score: Array, labels: Array, indicators: Array, alpha: float) -> Array:
    """BatchGCP (Jung, Noarov, Ramalingam, Roth, "Batch multivalid conformal prediction", ICLR 2023): the
    threshold ``f(x) = theta_0 + sum_g theta_g 1[x in g]`` minimising the pinball loss at ``1 - alpha`` of
    the calibration true-label scores, over a collection of (possibly overlapping) groups given as the
    (n, G) 0/1 ``indicators``. At the optimum every group's coverage is ``1 - alpha`` up to
    ``O(G / n)``. Solved exactly as a linear program (HiGHS); returns ``theta`` of length ``G + 1``."""
    from scipy.optimize import linprog
    from scipy.sparse import eye, hstack

    true = true_label_scores(cal_score, labels)
    n = len(true)
    design = np.hstack([np.ones((n, 1)), np.asarray(indicators, dtype=np.float64)])
    p = design.shape[1]
    tau = 1 - alpha
    # variables: theta (free), over >= 0, under >= 0 with  true - design @ theta = over - under
    cost = np.concatenate([np.zeros(p), np.full(n, tau), np.full(n, 1 - tau)])
    equality = hstack([design, eye(n), -eye(n)], format="csr")
    result = linprog(
        cost,
        A_eq=equality,
        b_eq=true,
        bounds=[(None, None)] * p + [(0, None)] * (2 * n),
        method="highs-ipm",  # interior point with crossover: exact, ~10x the simplex's speed here
    )
    if not result.success:
        raise RuntimeError(f"BatchGCP's linear program failed: {result.message}")
    return result.x[:p]


def batch_gcp_design(split: Split) -> np.ndarray:
    """BatchGCP's groups: the sensitive groups and the predicted-label groups (the label of lowest
    score), as 0/1 indicators, after an intercept column."""
    k = split.scores.shape[1]
    sensitive = np.eye(split.n_groups)[split.groups]
    predicted = np.eye(k)[split.scores.argmin(1)]
    return np.hstack([np.ones((len(split.groups), 1)), sensitive, predicted])


@dataclasses.dataclass(frozen=True)
class LinearCalibrated(Calibrated):
    """BatchGCP's calibrated predictor: one threshold per test point, ``theta`` over (intercept, sensitive
    groups, predicted labels) of :func:`batch_gcp_design`, shared by all of the point's labels."""

    theta: np.ndarray | None = None

    def thresholds(self, split: Split) -> np.ndarray:
        """(n, K) thresholds: each point's linear threshold, repeated over its labels."""
        assert self.theta is not None
        n, k = split.scores.shape
        return np.broadcast_to((batch_gcp_design(split) @ self.theta)[:, None], (n, k))


@register_algorithm(task=TASK_ID, name="split-cp", role="baseline")
class SplitCP(ConformalPredictor):
    """Standard split conformal prediction: one threshold ``q_hat`` for every label and group."""

    def calibrate(self, split: Split) -> Calibrated:
        q_hat = self.q_hat(split)
        return Calibrated(q_hat=q_hat, lam=np.full(split.scores.shape[1], q_hat))


@register_algorithm(task=TASK_ID, name="mondrian-cp", role="baseline")
class MondrianCP(ConformalPredictor):
    """Group-conditional (Mondrian) split CP: each group's own ``q_hat``, so coverage holds per group."""

    def calibrate(self, split: Split) -> Calibrated:
        for g in range(split.n_groups):
            if not (split.groups == g).any():
                raise ValueError(f"group {g} has no calibration point; Mondrian CP cannot calibrate it")
        lam = mondrian_thresholds(split.scores, split.labels, split.groups, self.config.alpha, split.n_groups)
        return Calibrated(q_hat=self.q_hat(split), group_lam=lam)


@register_algorithm(task=TASK_ID, name="class-conditional-cp", role="baseline")
class ClassConditionalCP(ConformalPredictor):
    """Class-conditional split CP: ``q_hat[y]`` from the calibration points of label ``y``."""

    def calibrate(self, split: Split) -> Calibrated:
        lam = class_conditional_thresholds(split.scores, split.labels, self.config.alpha)
        return Calibrated(q_hat=self.q_hat(split), lam=lam)


@register_algorithm(task=TASK_ID, name="batch-gcp", role="baseline")
class BatchGCP(ConformalPredictor):
    """BatchGCP (Jung et al., ICLR 2023): one pinball-loss fit of a threshold linear in the indicators of
    the sensitive groups and the predicted labels, giving coverage ~ 1 - alpha within each."""

    def calibrate(self, split: Split) -> Calibrated:
        design = batch_gcp_design(split)[:, 1:]
        theta = batch_gcp_thresholds(split.scores, split.labels, design, self.config.alpha)
        return LinearCalibrated(q_hat=self.q_hat(split), theta=theta)
