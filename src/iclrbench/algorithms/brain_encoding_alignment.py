"""brain-encoding-alignment's algorithms: encoding pipelines, each a small declarative class saying how it
fits voxel responses from a feature set (``fit_predict``) and from a pair of sets (``fit_predict_pair``),
and whether its scores are normalised by the noise ceiling.

The reference follows the encoding models of Oota et al. (ICLR 2025; their code fits himalaya's
``RidgeCV`` with ``alphas = logspace(1, 4, 60)``, himalaya's default 5-fold ``KFold`` and its per-target
alpha): ridge regression per voxel with a cross-validated alpha, fitted with ``himalaya``; for a pair of
feature sets, banded ridge (Nunez-Elizalde et al. 2019; himalaya's ``GroupRidgeCV``), where each set gets
its own regularisation, chosen per voxel over a grid of band weights times the same alphas. Features and
responses arrive z-scored on the training images; scores are normalised by the noise ceiling.

The baselines (least squares, one global alpha, raw scores, scikit-learn's loop, the shuffled null) are
in :mod:`iclrbench.baselines.brain_encoding_alignment`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np

from iclrbench.core.algorithm import Algorithm, register_algorithm
from iclrbench.envs.brain_encoding_alignment import TASK_ID

#: the paper's code: numpy.logspace(1, MAX_LOG_10_ALPHA=4, NUM_ALPHAS=60)
ALPHAS = np.logspace(1, 4, 60)
#: banded ridge: the weight of the first band against the second, on a log grid (with the alphas above,
#: each band's own penalty ranges over alpha / weight). The grid has no corners (a band dropped
#: entirely): a band is at most ~33x more penalised than the other, which leaves a unique share that is
#: truly 0 slightly positive
BAND_RATIOS = 10.0 ** np.linspace(-1.5, 1.5, 7)


@contextlib.contextmanager
def himalaya_torch() -> Iterator[Any]:
    """himalaya on its torch backend for the block, the previous backend restored after. (Its numpy
    backend runs the same solver in float64 several times slower on CPU.)"""
    from himalaya.backend import get_backend, set_backend

    before = get_backend()
    backend = set_backend("torch", on_error="raise")
    try:
        yield backend
    finally:
        set_backend(before.name, on_error="raise")


def _numpy(x: Any) -> np.ndarray:
    return x.numpy() if hasattr(x, "numpy") else np.asarray(x)


def ridge_cv_himalaya(
    x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, folds: int, local_alpha: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """himalaya ``RidgeCV`` (per-voxel alpha when ``local_alpha``): test predictions and chosen alphas."""
    from himalaya.ridge import RidgeCV

    with himalaya_torch():
        model = RidgeCV(alphas=ALPHAS, cv=folds, solver_params={"local_alpha": local_alpha})
        model.fit(x_train.astype(np.float32), y_train.astype(np.float32))
        prediction = _numpy(model.predict(x_test.astype(np.float32)))
        alphas = _numpy(model.best_alphas_)
    return prediction.astype(np.float64), np.broadcast_to(alphas, (y_train.shape[1],)).astype(np.float64)


def banded_ridge_himalaya(
    xa_train: np.ndarray,
    xb_train: np.ndarray,
    y_train: np.ndarray,
    xa_test: np.ndarray,
    xb_test: np.ndarray,
    folds: int,
) -> np.ndarray:
    """himalaya ``GroupRidgeCV`` (banded ridge) with one band per set: test predictions."""
    from himalaya.ridge import GroupRidgeCV

    weights = np.stack([BAND_RATIOS / (1 + BAND_RATIOS), 1 / (1 + BAND_RATIOS)], axis=1)
    groups = np.r_[np.zeros(xa_train.shape[1], int), np.ones(xb_train.shape[1], int)]
    with himalaya_torch():
        model = GroupRidgeCV(
            groups=groups,
            cv=folds,
            solver_params={"alphas": ALPHAS, "n_iter": weights, "progress_bar": False},
        )
        model.fit(np.hstack([xa_train, xb_train]).astype(np.float32), y_train.astype(np.float32))
        prediction = _numpy(model.predict(np.hstack([xa_test, xb_test]).astype(np.float32)))
    return prediction.astype(np.float64)


class EncodingPipeline(Algorithm):
    """Base: fits responses (n_train, V) from features (n_train, k), both z-scored on the training images,
    and predicts the held-out images. ``alphas`` of a fit are the penalties it chose (nan where none)."""

    config: Any
    #: scores divided by the noise ceiling (R2 / nc, r / sqrt(nc))
    normalise: ClassVar[bool] = True
    #: training features shuffled against their responses (the null control)
    shuffle: ClassVar[bool] = False
    #: a pair is fitted by banded ridge (one penalty per set); otherwise the two sets side by side
    banded: ClassVar[bool] = True

    def fit_predict(
        self, x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        return ridge_cv_himalaya(x_train, y_train, x_test, self.config.cv_folds)

    def fit_predict_pair(
        self,
        xa_train: np.ndarray,
        xb_train: np.ndarray,
        y_train: np.ndarray,
        xa_test: np.ndarray,
        xb_test: np.ndarray,
    ) -> np.ndarray:
        if self.banded:
            return banded_ridge_himalaya(xa_train, xb_train, y_train, xa_test, xb_test, self.config.cv_folds)
        x_train, x_test = np.hstack([xa_train, xb_train]), np.hstack([xa_test, xb_test])
        return self.fit_predict(x_train, y_train, x_test)[0]


@register_algorithm(task=TASK_ID, name="himalaya-ridge", role="reference")
class HimalayaRidge(EncodingPipeline):
    """Per-voxel cross-validated ridge (himalaya RidgeCV, alphas logspace(1, 4, 60), 5 folds) and banded
    ridge for pairs, scores normalised by the noise ceiling (Oota et al., ICLR 2025, section 3)."""
