"""latent-perceptual-loss's algorithms: training recipes for the latent denoiser, each a small declarative
class that says what it adds to the diffusion loss.

The reference is the latent perceptual loss (LPL) of Berrada et al. (ICLR 2025, section 3.2), as the port
its authors reviewed in diffusers (``examples/research_projects/lpl``) computes it with the settings its
README recommends:

- decode the clean-latent estimate ``z0_hat`` (with gradient) and the true latent ``z0`` (without) through
  the frozen autoencoder's decoder, tapping the mid block and each up block;
- outlier masks on the target's up-block features: per sample and channel, keep values inside
  ``(q_2% - 2 std, q_98% + 2 std)``; the mask is dilated (3x3) then eroded (5x5) at full resolution, only
  eroded (3x3) at half resolution; maps too small for a 2% quantile (under 50 pixels) are not masked;
- "shared" normalisation: both feature maps divided by the target's per-pixel norm over channels;
- per layer, the squared error summed over masked pixels over the mask's size, averaged over channels,
  weighted ``2^-min(i, 3)`` (the power law), summed and divided by the number of layers;
- applied only at low noise, ``SNR(t) > snr_threshold`` (3: the port's ``t < 200`` of SDXL's 1,000 steps
  is SNR > 3.06; it selects 20% of the port's steps, 33-37% of ours, where ``t`` is uniform), averaged
  over the selected samples, with weight ``lpl_weight`` beside the diffusion loss (eq. 3), from
  ``lpl_start`` of training on.

Where this departs from the port (issue 52): the weight. Everything above matches the port (``z0_hat``
from the model output with gradient, for eps as ``(z_t - sigma out) / alpha``, for v as ``alpha z_t -
sigma out``, for flow as ``z_t - t out``; the normalisation's epsilon; the mean over kept pixels; the
latent divided by its scale before decoding), and at the port's ``lpl_weight`` 1 LPL carried about a
thousandth of the gradient at the denoiser's weights (0.1-0.5%; at its output, 0.3-1% of the diffusion
loss's on the samples it applies to). Shared normalisation makes LPL a mean over channels of unit-norm
feature differences, so its size is set by the decoder (its width and how far its features move per unit
of latent), not by the weight's name: neither the paper nor the port reports the share of the gradient
their weight gave. The default weight (300) is set, from gradient norms alone (never from FD), where
LPL's gradient at the denoiser's parameters is about the diffusion loss's, the share a weight of 1 gives
between two terms of one size.

The baselines (the diffusion loss alone, LPL through a random decoder, pixel MSE) are in
:mod:`iclrbench.baselines.latent_perceptual_loss`.
"""

from __future__ import annotations

from typing import Any

from iclrbench.core.algorithm import Algorithm, register_algorithm
from iclrbench.envs.latent_perceptual_loss import TASK_ID, LatentDiffusionConfig

QUANTILE = 0.02
STD_MARGIN = 2.0


def _torch() -> Any:
    import torch

    return torch


def outlier_mask(features: Any, full_resolution: bool) -> Any:
    """(B, C, H, W) -> float mask of the values to keep (see the module docstring); all ones when the map
    has fewer than 1 / QUANTILE pixels."""
    torch = _torch()
    b, c, h, w = features.shape
    k = int(h * w * QUANTILE)
    if k < 1:
        return torch.ones_like(features)
    flat = features.reshape(b, c, h * w)
    low = flat.kthvalue(k, dim=-1).values
    high = flat.kthvalue(int(h * w * (1 - QUANTILE)), dim=-1).values
    margin = STD_MARGIN * flat.std(dim=-1)
    keep = ((flat > (low - margin)[..., None]) & (flat < (high + margin)[..., None])).float()
    keep = keep.reshape(b, c, h, w)
    pool = torch.nn.functional.max_pool2d
    if full_resolution:
        keep = pool(keep, 3, stride=1, padding=1)  # closing's dilation
        keep = -pool(-keep, 5, stride=1, padding=2)  # opening's erosion
    else:
        keep = -pool(-keep, 3, stride=1, padding=1)
    return keep


def lpl(prediction: list[Any], target: list[Any]) -> Any:
    """Per-sample LPL (B,) between decoder features of ``z0_hat`` and of ``z0`` (lists, shallow first)."""
    torch = _torch()
    total = 0.0
    for i, (p, t) in enumerate(zip(prediction, target, strict=True)):
        # the up blocks are masked (the last tap is at full resolution), the mid block is not
        mask = outlier_mask(t, full_resolution=i == len(target) - 1) if i >= 1 else torch.ones_like(t)
        t = t * mask
        norm = t.pow(2).sum(1, keepdim=True).sqrt().clamp_min(1e-6)  # the target's norm, shared
        error = ((p / norm - t / norm) ** 2) * mask
        per_channel = error.sum((2, 3)) / mask.sum((2, 3)).clamp_min(1.0)
        total = total + per_channel.mean(1) * 2.0 ** -min(i, 3)
    return total / len(target)


class Recipe(Algorithm):
    """Base: what a recipe adds to the diffusion loss. ``decoder`` is the autoencoder whose decoder the
    extra term runs through (``None``: no extra term)."""

    config: LatentDiffusionConfig
    extra = "none"  # none | features | pixels
    random_decoder = False

    def extra_loss(self, autoencoder: Any, z0_hat: Any, z0: Any) -> Any:
        """Per-sample extra loss (B,) on the selected (low-noise) samples."""
        torch = _torch()
        with torch.no_grad():
            target_image, target_features = autoencoder.decode(z0, features=True)
        image, features = autoencoder.decode(z0_hat, features=True)
        if self.extra == "pixels":
            return (image - target_image).pow(2).mean((1, 2, 3))
        return lpl(features, target_features)


@register_algorithm(task=TASK_ID, name="lpl", role="reference")
class LatentPerceptualLoss(Recipe):
    """Diffusion loss + w * LPL through the frozen decoder at low noise (Berrada et al., ICLR 2025,
    eq. 3 and section 3.2)."""

    extra = "features"
