"""brain-encoding-alignment's feature sets: what each "model" represents of a scene.

- Instruction sets (``caption``, ``count``, ``colour``, ``position``): the real all-MiniLM-L6-v2 sentence
  embedding (384-d, :mod:`iclrbench.models.vision_language`) of the instruction's text answer, standing in
  for an instruction-tuned multimodal model's hidden state of that answer (Oota et al. mean-pool the
  hidden states over tokens, as MiniLM's sentence embedding does).
- ``vision``: a vision-only model: a fixed random convolution (32 filters 5 x 5 over RGB, ReLU) average-
  pooled on a 4 x 4 grid, 512-d; it sees pixels, not words.
- ``clip``: a joint image-text embedding standing in for CLIP: the image tower that was trained
  contrastively against MiniLM captions for federated-prompt-mixture (384-d), on this task's pictures.

Each set is reduced to its first ``feature_dims`` principal components over the stimuli (the "layer" an
encoding model reads; the set's own variance only, never the responses), keeping those of non-negligible
variance: the count answer has four distinct texts, so three components.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iclrbench.envs.brain_encoding_alignment import INSTRUCTIONS, BrainEncodingConfig, Scenes, answers

RANDOM_CONV_SEED = 2025
RANDOM_CONV_FILTERS = 32
POOL_GRID = 4


def principal_components(features: np.ndarray, dims: int, tol: float = 1e-6) -> np.ndarray:
    """The first ``dims`` principal-component scores (n, <= dims) of ``features`` (n, d), dropping those
    whose variance is below ``tol`` of the first's."""
    centred = np.asarray(features, dtype=np.float64)
    centred = centred - centred.mean(0)
    u, s, _ = np.linalg.svd(centred, full_matrices=False)
    keep = min(dims, int((s**2 > tol * s[0] ** 2).sum()))
    return u[:, :keep] * s[:keep]


def instruction_embeddings(scenes: Scenes, instruction: str) -> np.ndarray:
    """MiniLM embeddings (n, 384) of the answers, each distinct text embedded once."""
    from iclrbench.models.vision_language import embed_texts_uncached

    texts = answers(scenes, instruction)
    distinct = sorted(set(texts))
    table = np.concatenate(
        [embed_texts_uncached(distinct[i : i + 256]) for i in range(0, len(distinct), 256)]
    )
    index = {text: i for i, text in enumerate(distinct)}
    return table[[index[t] for t in texts]]


def random_conv_features(images: np.ndarray) -> np.ndarray:
    """A vision-only model: fixed random 5 x 5 filters, ReLU, 4 x 4 average pooling: (n, 512)."""
    import torch

    rng = np.random.default_rng(RANDOM_CONV_SEED)
    filters = torch.from_numpy(rng.standard_normal((RANDOM_CONV_FILTERS, 3, 5, 5)) / np.sqrt(75))
    bias = torch.from_numpy(0.1 * rng.standard_normal(RANDOM_CONV_FILTERS))
    x = torch.from_numpy(images.astype(np.float64) - 0.5)
    with torch.no_grad():
        maps = torch.relu(torch.nn.functional.conv2d(x, filters, bias, padding=2))
        pooled = torch.nn.functional.adaptive_avg_pool2d(maps, POOL_GRID)
    return pooled.reshape(len(images), -1).numpy()


def clip_features(images: np.ndarray) -> np.ndarray:
    """The contrastive image tower's normalised features (n, 384) (trained once, cached)."""
    from iclrbench.models.vision_language import image_features

    return np.concatenate([image_features(images[i : i + 512]) for i in range(0, len(images), 512)])


def raw_features(scenes: Scenes, name: str) -> np.ndarray:
    if name in INSTRUCTIONS:
        return instruction_embeddings(scenes, name)
    if name == "vision":
        return random_conv_features(scenes.images)
    if name == "clip":
        return clip_features(scenes.images)
    raise ValueError(f"unknown feature set '{name}'")


def feature_sets(scenes: Scenes, config: BrainEncodingConfig) -> dict[str, Any]:
    """Every set in ``config.feature_sets``, as principal-component scores (n, <= feature_dims)."""
    return {
        name: principal_components(raw_features(scenes, name), config.feature_dims)
        for name in config.feature_sets
    }
