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
    IclCircuitConfig,
    blocked_matrix,
    layer_range,
    mask_links,
    random_links,
)


class Ablation(Algorithm):
    """Base: ``masks()`` gives the blocked (T, T) links per masked layer."""

    config: IclCircuitConfig
    links_of: str = "none"

    def links(self) -> list[tuple[int, int]]:
        return mask_links(self.links_of, self.config)

    def masks(self) -> dict[int, np.ndarray]:
        links = self.links()
        if not links:
            return {}
        return {layer: blocked_matrix(links, self.config) for layer in layer_range(self.config)}


def _mask_class(mask: str, role: str) -> type[Ablation]:
    name = "none" if mask == "none" else mask.replace("_", "-")
    doc = (
        "The unablated model."
        if mask == "none"
        else f"Cut the {mask} links (mask_links) in the masked layers."
    )

    cls = type(f"Mask_{mask}", (Ablation,), {"links_of": mask, "__doc__": doc})
    return register_algorithm(task=TASK_ID, name=name, role=role)(cls)


ABLATIONS = {mask: _mask_class(mask, "baseline" if mask == "none" else "reference") for mask in MASKS}


@dataclasses.dataclass(frozen=True)
class RandomControlParams:
    like: str = param("yi_to_sq", "the mask whose link count the control matches", choices=MASKS[1:])


@register_algorithm(task=TASK_ID, name="random-control", role="baseline")
class RandomControl(Ablation):
    """As many random causal links as ``like`` cuts, drawn per layer (the paper's control)."""

    Params = RandomControlParams

    def masks(self) -> dict[int, np.ndarray]:
        count = len(mask_links(self.params.like, self.config))
        return {
            layer: blocked_matrix(random_links(count, self.config, self.rng), self.config)
            for layer in layer_range(self.config)
        }
