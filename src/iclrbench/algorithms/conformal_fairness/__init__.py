"""conformal-fairness's predictors: Conformal Fairness (the reference, Vadlamani et al., ICLR 2025,
Algorithm 1) and the split-CP family it is compared with.

Protocol of the task (``ConformalPredictor``): ``calibrate(split) -> Calibrated`` on one calibration split
(scores, labels, groups); ``Calibrated.sets(split)`` gives the boolean (n, K) prediction sets of a test
split, reading only its scores and groups (the sensitive attribute is known at test time, as in the
paper; labels never).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from iclrbench.algorithms.conformal_fairness import conformal as cp
from iclrbench.core.algorithm import Algorithm, register_algorithm
from iclrbench.core.config import param
from iclrbench.envs.conformal_fairness import TASK_ID, ConformalFairnessConfig, unsupported


@dataclasses.dataclass(frozen=True)
class Split:
    """Points of one calibration or test split: scores (n, K), labels, groups 0..n_groups-1."""

    scores: np.ndarray
    labels: np.ndarray
    groups: np.ndarray
    n_groups: int


@dataclasses.dataclass(frozen=True)
class Calibrated:
    """A calibrated predictor: per-label thresholds ``lam`` (K,), or per-group ones ``group_lam``
    (G,), or BatchGCP's ``theta`` over (intercept, groups, predicted labels). ``q_hat`` is split CP's
    quantile on the same calibration split; ``feasible`` False where no candidate met the target."""

    q_hat: float
    lam: np.ndarray | None = None
    group_lam: np.ndarray | None = None
    theta: np.ndarray | None = None
    feasible: bool = True

    def thresholds(self, split: Split) -> np.ndarray:
        """(n, K) thresholds each test point's labels are held to."""
        n, k = split.scores.shape
        if self.lam is not None:
            return np.broadcast_to(self.lam, (n, k))
        if self.group_lam is not None:
            return np.broadcast_to(self.group_lam[split.groups][:, None], (n, k))
        assert self.theta is not None
        design = batch_gcp_design(split)
        return np.broadcast_to((design @ self.theta)[:, None], (n, k))

    def sets(self, split: Split) -> np.ndarray:
        return split.scores <= self.thresholds(split)


def batch_gcp_design(split: Split) -> np.ndarray:
    """BatchGCP's groups: the sensitive groups and the predicted-label groups (the label of lowest
    score), as 0/1 indicators, after an intercept column."""
    k = split.scores.shape[1]
    sensitive = np.eye(split.n_groups)[split.groups]
    predicted = np.eye(k)[split.scores.argmin(1)]
    return np.hstack([np.ones((len(split.groups), 1)), sensitive, predicted])


class ConformalPredictor(Algorithm):
    """Base of this task's predictors: ``calibrate`` one calibration split."""

    config: ConformalFairnessConfig

    @classmethod
    def supports(cls, config: ConformalFairnessConfig) -> str | None:
        """Refuse, before any run, a config whose groups or fairness filter select no calibration point."""
        return unsupported(config)

    def calibrate(self, split: Split) -> Calibrated:
        raise TypeError(f"{type(self).__name__} must implement calibrate()")

    def q_hat(self, split: Split) -> float:
        return cp.conformal_quantile(cp.true_label_scores(split.scores, split.labels), self.config.alpha)


@dataclasses.dataclass(frozen=True)
class ConformalFairnessParams:
    max_candidates: int = param(
        0, "thin the candidate thresholds to about this many (paper code: ~500-1000); 0 = every one", low=0
    )


@register_algorithm(task=TASK_ID, name="cf-framework", role="reference")
class ConformalFairness(ConformalPredictor):
    """Class-wise thresholds: the smallest ``lam >= q_hat`` whose group coverage gap under the fairness
    filter is at most ``c`` for each positive label (Algorithm 1; finite-sample bounds of Lemma 4.1)."""

    Params = ConformalFairnessParams

    def calibrate(self, split: Split) -> Calibrated:
        lam, q_hat, feasible = cp.fair_thresholds(
            split.scores,
            split.labels,
            split.groups,
            alpha=self.config.alpha,
            c=self.config.c,
            metric=self.config.metric,
            n_groups=split.n_groups,
            max_candidates=self.params.max_candidates or None,
        )
        return Calibrated(q_hat=q_hat, lam=lam, feasible=bool(feasible.all()))


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
        lam = cp.mondrian_thresholds(
            split.scores, split.labels, split.groups, self.config.alpha, split.n_groups
        )
        return Calibrated(q_hat=self.q_hat(split), group_lam=lam)


@register_algorithm(task=TASK_ID, name="class-conditional-cp", role="baseline")
class ClassConditionalCP(ConformalPredictor):
    """Class-conditional split CP: ``q_hat[y]`` from the calibration points of label ``y``."""

    def calibrate(self, split: Split) -> Calibrated:
        lam = cp.class_conditional_thresholds(split.scores, split.labels, self.config.alpha)
        return Calibrated(q_hat=self.q_hat(split), lam=lam)


@register_algorithm(task=TASK_ID, name="batch-gcp", role="baseline")
class BatchGCP(ConformalPredictor):
    """BatchGCP (Jung et al., ICLR 2023): one pinball-loss fit of a threshold linear in the indicators of
    the sensitive groups and the predicted labels, giving coverage ~ 1 - alpha within each."""

    def calibrate(self, split: Split) -> Calibrated:
        design = batch_gcp_design(split)[:, 1:]
        theta = cp.batch_gcp_thresholds(split.scores, split.labels, design, self.config.alpha)
        return Calibrated(q_hat=self.q_hat(split), theta=theta)
