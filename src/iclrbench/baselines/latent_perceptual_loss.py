"""Baselines of latent-perceptual-loss (the TASKS.md card; Berrada et al., "Boosting latent diffusion with
perceptual objectives", ICLR 2025, section 4): training recipes for the same latent denoiser, each a
:class:`~iclrbench.algorithms.latent_perceptual_loss.Recipe` that changes what is added to the diffusion
loss.

- ``no-lpl``: the diffusion loss alone, with the same model, data, steps and noise.
- ``lpl-random-decoder``: the control, LPL computed through a randomly initialised decoder of the same
  architecture.
- ``pixel-mse``: MSE between the decoded ``z0_hat`` and the decoded ``z0``, at LPL's noise levels and weight.
"""

from __future__ import annotations

from iclrbench.algorithms.latent_perceptual_loss import Recipe
from iclrbench.core.algorithm import register_algorithm
from iclrbench.envs.latent_perceptual_loss import TASK_ID


@register_algorithm(task=TASK_ID, name="no-lpl", role="baseline")
class DiffusionOnly(Recipe):
    """The diffusion loss alone: the same model, data, steps and noise."""


@register_algorithm(task=TASK_ID, name="lpl-random-decoder", role="baseline")
class RandomDecoderLPL(Recipe):
    """The control: LPL computed through a randomly initialised decoder of the same architecture."""

    extra = "features"
    random_decoder = True


@register_algorithm(task=TASK_ID, name="pixel-mse", role="baseline")
class PixelMSE(Recipe):
    """MSE between the decoded z0_hat and the decoded z0, at the same noise levels and weight as LPL."""

    extra = "pixels"
