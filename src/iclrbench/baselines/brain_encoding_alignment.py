"""Baselines of brain-encoding-alignment (the TASKS.md card; Oota et al., "Correlating instruction-tuning
(in multimodal models) with vision-language processing (in the brain)", ICLR 2025, section 3).

Each is an :class:`~iclrbench.algorithms.brain_encoding_alignment.EncodingPipeline` that changes one
thing about the reference's per-voxel cross-validated ridge:

- ``ols``: least squares without a penalty; a pair is the two sets side by side.
- ``global-alpha``: one cross-validated alpha shared by every voxel (himalaya ``RidgeCV`` with
  ``local_alpha=False``).
- ``no-nc-normalisation``: the reference's fits, scored raw (not divided by the noise ceiling).
- ``sklearn-ridgecv``: a loop of scikit-learn's ``RidgeCV`` per voxel over the same alphas, its efficient
  leave-one-out selection: the cross-check of the reference.
- ``shuffled-control``: the reference fitted on training images whose features are shuffled against
  their responses: the null, whose held-out scores should be 0.
"""

from __future__ import annotations

import numpy as np

from iclrbench.algorithms.brain_encoding_alignment import ALPHAS, EncodingPipeline, ridge_cv_himalaya
from iclrbench.core.algorithm import register_algorithm
from iclrbench.envs.brain_encoding_alignment import TASK_ID


def least_squares(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray) -> np.ndarray:
    """Unpenalised least squares fitted on the training images: its predictions of the test images."""
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
