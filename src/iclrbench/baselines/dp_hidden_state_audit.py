"""Baseline adversaries for dp-hidden-state-audit (Cebere et al., ICLR 2025, Sec. 5).

- ``input-canary``: the classic input-space canary: a training point with its label flipped, added to the
  batch at the same steps as the crafted gradient; its gradient is clipped like any other. Score: minus its
  final loss (a member is fitted better).
- ``gc-single-step``: the crafted gradient C e_j (random j) inserted at a single step, the first; the
  noise of all T steps then hides one insertion.
"""

from __future__ import annotations

import numpy as np

from iclrbench.algorithms.dp_hidden_state_audit import TASK, AuditAdversary, GradientCanaryRandom
from iclrbench.core.algorithm import register_algorithm
from iclrbench.envs.dp_hidden_state_audit import Canary, DpSgdGame


@register_algorithm(task=TASK, name="input-canary", role="baseline")
class InputSpaceCanary(AuditAdversary):
    """A label-flipped training point as the canary, scored by its final loss."""

    def craft(self, game: DpSgdGame) -> Canary:
        index = int(self.rng.integers(len(game.y)))
        self.example = (game.x[index], int(1 - game.y[index]))
        return Canary(steps=self.schedule(game), example=self.example)

    def score(self, game: DpSgdGame, final: np.ndarray) -> np.ndarray:
        return -game.loss(final, *self.example)


@register_algorithm(task=TASK, name="gc-single-step", role="baseline")
class SingleStepGradientCanary(GradientCanaryRandom):
    """The crafted gradient C e_j (random j) inserted once, at the first step."""

    def schedule(self, game: DpSgdGame) -> np.ndarray:
        steps = np.zeros(game.config.steps, dtype=bool)
        steps[0] = True
        return steps
