"""Baselines of icl-circuit (the TASKS.md card; Cho et al., "Revisiting in-context learning inference
circuit in large language models", ICLR 2025, section 7, Table 1):

- ``none``: the unablated model (Table 1, line 1), the accuracy every mask is compared with.
- ``random-control``: the paper's control, as many random causal links as a mask ``like`` cuts, drawn
  afresh per episode and layer in the same layers.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from iclrbench.algorithms.icl_circuit import Ablation, mask_class
from iclrbench.core.algorithm import register_algorithm
from iclrbench.core.config import param
from iclrbench.envs.icl_circuit import (
    MASKS,
    TASK_ID,
    Episodes,
    blocked_matrix,
    layer_range,
    mask_links,
    random_links,
)

#: the unablated model: an ablation that cuts nothing
UNABLATED = mask_class("none", "baseline", "The unablated model (Table 1, line 1).")


@dataclasses.dataclass(frozen=True)
class RandomControlParams:
    like: str = param("yi_to_sq", "the mask whose link count the control matches", choices=MASKS[1:])


@register_algorithm(task=TASK_ID, name="random-control", role="baseline")
class RandomControl(Ablation):
    """As many random causal links as ``like`` cuts, drawn afresh per episode and layer (the paper's
    control)."""

    Params = RandomControlParams

    def masks(self, episodes: Episodes, layers: tuple[int, ...] | None = None) -> dict[int, np.ndarray]:
        roles, t = episodes.roles, episodes.ids.shape[1]
        layers = layer_range(self.config) if layers is None else layers

        def draw(i: int) -> np.ndarray:
            count = len(mask_links(self.params.like, roles, i))
            return blocked_matrix(random_links(count, int(roles.length[i]), self.rng), t)

        # a fresh draw per prompt and layer, as the paper's Masked_ICL_inference draws one per prompt
        return {layer: np.stack([draw(i) for i in range(len(episodes))]) for layer in layers}
