"""conformal-fairness's reference predictor: Conformal Fairness (Vadlamani et al., ICLR 2025, Algorithm 1),
and the protocol every predictor of the task implements. The split-CP family it is compared with is in
:mod:`iclrbench.baselines.conformal_fairness`.

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
    """A calibrated predictor: per-label thresholds ``lam`` (K,), or per-group ones ``group_lam`` (G,)
    (a baseline may subclass it with thresholds of its own form). ``q_hat`` is split CP's quantile on the
    same calibration split; ``feasible`` False where no candidate met the target."""

    q_hat: float
    lam: np.ndarray | None = None
    group_lam: np.ndarray | None = None
    feasible: bool = True

    def thresholds(self, split: Split) -> np.ndarray:
        """(n, K) thresholds each test point's labels are held to."""
        n, k = split.scores.shape
        if self.lam is not None:
            return np.broadcast_to(self.lam, (n, k))
        assert self.group_lam is not None
        return np.broadcast_to(self.group_lam[split.groups][:, None], (n, k))

    def sets(self, split: Split) -> np.ndarray:
        """The boolean (n, K) prediction sets of a split: each label whose score is within its threshold."""
        return split.scores <= self.thresholds(split)


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
