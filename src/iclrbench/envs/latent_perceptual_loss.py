"""latent-perceptual-loss's world (Berrada et al., ICLR 2025, "Boosting latent diffusion with perceptual
objectives"): small image sets, and the diffusion arithmetic of the three parameterisations the paper
trains with LPL.

Images (1 channel, in [-1, 1]):
- ``digits``: scikit-learn's 1,797 handwritten digits (8x8, shipped with the package), upsampled
  bilinearly to 16x16; 10 classes.
- ``shapes``: a seeded procedural set at 32x32: a disc, a square, a triangle or a cross (the class), of
  random size and place, filled with one of three textures (flat, stripes at a random angle, checks).

Diffusion (section 3 of the paper; ``t`` in (0, 1), 1 = pure noise):
- ``eps`` and ``v``: the variance-preserving cosine schedule ``z_t = alpha z_0 + sigma eps`` with
  ``alpha = cos(pi t / 2)``, ``sigma = sin(pi t / 2)``; the model predicts ``eps`` or
  ``v = alpha eps - sigma z_0``; sampling is deterministic DDIM.
- ``flow``: flow matching ``z_t = (1 - t) z_0 + t eps``, the model predicts the velocity ``eps - z_0``;
  sampling is Euler.
Each parameterisation's estimate of the clean latent from the model output (``z0_hat``) is what LPL
decodes.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

from iclrbench.core.config import param
from iclrbench.core.seeding import rng_for

TASK_ID = "latent-perceptual-loss"
DATASETS = {"digits": (16, 10), "shapes": (32, 4)}  # name -> (image side, classes)
PARAMETERISATIONS = ("eps", "v", "flow")
T_MIN, T_MAX = 1e-3, 1 - 1e-3  # keep alpha and sigma away from 0 (z0_hat divides by alpha)


@dataclasses.dataclass(frozen=True)
class LatentDiffusionConfig:
    dataset: str = param(
        "digits", "digits (16x16, 10 classes) or shapes (32x32, 4 classes)", choices=tuple(DATASETS)
    )
    parameterisation: str = param(
        "eps", "what the denoiser predicts: eps, v (VP cosine schedule) or flow (flow matching)",
        choices=PARAMETERISATIONS,
    )  # fmt: skip
    image_size: int = param(0, "image side the autoencoder was trained at (0: the dataset's own)", low=0)
    train_steps: int = param(2000, "denoiser training steps (AdamW, batch `batch`)", low=1)
    batch: int = param(64, "training batch", low=2)
    lr: float = param(1e-3, "denoiser learning rate (AdamW, weight decay 0.01)", low=0)
    width: int = param(
        48, "denoiser U-Net channels at the latent's resolution (twice that below)", low=8, high=512
    )
    blocks: int = param(1, "denoiser residual blocks per U-Net level", low=1, high=8)
    lpl_weight: float = param(
        300.0,
        "w: the weight of LPL beside the diffusion loss (eq. 3). The port's 1 was set for SDXL's decoder; "
        "here it gives LPL a thousandth of the gradient, so w is set where LPL's gradient at the "
        "denoiser's parameters is about the diffusion loss's (share ~0.5 early in training; issue 52)",
        low=0,
    )
    snr_threshold: float = param(
        3.0,
        "LPL applies only where SNR(t) = alpha^2 / sigma^2 exceeds this (low noise): the port's t < 200 of "
        "SDXL's 1,000 steps is SNR > 3.06, but selects 20% of its steps; with t uniform here SNR > 3 selects "
        "33% (cosine) or 37% (flow) of each batch",
        low=0,
    )
    lpl_start: float = param(0.0, "LPL starts after this fraction of the training steps", low=0, high=1)
    sample_steps: int = param(50, "sampling steps (DDIM for eps and v, Euler for flow)", low=1)
    samples: int = param(1000, "images generated for the metrics (classes in equal shares)", low=20)

    def __post_init__(self) -> None:
        if self.width % 8:
            raise ValueError(f"width {self.width}: a multiple of 8 (the denoiser's group norms)")
        if self.dataset not in DATASETS:  # before the lookup below; the choices check comes after this
            raise ValueError(f"dataset: {self.dataset!r} is not one of {', '.join(DATASETS)}")
        side = DATASETS[self.dataset][0]
        if self.image_size not in (0, side):
            raise ValueError(
                f"image_size {self.image_size}: the {self.dataset} autoencoder takes {side}x{side} images"
            )

    @property
    def side(self) -> int:
        return DATASETS[self.dataset][0]

    @property
    def classes(self) -> int:
        return DATASETS[self.dataset][1]


# ------------------------------------------------------------------------------------------------ images
@dataclasses.dataclass(frozen=True)
class Images:
    train: np.ndarray  # (n, 1, side, side) float32 in [-1, 1]
    train_labels: np.ndarray
    test: np.ndarray
    test_labels: np.ndarray


def _upsample(images: np.ndarray, side: int) -> np.ndarray:
    """Bilinear resize of (n, h, w) to (n, side, side), pixel centres aligned (no torch needed)."""
    _, h, w = images.shape
    ys = np.clip((np.arange(side) + 0.5) * h / side - 0.5, 0, h - 1)
    xs = np.clip((np.arange(side) + 0.5) * w / side - 0.5, 0, w - 1)
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1, x1 = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
    fy, fx = (ys - y0)[None, :, None], (xs - x0)[None, None, :]
    top = images[:, y0][:, :, x0] * (1 - fx) + images[:, y0][:, :, x1] * fx
    bottom = images[:, y1][:, :, x0] * (1 - fx) + images[:, y1][:, :, x1] * fx
    return top * (1 - fy) + bottom * fy


def _shape(kind: int, rng: np.random.Generator, side: int) -> np.ndarray:
    yy, xx = np.mgrid[0:side, 0:side] + 0.5
    r = rng.uniform(0.22, 0.38) * side
    cy, cx = rng.uniform(r, side - r, size=2)
    dy, dx = (yy - cy) / r, (xx - cx) / r
    if kind == 0:  # disc
        inside = dy**2 + dx**2 <= 1
    elif kind == 1:  # square
        inside = (np.abs(dy) <= 0.8) & (np.abs(dx) <= 0.8)
    elif kind == 2:  # triangle, apex up
        inside = (dy <= 0.8) & (dy >= -1 + 1.8 * np.abs(dx))
    else:  # cross
        inside = ((np.abs(dy) <= 0.3) & (np.abs(dx) <= 1)) | ((np.abs(dx) <= 0.3) & (np.abs(dy) <= 1))
    texture = rng.integers(3)
    if texture == 0:
        fill = np.ones_like(yy)
    elif texture == 1:
        angle = rng.uniform(0, np.pi)
        fill = 0.6 + 0.4 * np.sign(np.sin((yy * np.cos(angle) + xx * np.sin(angle)) * 2 * np.pi / 4))
    else:
        fill = 0.6 + 0.4 * np.sign(np.sin(yy * np.pi / 3) * np.sin(xx * np.pi / 3))
    return np.where(inside, fill, 0.0) * 2 - 1


@functools.cache
def load_images(dataset: str) -> Images:
    """The dataset's fixed train / test split (the same for every run: the autoencoder, evaluator and
    denoisers all learn from ``train``; the metrics compare samples with ``test``)."""
    rng = rng_for(0, TASK_ID, dataset, "images")
    if dataset == "digits":
        from sklearn.datasets import load_digits

        digits = load_digits()
        x = _upsample(digits.images / 16.0, 16) * 2 - 1
        y = digits.target
    elif dataset == "shapes":
        n, side = 4000, DATASETS["shapes"][0]
        y = rng.integers(4, size=n)
        x = np.stack([_shape(int(k), rng, side) for k in y])
    else:
        raise ValueError(f"dataset: one of {', '.join(DATASETS)}, not {dataset!r}")
    order = rng.permutation(len(y))
    x, y = x[order].astype(np.float32)[:, None], y[order].astype(np.int64)
    cut = int(0.8 * len(y))
    return Images(x[:cut], y[:cut], x[cut:], y[cut:])


# ---------------------------------------------------------------------------------------- diffusion maths
def alpha_sigma(t: Any, parameterisation: str) -> tuple[Any, Any]:
    """Signal and noise scales of ``z_t = alpha z_0 + sigma eps`` (torch or numpy ``t``)."""
    if parameterisation == "flow":
        return 1 - t, t
    lib = np if isinstance(t, np.ndarray | float) else _torch()
    return lib.cos(t * np.pi / 2), lib.sin(t * np.pi / 2)


def snr(t: Any, parameterisation: str) -> Any:
    a, s = alpha_sigma(t, parameterisation)
    return a**2 / s**2


def target(z0: Any, noise: Any, t: Any, parameterisation: str) -> Any:
    """What the denoiser is trained to predict."""
    a, s = alpha_sigma(t, parameterisation)
    if parameterisation == "eps":
        return noise
    if parameterisation == "v":
        return a * noise - s * z0
    return noise - z0  # flow: the velocity d z_t / d t


def z0_estimate(zt: Any, output: Any, t: Any, parameterisation: str) -> Any:
    """The clean latent implied by the model output (what LPL decodes)."""
    a, s = alpha_sigma(t, parameterisation)
    if parameterisation == "eps":
        return (zt - s * output) / a
    if parameterisation == "v":
        return a * zt - s * output  # alpha^2 + sigma^2 = 1
    return zt - t * output


def eps_estimate(zt: Any, output: Any, t: Any, parameterisation: str) -> Any:
    a, s = alpha_sigma(t, parameterisation)
    if parameterisation == "eps":
        return output
    if parameterisation == "v":
        return s * zt + a * output
    return zt + (1 - t) * output


def sample(
    model: Any,
    shape: tuple[int, ...],
    labels: Any,
    config: LatentDiffusionConfig,
    noise: Any,
    clip: float | None = None,
) -> Any:
    """Latents from pure ``noise``: deterministic DDIM (eps, v) or Euler (flow) over ``sample_steps``
    uniform steps from T_MAX to 0, conditioned on ``labels``. DDIM clips its clean-latent estimate to
    ``[-clip, clip]`` (the training latents' range), as DDIM samplers clip x0 to the data range: near
    t = 1, eps-prediction divides by alpha ~ 0.002 and an unclipped estimate sends the chain astray."""
    torch = _torch()
    p = config.parameterisation
    grid = torch.linspace(T_MAX, 0.0, config.sample_steps + 1)
    z = noise
    with torch.no_grad():
        for i in range(config.sample_steps):
            t, s = grid[i], grid[i + 1]
            tt = t.expand(shape[0])
            out = model(z, tt, labels)
            if p == "flow":
                z = z - (t - s) * out
            else:
                z0 = z0_estimate(z, out, t, p)
                eps = eps_estimate(z, out, t, p)
                if clip is not None:
                    z0 = z0.clamp(-clip, clip)
                    a, sg = alpha_sigma(t, p)
                    eps = (z - a * z0) / sg  # the noise consistent with the clipped estimate
                a, sg = alpha_sigma(s, p)
                z = a * z0 + sg * eps
    return z


def _torch() -> Any:
    import torch

    return torch
