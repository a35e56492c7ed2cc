"""Speed of one denoiser training step (batch 64, digits latents 4x4x4, eps-prediction) with and without the
latent perceptual loss, side by side; ``extra_info`` holds LPL's overhead ratio. The LPL step decodes the
low-noise share of the batch twice (with gradient for z0_hat, without for z0) through the frozen decoder
and backpropagates through it: that is the paper's extra cost."""

from __future__ import annotations

import numpy as np
import pytest

from iclrbench.algorithms.latent_perceptual_loss import LatentPerceptualLoss
from iclrbench.baselines.latent_perceptual_loss import DiffusionOnly
from iclrbench.envs import latent_perceptual_loss as env

torch = pytest.importorskip("torch")
FIGURES: dict[str, float] = {}


@pytest.fixture(scope="module")
def setup() -> dict:
    from iclrbench.algorithms.latent_perceptual_loss import nets as latent_nets

    config = env.LatentDiffusionConfig()
    ae = latent_nets.autoencoder("digits")
    images = env.load_images("digits")
    with torch.no_grad():
        latents = ae.encode(torch.from_numpy(images.train[:64]))
    torch.manual_seed(0)
    model = latent_nets.make_denoiser(config.classes, config.width, config.blocks)
    labels = torch.from_numpy(images.train_labels[:64])
    t = torch.linspace(0.01, 0.99, 64)  # the same noise levels for both: a third is at SNR > 3
    return {"config": config, "ae": ae, "z0": latents, "labels": labels, "model": model, "t": t}


def _step(setup: dict, recipe: object) -> float:
    config, model, z0, t = setup["config"], setup["model"], setup["z0"], setup["t"]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)  # the step's work, weights unchanged
    noise = torch.randn(z0.shape, generator=torch.Generator().manual_seed(0))
    a, s = env.alpha_sigma(t[:, None, None, None], "eps")
    zt = a * z0 + s * noise
    output = model(zt, t, setup["labels"])
    loss = (output - noise).pow(2).mean()
    if recipe.extra != "none":
        chosen = env.snr(t, "eps") > config.snr_threshold
        z0_hat = env.z0_estimate(zt[chosen], output[chosen], t[chosen, None, None, None], "eps")
        loss = loss + config.lpl_weight * recipe.extra_loss(setup["ae"], z0_hat, z0[chosen]).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def test_training_step_without_lpl(benchmark, setup, single_thread) -> None:  # type: ignore[no-untyped-def]
    benchmark.group = "latent-perceptual-loss: one training step, batch 64"
    recipe = DiffusionOnly(None, setup["config"], np.random.default_rng(0))
    assert np.isfinite(benchmark(_step, setup, recipe))
    if benchmark.stats:
        FIGURES["plain"] = benchmark.stats.stats.median


def test_training_step_with_lpl(benchmark, setup, single_thread) -> None:  # type: ignore[no-untyped-def]
    benchmark.group = "latent-perceptual-loss: one training step, batch 64"
    recipe = LatentPerceptualLoss(None, setup["config"], np.random.default_rng(0))
    assert np.isfinite(benchmark(_step, setup, recipe))
    if benchmark.stats and FIGURES.get("plain"):
        benchmark.extra_info["lpl / plain"] = round(benchmark.stats.stats.median / FIGURES["plain"], 2)
