"""icl-circuit's algorithms: the attention-mask ablations of Cho et al. (ICLR 2025, section 7, Table 1),
each a declarative class naming the links it cuts. The unablated model ``none`` (the accuracy every mask is
compared with) and the random control that cuts as many random links in the same layers are in
:mod:`iclrbench.baselines.icl_circuit`.
"""

from __future__ import annotations

import numpy as np

from iclrbench.core.algorithm import Algorithm, register_algorithm
from iclrbench.envs.icl_circuit import (
    MASKS,
    TASK_ID,
    Episodes,
    IclCircuitConfig,
    blocked_matrix,
    layer_range,
    mask_links,
)


class Ablation(Algorithm):
    """Base: ``masks(episodes, layers)`` gives, per masked layer, the attention links to cut: one (T, T)
    boolean matrix when every episode shares a layout, else one per episode (B, T, T). ``layers``: the
    config's range unless given (``layers=induction`` is resolved by the run, from its unablated pass)."""

    config: IclCircuitConfig
    links_of: str = "none"

    def links(self, episodes: Episodes, i: int) -> list[tuple[int, int]]:
        return mask_links(self.links_of, episodes.roles, i)

    def masks(self, episodes: Episodes, layers: tuple[int, ...] | None = None) -> dict[int, np.ndarray]:
        layers = layer_range(self.config) if layers is None else layers
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
    "xi_to_si": "Step 1 cut: no forerunner (s_q too) may attend its own input text (Table 1, line 2).",
    "xq_to_sq": "Step 1 cut for the query: s_q may attend neither x_q nor itself (Table 1, line 3).",
    "si_to_yi": "Step 2 cut: no label y_i may attend its forerunner s_i (Table 1, line 4).",
    "yi_to_sq": "Step 3 cut: s_q may not attend any demonstration label y_i (Table 1, line 5).",
    "si_to_si": "Forerunners may not attend forerunners, themselves included (Table 2).",
}


def mask_class(mask: str, role: str, doc: str) -> type[Ablation]:
    """A registered :class:`Ablation` cutting the links of ``mask`` (one of the env's ``MASKS``), named as
    the mask with hyphens; ``doc`` is its one-line description."""
    name = "none" if mask == "none" else mask.replace("_", "-")
    cls = type(f"Mask_{mask}", (Ablation,), {"links_of": mask, "__doc__": doc})
    return register_algorithm(task=TASK_ID, name=name, role=role)(cls)


#: the paper's masks, by their name in the env's ``MASKS``
ABLATIONS = {mask: mask_class(mask, "reference", DOCS[mask]) for mask in MASKS if mask != "none"}
