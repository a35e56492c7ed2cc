"""icl-circuit's analyses (Cho et al., ICLR 2025): the three steps of the in-context inference circuit, read
from one forward pass with hidden states and attention, and the attention-mask ablations.

- Step 1, input text encode (section 4): at each layer, the query forerunner's hidden states are compared
  with a reference similarity of the query inputs by kernel alignment (for each query, the overlap of its
  top-``k`` cosine neighbours under the two similarities, over ``k``; chance is ``k / n``), and a
  nearest-centroid classifier of the query's latent topic is fitted on half the episodes and scored on
  the other half (chance ``1 / topics``). The reference is the inputs' bag-of-words vectors (the paper
  uses a sentence encoder's embeddings of the query text).
- Step 2, semantics merge (section 5): the attention of each label token y_i to its forerunner s_i, per
  layer (the largest head's mean).
- Step 3, feature retrieval and copy (section 6): at s_q, each head's correct-induction score
  ``sum_{i: y_i = y_q} A(s_q -> y_i) - sum_{i: y_i != y_q} A(s_q -> y_i)`` (the paper's
  ``util/induction_evaluation.py``), per layer (the largest head's mean).
- Accuracy: the argmax of the label words' logits at s_q, over the episode's classes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iclrbench.envs.icl_circuit import Episodes, IclCircuitConfig, layout


def forward(
    model: Any, episodes: Episodes, masks: dict[int, np.ndarray] | None = None
) -> tuple[Any, Any, Any]:
    import torch

    with torch.no_grad():
        extra = {i: torch.from_numpy(m) for i, m in (masks or {}).items()}
        return model(torch.from_numpy(episodes.ids), extra or None)


def accuracy(logits: Any, episodes: Episodes, config: IclCircuitConfig) -> float:
    """Share of episodes whose label word with the highest logit at s_q names the query's class."""
    sq = layout(config).sq
    scores = np.take_along_axis(logits[:, sq].numpy(), episodes.label_tokens, axis=1)
    return float((scores.argmax(1) == episodes.query_class).mean())


def kernel_alignment(a: np.ndarray, b: np.ndarray, k: int) -> float:
    """Mean over points of ``|topk_a(i) & topk_b(i)| / k`` under cosine similarity (self excluded)."""

    def neighbours(x: np.ndarray) -> np.ndarray:
        x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        sim = x @ x.T
        np.fill_diagonal(sim, -np.inf)
        return np.argsort(-sim, axis=1, kind="stable")[:, :k]

    na, nb = neighbours(a), neighbours(b)
    return float(np.mean([len(set(x) & set(y)) / k for x, y in zip(na, nb, strict=True)]))


def centroid_accuracy(features: np.ndarray, labels: np.ndarray) -> float:
    """Fit class centroids on the first half, classify the second half by the nearest centroid."""
    half = len(labels) // 2
    classes = np.unique(labels[:half])
    centroids = np.stack([features[:half][labels[:half] == c].mean(0) for c in classes])
    d = ((features[half:, None, :] - centroids[None]) ** 2).sum(-1)
    return float((classes[d.argmin(1)] == labels[half:]).mean())


def bag_of_words(episodes: Episodes, config: IclCircuitConfig) -> np.ndarray:
    xq = episodes.ids[:, layout(config).xq]
    out = np.zeros((len(xq), config.vocab))
    np.add.at(out, (np.arange(len(xq))[:, None], xq), 1.0)
    return out


def step1(
    hidden: list[Any], episodes: Episodes, config: IclCircuitConfig, k: int = 64
) -> tuple[list[float], list[float]]:
    """Per layer: kernel alignment of s_q's hidden states with the inputs' bag of words, and the
    nearest-centroid accuracy of the query's topic from them."""
    sq = layout(config).sq
    reference = bag_of_words(episodes, config)
    topic = episodes.topic[:, -1]
    k = min(k, len(topic) - 1)
    alignment, centroid = [], []
    for h in hidden:
        states = h[:, sq].numpy()
        alignment.append(kernel_alignment(states, reference, k))
        centroid.append(centroid_accuracy(states, topic))
    return alignment, centroid


def step2(attention: list[Any], config: IclCircuitConfig) -> list[float]:
    """Per layer: the largest head's mean attention of y_i to its s_i."""
    lay = layout(config)
    out = []
    for a in attention:  # (B, H, T, T)
        share = a[:, :, lay.y, lay.s].mean(-1).mean(0)  # (H,)
        out.append(float(share.max()))
    return out


def step3(attention: list[Any], episodes: Episodes, config: IclCircuitConfig) -> list[float]:
    """Per layer: the largest head's mean correct-induction score at s_q."""
    lay = layout(config)
    same = episodes.demo_classes == episodes.query_class[:, None]  # (B, k)
    sign = np.where(same, 1.0, -1.0)
    out = []
    for a in attention:
        to_labels = a[:, :, lay.sq, lay.y].numpy()  # (B, H, k)
        score = (to_labels * sign[:, None, :]).sum(-1).mean(0)  # (H,)
        out.append(float(score.max()))
    return out
