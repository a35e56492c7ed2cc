"""brain-encoding-alignment's algorithms: encoding pipelines, each a small declarative class saying how it
fits voxel responses from a feature set (``fit_predict``) and from a pair of sets (``fit_predict_pair``),
and whether its scores are normalised by the noise ceiling.

The reference follows the encoding models of Oota et al. (ICLR 2025; their code fits himalaya's
``RidgeCV`` with ``alphas = logspace(1, 4, 60)``, himalaya's default 5-fold ``KFold`` and its per-target
alpha): ridge regression per voxel with a cross-validated alpha, fitted with ``himalaya``; for a pair of
feature sets, banded ridge (Nunez-Elizalde et al. 2019; himalaya's ``GroupRidgeCV``), where each set gets
its own regularisation, chosen per voxel over a grid of band weights times the same alphas. Features and
responses arrive z-scored on the training images; scores are normalised by the noise ceiling.

Baselines: ``ols`` (least squares, no penalty; a pair is the two sets side by side), ``global-alpha`` (one
cross-validated alpha for every voxel), ``no-nc-normalisation`` (the reference's fits, raw scores),
``sklearn-ridgecv`` (a loop of scikit-learn's ``RidgeCV`` per voxel over the same alphas, its efficient
leave-one-out selection: the cross-check of the reference), and ``shuffled-control`` (the reference fitted
on training images whose features are shuffled against their responses: the null).
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


def least_squares(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray) -> np.ndarray:
    coef, *_ = np.linalg.lstsq(x_train, y_train, rcond=None)
    return x_test @ coef


def ridge_cv_sklearn_loop(
    x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn ``RidgeCV`` fitted voxel by voxel (efficient leave-one-out over ALPHAS)."""
    from sklearn.linear_model import RidgeCV

    prediction = np.empty((len(x_test), y_train.shape[1]))
    alphas = np.empty(y_train.shape[1])
    for v in range(y_train.shape[1]):
        model = RidgeCV(alphas=ALPHAS, fit_intercept=False).fit(x_train, y_train[:, v])
        prediction[:, v] = model.predict(x_test)
        alphas[v] = model.alpha_
    return prediction, alphas


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


@register_algorithm(task=TASK_ID, name="ols", role="baseline")
class OrdinaryLeastSquares(EncodingPipeline):
    """Least squares without a penalty; a pair is the two sets side by side."""

    banded = False

    def fit_predict(
        self, x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        return least_squares(x_train, y_train, x_test), np.full(y_train.shape[1], np.nan)


@register_algorithm(task=TASK_ID, name="global-alpha", role="baseline")
class GlobalAlpha(EncodingPipeline):
    """One cross-validated alpha for all voxels (himalaya RidgeCV, local_alpha=False); a pair is the two
    sets side by side under one alpha. (A single set's alpha is shared by all four regions' voxels, a
    pair's by its partition region's only.)"""

    banded = False

    def fit_predict(
        self, x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        return ridge_cv_himalaya(x_train, y_train, x_test, self.config.cv_folds, local_alpha=False)


@register_algorithm(task=TASK_ID, name="no-nc-normalisation", role="baseline")
class NoNoiseCeiling(EncodingPipeline):
    """The reference's fits, scored raw: R2 and r not divided by the noise ceiling."""

    normalise = False


@register_algorithm(task=TASK_ID, name="sklearn-ridgecv", role="baseline")
class SklearnRidgeCV(EncodingPipeline):
    """A loop of scikit-learn RidgeCV per voxel over the same alphas (leave-one-out selection); a pair is
    the two sets side by side under one alpha per voxel."""

    banded = False

    def fit_predict(
        self, x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        return ridge_cv_sklearn_loop(x_train, y_train, x_test)


@register_algorithm(task=TASK_ID, name="shuffled-control", role="baseline")
class ShuffledControl(EncodingPipeline):
    """The reference fitted on shuffled images: the training features are permuted against their
    responses, so nothing real can be learned; held-out scores should be 0."""

    shuffle = True
