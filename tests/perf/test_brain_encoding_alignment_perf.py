"""Per-voxel cross-validated ridge over 10,000 voxels and 1,000 images (16 features, alphas
logspace(1, 4, 60)): himalaya's RidgeCV (one solve for every voxel, 5-fold CV, torch backend in float32)
side by side with a loop of scikit-learn's RidgeCV per voxel (efficient leave-one-out); ``extra_info``
holds the ratio. One round each: the loop alone takes tens of seconds."""

from __future__ import annotations

import numpy as np
import pytest

from iclrbench.algorithms.brain_encoding_alignment import ridge_cv_himalaya
from iclrbench.baselines.brain_encoding_alignment import ridge_cv_sklearn_loop

pytest.importorskip("himalaya")
pytestmark = pytest.mark.long
FIGURES: dict[str, float] = {}
IMAGES, FEATURES, VOXELS = 1000, 16, 10_000


@pytest.fixture(scope="module")
def problem() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((IMAGES, FEATURES))
    y = x @ rng.standard_normal((FEATURES, VOXELS)) * rng.uniform(0, 0.5, VOXELS)
    y += rng.standard_normal(y.shape)
    return (x - x.mean(0)) / x.std(0), (y - y.mean(0)) / y.std(0)


def test_himalaya_ridge_cv(benchmark, problem, single_thread) -> None:  # type: ignore[no-untyped-def]
    benchmark.group = "brain-encoding: per-voxel RidgeCV, 10,000 voxels x 1,000 images"
    x, y = problem
    prediction, alphas = benchmark.pedantic(ridge_cv_himalaya, (x, y, x[:10], 5), rounds=1, iterations=1)
    assert prediction.shape == (10, VOXELS) and np.isfinite(alphas).all()
    if benchmark.stats:
        FIGURES["himalaya"] = benchmark.stats.stats.median


def test_sklearn_ridgecv_loop(benchmark, problem, single_thread) -> None:  # type: ignore[no-untyped-def]
    benchmark.group = "brain-encoding: per-voxel RidgeCV, 10,000 voxels x 1,000 images"
    x, y = problem
    prediction, alphas = benchmark.pedantic(ridge_cv_sklearn_loop, (x, y, x[:10]), rounds=1, iterations=1)
    assert prediction.shape == (10, VOXELS) and np.isfinite(alphas).all()
    if benchmark.stats and FIGURES.get("himalaya"):
        benchmark.extra_info["sklearn loop / himalaya"] = round(
            benchmark.stats.stats.median / FIGURES["himalaya"], 2
        )
