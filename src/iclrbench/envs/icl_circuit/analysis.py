"""icl-circuit's analyses (Cho et al., ICLR 2025): the three steps of the in-context inference circuit, read
from one forward pass with hidden states and attention, and the attention-mask ablations.

- Step 1, input text encode (section 4): at each layer, the query forerunner's hidden states are compared
  with a reference similarity of the query inputs by kernel alignment (for each query, the overlap of its
  top-``k`` cosine neighbours under the two similarities, over ``k``; chance is ``k / n``), and a
  nearest-centroid classifier of the query's latent topic is fitted on half the episodes and scored on
  the other half (chance ``1 / topics``). The reference is the inputs' bag-of-words vectors (the paper
  uses a sentence encoder's embeddings of the query text).
- Step 2, semantics merge (section 5): the attention of each label token y_i to its forerunner s_i, per
  layer (the largest head's mean); and the merge read-out, each head's attention y_i -> s_i above its own
  attention from an ordinary token to the token before it (the paper's
  ``util/inference.py`` ``step2_get_attention_of_different_location`` sets the labels' attention to their
  forerunners beside the other tokens' attention to their previous token): a previous-token head reads
  s_i from y_i as it reads any previous token, and only the excess is a merge.
- Step 3, feature retrieval and copy (section 6): at s_q, each head's correct-induction score
  ``sum_{i: y_i = y_q} A(s_q -> y_i) - sum_{i: y_i != y_q} A(s_q -> y_i)`` (the paper's
  ``util/induction_evaluation.py``), per layer (the largest head's mean).
- Accuracy: the argmax of the label words' logits at s_q, over the episode's classes.

The read-outs work on a :class:`Trace`, the few positions of hidden states and attention they need,
gathered per batch by the subject (:mod:`iclrbench.envs.icl_circuit.subjects`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from iclrbench.envs.icl_circuit import Episodes


@dataclasses.dataclass(frozen=True)
class Trace:
    """What the analyses read from one forward pass over ``B`` episodes (a subject's hooks gather it
    batch by batch, so the full (B, H, T, T) attention of every layer is never held at once)."""

    label_logits: np.ndarray  # (B, C) logits at s_q of the words naming the episode's classes
    sq_hidden: np.ndarray  # (L, B, d) s_q's hidden state after each layer
    merge: np.ndarray  # (L, B, H, k) attention y_i -> s_i
    retrieve: np.ndarray  # (L, B, H, k) attention s_q -> y_i
    previous: np.ndarray  # (L, B, H) mean attention of the ordinary tokens (not labels) to their previous one

    @staticmethod
    def join(parts: list[Trace]) -> Trace:
        return Trace(*(np.concatenate(arrays, axis=0 if i == 0 else 1) for i, arrays in enumerate(zip(
            *(dataclasses.astuple(p) for p in parts), strict=True
        ))))  # fmt: skip

    def take(self, index: np.ndarray) -> Trace:
        """The episodes ``index`` (episode axis 0 of the logits, 1 of the rest)."""
        return Trace(self.label_logits[index], *(a[:, index] for a in dataclasses.astuple(self)[1:]))


def attention_parts(attention: Any, episodes: Episodes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """From one layer's attention (B, H, T, T): y_i -> s_i (B, H, k), s_q -> y_i (B, H, k), and each
    head's mean attention from an ordinary token t (1 <= t < length, not a label) to t - 1 (B, H)."""
    import torch

    roles = episodes.roles
    b = torch.arange(len(episodes))
    rows, s, y = b[:, None], torch.from_numpy(roles.s), torch.from_numpy(roles.y)
    sq = torch.from_numpy(roles.sq)
    t = attention.shape[-1]
    steps = torch.arange(1, t)
    diagonal = attention[:, :, steps, steps - 1].float()  # (B, H, T - 1): t -> t - 1
    ordinary = steps[None, :] < torch.from_numpy(roles.length)[:, None]
    ordinary[rows, y - 1] = False  # column t - 1 holds token t; the labels out (a label follows its s_i)
    weights = ordinary.float() / ordinary.sum(1, keepdim=True).clamp(min=1)
    return (
        # indices split by a slice put their own axes first: (B, k, H) -> (B, H, k)
        attention[rows, :, y, s].float().numpy().transpose(0, 2, 1),
        attention[rows, :, sq[:, None], y].float().numpy().transpose(0, 2, 1),
        (diagonal * weights[:, None, :]).sum(-1).numpy(),
    )


