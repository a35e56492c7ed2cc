"""Baselines of video-guardrail (SafeWatch, Chen et al., ICLR 2025, section 5's ablations and the TASKS.md
card):

- ``safewatch-no-pruning``: PEPE with every video token (the pruning claim's reference);
- ``safewatch-random-pruning``: PEPE keeping as many video tokens as PAP, chosen at random;
- ``sequential``: the same network with the policies concatenated at increasing positions under a causal
  mask (an LLM prompt's encoding), no pruning: the position-bias claim's comparison;
- ``per-frame``: an image classifier on each frame (an MLP over its 16 patches, one output per training
  category), max over frames; it reads no policy text, so a policy it was not trained on gets a constant
  score. Its explanation names the frame where its score peaks and no cell (it reads a frame whole).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iclrbench.algorithms.video_guardrail import Guardrail
from iclrbench.core.algorithm import register_algorithm
from iclrbench.core.seeding import seed_for
from iclrbench.envs.video_guardrail import CATEGORIES, CELLS, PATCH_DIM, TASK_ID, TRAIN_CATEGORIES, Split


@register_algorithm(task=TASK_ID, name="safewatch-no-pruning", role="baseline")
class SafeWatchNoPruning(Guardrail):
    """PEPE without pruning: every video token through every block."""

    prune = "none"


@register_algorithm(task=TASK_ID, name="safewatch-random-pruning", role="baseline")
class SafeWatchRandomPruning(Guardrail):
    """PEPE keeping as many video tokens as PAP does, drawn at random (the pruning control)."""

    prune = "random"


@register_algorithm(task=TASK_ID, name="sequential", role="baseline")
class SequentialEncoding(Guardrail):
    """Policies concatenated at increasing positions under a causal mask, as an LLM prompt holds them; no
    pruning."""

    encoding = "sequential"


@register_algorithm(task=TASK_ID, name="per-frame", role="baseline")
class PerFrameClassifier(Guardrail):
    """An MLP per frame over its patches with one output per training category, max over frames: no policy
    text read, so a held-out policy gets score 0 (chance)."""

    def fit(self, train: Split, seed: int) -> None:
        import torch

        config = self.config
        torch.manual_seed(seed_for(seed, TASK_ID, "per-frame") % 2**63)
        self.index = np.full(len(CATEGORIES), -1)
        self.index[[CATEGORIES.index(c) for c in TRAIN_CATEGORIES]] = np.arange(len(TRAIN_CATEGORIES))
        frame = CELLS * CELLS * PATCH_DIM
        self.model = torch.nn.Sequential(
            torch.nn.Linear(frame, 4 * config.d_model),
            torch.nn.GELU(),
            torch.nn.Linear(4 * config.d_model, len(TRAIN_CATEGORIES)),
        )
        video = torch.from_numpy(train.tokens)
        heads = torch.from_numpy(self.index[train.categories])
        labels = torch.from_numpy(train.labels)
        optimizer = torch.optim.AdamW(self.model.parameters(), lr=config.lr, weight_decay=0.01)
        batches = torch.Generator().manual_seed(seed_for(seed, TASK_ID, "batches") % 2**63)
        every, curve, running = max(1, config.steps // 20), [], []
        for step in range(1, config.steps + 1):
            rows = torch.randint(len(train), (config.batch,), generator=batches)
            logits = torch.gather(self._categories(video[rows]), 1, heads[rows])
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels[rows])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running.append(loss.item())
            if step % every == 0 or step == config.steps:
                curve.append((step, float(np.mean(running))))
                running = []
        self.curve = np.array(curve, dtype=np.float64)

    def _categories(self, video: Any) -> Any:
        """(B, training categories) logits: the frame classifier's, max over frames."""
        b = video.shape[0]
        frames = video.reshape(b, self.config.frames, -1)
        return self.model(frames).amax(1)

    def explanations(self, split: Split) -> tuple[np.ndarray, np.ndarray]:
        """The frame where each policy's category scores highest, and no cell (-1): it reads frames whole."""
        import torch

        b = len(split)
        with torch.no_grad():
            frames = torch.from_numpy(split.tokens).reshape(b, self.config.frames, -1)
            per_frame = self.model(frames).numpy()  # (n, frames, training categories)
        heads = np.maximum(self.index[split.categories], 0)  # (n, P)
        when = np.take_along_axis(per_frame, heads[:, None, :], 2).argmax(1)
        return when, np.full_like(when, -1)

    def scores(self, split: Split, order: np.ndarray | None = None) -> np.ndarray:
        import torch

        with torch.no_grad():
            per_category = self._categories(torch.from_numpy(split.tokens)).numpy()
        heads = self.index[split.categories]
        return np.where(heads >= 0, np.take_along_axis(per_category, np.maximum(heads, 0), 1), 0.0)

    def flops(self) -> float:
        d = self.config.d_model
        return 2.0 * self.config.frames * (CELLS * CELLS * PATCH_DIM * 4 * d + 4 * d * len(TRAIN_CATEGORIES))
