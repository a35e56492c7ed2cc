"""Sample-quality metrics in a frozen network's feature space: the Frechet distance (Heusel et al., 2017:
the FID formula, in our evaluator's features instead of Inception's) and improved precision / recall
(Kynkaanniemi et al., 2019: k-nearest-neighbour manifolds, k = 3)."""

from __future__ import annotations

import numpy as np


def frechet_distance(a: np.ndarray, b: np.ndarray) -> float:
    """``|mu_a - mu_b|^2 + tr(S_a + S_b - 2 (S_a S_b)^(1/2))`` of Gaussians fitted to (n, d) features."""
    mu_a, mu_b = a.mean(0), b.mean(0)
    cov_a, cov_b = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    # tr (S_a S_b)^(1/2) = tr (R S_b R)^(1/2) with R = S_a^(1/2): symmetric, so eigvalsh is exact and
    # stable where S_a is singular (dead ReLU features), unlike a general matrix square root
    w, v = np.linalg.eigh(cov_a)
    root_a = (v * np.sqrt(np.clip(w, 0.0, None))) @ v.T
    inner = np.linalg.eigvalsh(root_a @ cov_b @ root_a)
    trace_root = np.sqrt(np.clip(inner, 0.0, None)).sum()
    value = ((mu_a - mu_b) ** 2).sum() + np.trace(cov_a) + np.trace(cov_b) - 2 * trace_root
    return float(max(value, 0.0))


def distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(n, m) Euclidean distances, through the Gram matrix (no (n, m, d) intermediate)."""
    sq = (a**2).sum(1)[:, None] + (b**2).sum(1)[None] - 2 * a @ b.T
    return np.sqrt(np.maximum(sq, 0.0))


def _radii(x: np.ndarray, k: int) -> np.ndarray:
    return np.sort(distances(x, x), axis=1)[:, k]  # column 0 is the point itself


def precision_recall(real: np.ndarray, fake: np.ndarray, k: int = 3) -> tuple[float, float]:
    """Precision: the share of ``fake`` inside the real manifold (some real point's k-NN ball); recall:
    the share of ``real`` inside the fake manifold."""

    def inside(points: np.ndarray, centres: np.ndarray, radii: np.ndarray) -> float:
        return float((distances(points, centres) <= radii[None]).any(1).mean())

    return inside(fake, real, _radii(real, k)), inside(real, fake, _radii(fake, k))