def gather(logits: Any, hidden: list[Any], attention: list[Any], episodes: Episodes) -> Trace:
    """A :class:`Trace` from a pass's logits (B, T, V), hidden states (B, T, d) and attention (B, H, T, T)
    per layer, at each episode's own role positions."""
    import torch

    b = torch.arange(len(episodes))
    sq = torch.from_numpy(episodes.roles.sq)
    at_sq = logits[b, sq].float().numpy()  # (B, V)
    parts = [attention_parts(a, episodes) for a in attention]
    return Trace(
        np.take_along_axis(at_sq, episodes.label_tokens, axis=1),
        np.stack([h[b, sq].float().numpy() for h in hidden]),
        *(np.stack(arrays) for arrays in zip(*parts, strict=True)),
    )


def accuracy(trace: Trace, episodes: Episodes) -> float:
    """Share of episodes whose label word with the highest logit at s_q names the query's class."""
    return float((trace.label_logits.argmax(1) == episodes.query_class).mean())


def kernel_alignment(a: np.ndarray, b: np.ndarray, k: int) -> float:
    """Mean over points of ``|topk_a(i) & topk_b(i)| / k`` under cosine similarity (self excluded)."""

    def neighbours(x: np.ndarray) -> np.ndarray:
        x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        sim = x @ x.T
        np.fill_diagonal(sim, -np.inf)
        return np.argsort(-sim, axis=1, kind="stable")[:, :k]

    na, nb = neighbours(a), neighbours(b)
    hits = (na[:, :, None] == nb[:, None, :]).any(-1).sum(1)
    return float((hits / k).mean())


def centroid_accuracy(features: np.ndarray, labels: np.ndarray) -> float:
    """Fit class centroids on the first half, classify the second half by the nearest centroid."""
    half = len(labels) // 2
    classes = np.unique(labels[:half])
    centroids = np.stack([features[:half][labels[:half] == c].mean(0) for c in classes])
    d = ((features[half:, None, :] - centroids[None]) ** 2).sum(-1)
    return float((classes[d.argmin(1)] == labels[half:]).mean())


def bag_of_words(episodes: Episodes) -> np.ndarray:
    """Each query input as counts over the tokens that occur in any query (the reference similarity)."""
    roles = episodes.roles
    spans = [episodes.ids[i, roles.x_start[i, -1] : roles.x_end[i, -1]] for i in range(len(episodes))]
    vocab, index = np.unique(np.concatenate(spans), return_inverse=True)
    out = np.zeros((len(spans), len(vocab)))
    offsets = np.cumsum([0, *map(len, spans)])
    for i in range(len(spans)):
        np.add.at(out[i], index[offsets[i] : offsets[i + 1]], 1.0)
    return out


def step1(trace: Trace, episodes: Episodes, k: int = 64) -> tuple[list[float], list[float]]:
    """Per layer: kernel alignment of s_q's hidden states with the inputs' bag of words, and the
    nearest-centroid accuracy of the query's topic (class) from them. The neighbourhood is the paper's
    share of the queries: ``k = 64`` of 512 in ``util/kernel_alignment.py`` (``Exp1_Kernel_Alignment``),
    so at most one eighth of the episodes (a top-``k`` of nearly every other query matches whatever the
    features are: 59 of 60 gives alignment 1 at every layer)."""
    reference = bag_of_words(episodes)
    topic = episodes.topic[:, -1]
    k = max(1, min(k, len(topic) // 8))
    alignment = [kernel_alignment(h, reference, k) for h in trace.sq_hidden]
    centroid = [centroid_accuracy(h, topic) for h in trace.sq_hidden]
    return alignment, centroid


def step2(trace: Trace) -> list[float]:
    """Per layer: the largest head's mean attention of y_i to its s_i (0 without demonstrations)."""
    if not trace.merge.shape[-1]:
        return [0.0] * len(trace.merge)
    return [float(m.mean(axis=(0, 2)).max()) for m in trace.merge]


def merge_excess(trace: Trace) -> list[float]:
    """Per layer: the largest over heads of (mean attention y_i -> s_i) minus (that head's mean attention
    from an ordinary token to its previous one): the merge beyond a previous-token habit (0 without
    demonstrations)."""
    if not trace.merge.shape[-1]:
        return [0.0] * len(trace.merge)
    return [
        float((m.mean(axis=(0, 2)) - p.mean(0)).max())
        for m, p in zip(trace.merge, trace.previous, strict=True)
    ]


def step3(trace: Trace, episodes: Episodes) -> list[float]:
    """Per layer: the largest head's mean correct-induction score at s_q (0 without demonstrations)."""
    if not trace.retrieve.shape[-1]:
        return [0.0] * len(trace.retrieve)
    same = episodes.demo_classes == episodes.query_class[:, None]  # (B, k)
    sign = np.where(same, 1.0, -1.0)[:, None, :]
    return [float((r * sign).sum(-1).mean(0).max()) for r in trace.retrieve]
