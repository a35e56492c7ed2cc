"""latent-perceptual-loss's networks: the convolutional autoencoder whose decoder LPL taps, the latent
denoiser, and the evaluator whose features define the Frechet distance. The autoencoder and the evaluator
are trained once per dataset (seeded), frozen, and cached as tensors-only state dicts under a file lock.

- :class:`Autoencoder`: encoder 1 -> 16 -> 32 -> 32 channels, two stride-2 convolutions, to a 4-channel
  latent of side/4; decoder ``conv_in`` -> ``mid`` (a residual block) -> ``up1``, ``up2`` (nearest 2x
  upsampling, convolution, residual block) -> ``conv_out``. :meth:`Autoencoder.decode` can return the
  outputs of ``mid``, ``up1`` and ``up2``: the features LPL compares. Latents are scaled to unit standard
  deviation over the training set (``scale``), as latent diffusion scales its VAE's latents.
- :class:`Denoiser`: a two-level U-Net over the latent (4x4 -> 2x2 for digits, 8x8 -> 4x4 for shapes),
  conditioned on ``t`` (sinusoidal features, an MLP) and the class (an embedding) by a per-block shift.
- :class:`Evaluator`: a small CNN classifier; its 64 penultimate features are the space of the Frechet
  distance and of precision / recall.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import numpy as np

from iclrbench.core.cache import build_once, cache_root
from iclrbench.core.seeding import seed_for
from iclrbench.envs.latent_perceptual_loss import TASK_ID, Images, load_images


def _nn() -> Any:
    import torch
    from torch import nn

    class ResBlock(nn.Module):
        def __init__(self, channels: int, cond: int = 0) -> None:
            super().__init__()
            self.norm1 = nn.GroupNorm(8, channels)
            self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
            self.norm2 = nn.GroupNorm(8, channels)
            self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
            self.cond = nn.Linear(cond, channels) if cond else None

        def forward(self, x: torch.Tensor, c: torch.Tensor | None = None) -> torch.Tensor:
            h = self.conv1(nn.functional.silu(self.norm1(x)))
            if self.cond is not None and c is not None:
                h = h + self.cond(c)[:, :, None, None]
            return x + self.conv2(nn.functional.silu(self.norm2(h)))

    class Autoencoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.Sequential(
                nn.Conv2d(1, 16, 3, padding=1), nn.SiLU(),
                nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.SiLU(),
                nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.SiLU(),
                ResBlock(32), nn.Conv2d(32, 4, 1),
            )  # fmt: skip
            self.conv_in = nn.Conv2d(4, 32, 3, padding=1)
            self.mid = ResBlock(32)
            self.up1 = nn.Sequential(
                nn.Upsample(scale_factor=2), nn.Conv2d(32, 32, 3, padding=1), ResBlock(32)
            )
            self.up2 = nn.Sequential(
                nn.Upsample(scale_factor=2), nn.Conv2d(32, 16, 3, padding=1), ResBlock(16)
            )
            self.conv_out = nn.Sequential(nn.GroupNorm(8, 16), nn.SiLU(), nn.Conv2d(16, 1, 3, padding=1))
            self.register_buffer("scale", torch.ones(()))

        def encode(self, x: torch.Tensor) -> torch.Tensor:
            return self.encoder(x) * self.scale

        def decode(self, z: torch.Tensor, features: bool = False) -> Any:
            mid = self.mid(self.conv_in(z / self.scale))
            up1 = self.up1(mid)
            up2 = self.up2(up1)
            image = self.conv_out(up2)
            return (image, [mid, up1, up2]) if features else image

    class Denoiser(nn.Module):
        """A two-level U-Net: ``blocks`` residual blocks at the latent's resolution (width ``w``), a
        stride-2 down-sampling to ``2w`` channels and ``blocks`` blocks there, nearest up-sampling, the
        skip connection concatenated, and ``blocks`` blocks at full resolution again."""

        def __init__(self, classes: int, width: int, blocks: int) -> None:
            super().__init__()
            w = self.width = width
            self.time = nn.Sequential(nn.Linear(w, w), nn.SiLU(), nn.Linear(w, w))
            self.label = nn.Embedding(classes, w)
            self.conv_in = nn.Conv2d(4, w, 3, padding=1)
            self.down_blocks = nn.ModuleList(ResBlock(w, w) for _ in range(blocks))
            self.down = nn.Conv2d(w, 2 * w, 3, stride=2, padding=1)
            self.mid_blocks = nn.ModuleList(ResBlock(2 * w, w) for _ in range(blocks))
            self.up = nn.Sequential(nn.Upsample(scale_factor=2), nn.Conv2d(2 * w, 2 * w, 3, padding=1))
            self.merge = nn.Conv2d(3 * w, w, 1)
            self.up_blocks = nn.ModuleList(ResBlock(w, w) for _ in range(blocks))
            self.conv_out = nn.Sequential(nn.GroupNorm(8, w), nn.SiLU(), nn.Conv2d(w, 4, 3, padding=1))

        def forward(self, z: torch.Tensor, t: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            half = self.width // 2
            freqs = torch.exp(-math.log(1000.0) * torch.arange(half) / half)
            angles = 1000.0 * t[:, None] * freqs[None]
            c = self.time(torch.cat([angles.sin(), angles.cos()], 1)) + self.label(labels)
            h = self.conv_in(z)
            for block in self.down_blocks:
                h = block(h, c)
            skip, h = h, self.down(h)
            for block in self.mid_blocks:
                h = block(h, c)
            h = self.merge(torch.cat([self.up(h), skip], 1))
            for block in self.up_blocks:
                h = block(h, c)
            return self.conv_out(h)

    class Evaluator(nn.Module):
        def __init__(self, classes: int, side: int) -> None:
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(1, 32, 3, stride=2, padding=1), nn.ReLU(),
                nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
                nn.Flatten(), nn.Linear(64 * (side // 4) ** 2, 64), nn.ReLU(),
            )  # fmt: skip
            self.head = nn.Linear(64, classes)

        def features(self, x: torch.Tensor) -> torch.Tensor:
            return self.body(x)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.body(x))

    return Autoencoder, Denoiser, Evaluator


def make_autoencoder() -> Any:
    return _nn()[0]()


def make_denoiser(classes: int, width: int, blocks: int) -> Any:
    return _nn()[1](classes, width, blocks)


def make_evaluator(classes: int, side: int) -> Any:
    return _nn()[2](classes, side)


# ------------------------------------------------------------------------------------------------ training
def _batches(n: int, batch: int, steps: int, rng: np.random.Generator) -> Any:
    for _ in range(steps):
        yield rng.integers(n, size=batch)


def train_autoencoder(images: Images, seed: int = 0, steps: int = 1500) -> Any:
    """MSE reconstruction (AdamW, lr 2e-3, batch 64) with a small latent L2 penalty, then the latent
    scale set to 1 / std over the training set."""
    import torch

    torch.manual_seed(seed_for(seed, TASK_ID, "autoencoder") % 2**63)
    model = make_autoencoder()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.0)
    x = torch.from_numpy(images.train)
    for index in _batches(len(x), 64, steps, np.random.default_rng(seed_for(seed, TASK_ID, "ae-batches"))):
        batch = x[index]
        z = model.encoder(batch)
        loss = torch.nn.functional.mse_loss(model.decode(z), batch) + 1e-4 * z.pow(2).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        model.scale.fill_(1.0 / float(model.encoder(x).std()))
    return model.eval()


def train_evaluator(images: Images, classes: int, side: int, seed: int = 0, steps: int = 1500) -> Any:
    """Cross-entropy (AdamW, lr 2e-3, batch 64), light random shifts as augmentation."""
    import torch

    torch.manual_seed(seed_for(seed, TASK_ID, "evaluator") % 2**63)
    model = make_evaluator(classes, side)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
    x, y = torch.from_numpy(images.train), torch.from_numpy(images.train_labels)
    rng = np.random.default_rng(seed_for(seed, TASK_ID, "evaluator-batches"))
    for index in _batches(len(x), 64, steps, rng):
        dy, dx = (int(v) for v in rng.integers(-1, 2, size=2))
        batch = torch.roll(x[index], shifts=(dy, dx), dims=(2, 3))
        loss = torch.nn.functional.cross_entropy(model(batch), y[index])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return model.eval()


def _cached(name: str, build: Any, make: Any) -> Any:
    """``make()`` loaded with the state dict cached under ``name``, built by ``build()`` once (file lock:
    parallel runs wait for one build; tensors only on load: no pickled code runs)."""
    import torch

    path = build_once(
        cache_root() / TASK_ID / f"{name}.pt", lambda tmp: torch.save(build().state_dict(), tmp)
    )
    model = make()
    model.load_state_dict(torch.load(path, weights_only=True))
    return model.eval().requires_grad_(False)


def _key(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:12]


#: bump when the networks or their training change: cached weights of another version are not reused
NETS_VERSION = 1


def autoencoder(dataset: str) -> Any:
    """The dataset's frozen autoencoder (trained once, cached)."""
    images = load_images(dataset)
    return _cached(
        f"autoencoder-{dataset}-{_key(NETS_VERSION)}", lambda: train_autoencoder(images), make_autoencoder
    )


def random_decoder_autoencoder(dataset: str, seed: int) -> Any:
    """The control: the same architecture, randomly initialised (seeded), with the trained autoencoder's
    latent scale so the same latents go in."""
    import torch

    torch.manual_seed(seed_for(seed, TASK_ID, "random-decoder") % 2**63)
    model = make_autoencoder().eval().requires_grad_(False)
    model.scale.copy_(autoencoder(dataset).scale)
    return model


def evaluator(dataset: str, classes: int, side: int) -> Any:
    """The dataset's frozen evaluator (trained once, cached)."""
    images = load_images(dataset)
    return _cached(
        f"evaluator-{dataset}-{_key(NETS_VERSION)}",
        lambda: train_evaluator(images, classes, side),
        lambda: make_evaluator(classes, side),
    )


def cache_path(dataset: str) -> Path:
    return cache_root() / TASK_ID / dataset
