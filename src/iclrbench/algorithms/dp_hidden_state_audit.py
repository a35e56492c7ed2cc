"""The crafted-gradient adversaries of "Tighter privacy auditing of DP-SGD in the hidden state threat
model" (Cebere, Bellet, Papernot, ICLR 2025, Sec. 4).

The adversary inserts the gradient g* = C e_j -- norm C, so clipping leaves it whole -- into every k-th
step, and tests membership from the final model alone with the statistic theta_0[j] - theta_T[j]: each
insertion moves coordinate j by -lr C / B, while the noise of every step blurs it.

- :class:`GradientCanaryRandom` (GC-R): j uniform among the parameters.
- :class:`GradientCanarySimulated` (GC-S): j the coordinate that moves least in a noiseless, canary-free
  simulation of the same training, so the data's own gradients hide the canary least.

Protocol of the task (``AuditAdversary``): ``craft(game) -> Canary`` then ``score(game, final_params)``,
higher scores meaning "the canary was in".
"""

from __future__ import annotations

import numpy as np

from iclrbench.core.algorithm import Algorithm, register_algorithm
from iclrbench.envs.dp_hidden_state_audit import Canary, DpAuditConfig, DpSgdGame, noiseless_movement

TASK = "dp-hidden-state-audit"


class AuditAdversary(Algorithm):
    """Base of this task's adversaries: ``craft`` the canary, ``score`` each run's final parameters."""

    config: DpAuditConfig

    def craft(self, game: DpSgdGame) -> Canary:
        raise TypeError(f"{type(self).__name__} must implement craft()")

    def score(self, game: DpSgdGame, final: np.ndarray) -> np.ndarray:
        raise TypeError(f"{type(self).__name__} must implement score()")

    def schedule(self, game: DpSgdGame) -> np.ndarray:
        """Every k-th step, starting at the first: ``insertions`` insertions over T = insertions x k."""
        steps = np.zeros(game.config.steps, dtype=bool)
        steps[:: game.config.k] = True
        return steps


class _CraftedGradient(AuditAdversary):
    coordinate: int = 0

    def choose_coordinate(self, game: DpSgdGame) -> int:
        raise TypeError(f"{type(self).__name__} must choose a coordinate")

    def craft(self, game: DpSgdGame) -> Canary:
        self.coordinate = self.choose_coordinate(game)
        gradient = np.zeros(game.parameters)
        gradient[self.coordinate] = game.config.clip  # g* = C e_j
        return Canary(steps=self.schedule(game), gradient=gradient)

    def score(self, game: DpSgdGame, final: np.ndarray) -> np.ndarray:
        return game.theta0[self.coordinate] - final[:, self.coordinate]


@register_algorithm(task=TASK, name="gc-r", role="reference")
class GradientCanaryRandom(_CraftedGradient):
    """Crafted gradient canary C e_j on a random coordinate j, inserted every k-th step (GC-R, Sec. 4)."""

    def choose_coordinate(self, game: DpSgdGame) -> int:
        return int(self.rng.integers(game.parameters))


@register_algorithm(task=TASK, name="gc-s", role="reference")
class GradientCanarySimulated(_CraftedGradient):
    """Crafted gradient canary on the coordinate least updated in a noiseless simulation (GC-S, Sec. 4)."""

    def choose_coordinate(self, game: DpSgdGame) -> int:
        return int(np.argmin(noiseless_movement(game)))
