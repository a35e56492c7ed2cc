"""icl-circuit's algorithms: the attention-mask ablations of Cho et al. (ICLR 2025, section 7, Table 1),
each a declarative class naming the links it cuts, and the random control that cuts as many random links
in the same layers. ``none`` is the unablated model (the reference accuracy every mask is compared with).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from iclrbench.core.algorithm import Algorithm, register_algorithm
from iclrbench.core.config import param
from iclrbench.envs.icl_circuit import (
    MASKS,
    TASK_ID,
    Episodes,
    IclCircuitConfig,
    blocked_matrix,
    layer_range,
    mask_links,
    random_links,
)


class Ablation(Algorithm):
    """Base: ``masks(episodes)`` gives, per masked layer, the attention links to cut: one (T, T) boolean
    matrix when every episode shares a layout, else one per episode (B, T, T)."""

    config: IclCircuitConfig
    links_of: str = "none"

    def links(self, episodes: Episodes, i: int) -> list[tuple[int, int]]:
        return mask_links(self.links_of, episodes.roles, i)

    def masks(self, episodes: Episodes) -> dict[int, np.ndarray]:
        layers = layer_range(self.config)
        if self.links_of == "none" or not layers:
            return {}
        t = episodes.ids.shape[1]
        if episodes.roles.shared:
            blocked = blocked_matrix(self.links(episodes, 0), t)
        else:
            blocked = np.stack([blocked_matrix(self.links(episodes, i), t) for i in range(len(episodes))])
        return dict.fromkeys(layers, blocked)


#: what each mask disables (Cho et al., Table 1 lines 2-5 and Table 2), as ``bench info`` shows it
DOCS = {
    "none": "The unablated model (Table 1, line 1).",
    "xi_to_si": "Step 1 cut: no forerunner (s_q too) may attend its own input text (Table 1, line 2).",
    "xq_to_sq": "Step 1 cut for the query: s_q may attend neither x_q nor itself (Table 1, line 3).",
    "si_to_yi": "Step 2 cut: no label y_i may attend its forerunner s_i (Table 1, line 4).",
    "yi_to_sq": "Step 3 cut: s_q may not attend any demonstration label y_i (Table 1, line 5).",
    "si_to_si": "Forerunners may not attend forerunners, themselves included (Table 2).",
}


def _mask_class(mask: str, role: str) -> type[Ablation]:
    name = "none" if mask == "none" else mask.replace("_", "-")
    cls = type(f"Mask_{mask}", (Ablation,), {"links_of": mask, "__doc__": DOCS[mask]})
    return register_algorithm(task=TASK_ID, name=name, role=role)(cls)


ABLATIONS = {mask: _mask_class(mask, "baseline" if mask == "none" else "reference") for mask in MASKS}


@dataclasses.dataclass(frozen=True)
class RandomControlParams:
    like: str = param("yi_to_sq", "the mask whose link count the control matches", choices=MASKS[1:])


@register_algorithm(task=TASK_ID, name="random-control", role="baseline")
class RandomControl(Ablation):
    """As many random causal links as ``like`` cuts, drawn afresh per episode and layer (the paper's
    control)."""

    Params = RandomControlParams

    def masks(self, episodes: Episodes) -> dict[int, np.ndarray]:
        roles, t = episodes.roles, episodes.ids.shape[1]

        def draw(i: int) -> np.ndarray:
            count = len(mask_links(self.params.like, roles, i))
            return blocked_matrix(random_links(count, int(roles.length[i]), self.rng), t)

        # a fresh draw per prompt and layer, as the paper's Masked_ICL_inference draws one per prompt
        return {
            layer: np.stack([draw(i) for i in range(len(episodes))]) for layer in layer_range(self.config)
        }
