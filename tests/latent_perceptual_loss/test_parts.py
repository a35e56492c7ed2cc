"""latent-perceptual-loss's parts: the diffusion arithmetic of each parameterisation (exact inverses, an
oracle sampler recovering a known Gaussian), LPL's masks and normalisation, the image metrics on known
answers, the image sets, and bad configs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclrbench.algorithms.latent_perceptual_loss import lpl, outlier_mask
from iclrbench.envs import latent_perceptual_loss as env
from iclrbench.models.image_metrics import frechet_distance, precision_recall

torch = pytest.importorskip("torch")


@settings(max_examples=30, deadline=None)
@given(p=st.sampled_from(env.PARAMETERISATIONS), t=st.floats(0.01, 0.99), seed=st.integers(0, 1000))
def test_a_perfect_prediction_gives_back_the_clean_latent_and_the_noise(p: str, t: float, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    z0, noise = torch.randn(8, 4, 4, 4, generator=gen), torch.randn(8, 4, 4, 4, generator=gen)
    tt = torch.full((8, 1, 1, 1), t)
    a, s = env.alpha_sigma(tt, p)
    zt = a * z0 + s * noise
    output = env.target(z0, noise, tt, p)
    torch.testing.assert_close(env.z0_estimate(zt, output, tt, p), z0, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(env.eps_estimate(zt, output, tt, p), noise, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("p", env.PARAMETERISATIONS)
def test_snr_falls_with_t_and_the_default_threshold_selects_low_noise(p: str) -> None:
    t = np.linspace(0.01, 0.99, 99)
    ratio = env.snr(t, p)
    assert (np.diff(ratio) < 0).all()
    low_noise = t[ratio > 3.0]
    assert low_noise.max() < 0.4  # SNR 3 is past a third of the way from clean to noise


@pytest.mark.parametrize("p", env.PARAMETERISATIONS)
def test_the_sampler_with_the_exact_denoiser_of_gaussian_data_draws_that_gaussian(p: str) -> None:
    mean, var = 2.0, 0.25

    def oracle(z: object, t: object, labels: object) -> object:
        a, s = env.alpha_sigma(t[:, None, None, None], p)
        z0 = mean + a * var / (a**2 * var + s**2) * (z - a * mean)
        eps = (z - a * z0) / s
        return {"eps": eps, "v": a * eps - s * z0, "flow": eps - z0}[p]

    config = env.LatentDiffusionConfig(parameterisation=p, sample_steps=50)
    noise = torch.randn(2000, 4, 4, 4, generator=torch.Generator().manual_seed(0))
    out = env.sample(oracle, (2000, 4, 4, 4), None, config, noise, clip=10.0)
    # 50 steps of a deterministic sampler shrink the spread a little (discretisation error)
    assert abs(float(out.mean()) - mean) < 0.01 and abs(float(out.std()) - var**0.5) < 0.03


def test_the_outlier_mask_drops_a_planted_outlier_region_and_keeps_the_rest() -> None:
    features = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    features[0, 1, 6:10, 6:10] = 1e3  # 16 pixels: under the 2% (20 pixels) the quantiles leave out
    features[1, 0, 3, 3] = 1e3  # a lone pixel: the closing's dilation takes it back, as in the port
    mask = outlier_mask(features, full_resolution=True)
    assert (mask[0, 1, 6:10, 6:10] == 0).all() and mask[1, 0, 3, 3] == 1.0
    assert mask[0, 1].mean() < mask[0, 0].mean() and mask.mean() > 0.8
    assert set(torch.unique(mask).tolist()) <= {0.0, 1.0}
    assert torch.equal(outlier_mask(torch.randn(1, 2, 4, 4), True), torch.ones(1, 2, 4, 4))  # too small


@settings(max_examples=20, deadline=None)
@given(scale=st.floats(0.1, 10.0), seed=st.integers(0, 100))
def test_lpl_is_zero_at_the_target_positive_elsewhere_and_scale_free(scale: float, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    target = [torch.randn(2, 8, 4, 4, generator=gen), torch.randn(2, 8, 8, 8, generator=gen)]
    target.append(torch.randn(2, 8, 16, 16, generator=gen))
    prediction = [t + 0.3 * torch.randn(t.shape, generator=gen) for t in target]
    assert torch.equal(lpl(target, target), torch.zeros(2))
    value = lpl(prediction, target)
    assert (value > 0).all()
    # the shared normalisation and the quantile masks make it blind to a common scale of the features
    scaled = lpl([scale * p for p in prediction], [scale * t for t in target])
    torch.testing.assert_close(scaled, value, rtol=1e-3, atol=1e-6)


def test_frechet_distance_and_precision_recall_on_known_answers() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(size=(4000, 5))
    assert frechet_distance(a, a) == pytest.approx(0.0, abs=1e-6)
    shifted = a + np.array([1.0, 2.0, 0, 0, 0])
    assert frechet_distance(shifted, a) == pytest.approx(5.0, rel=1e-6)  # same covariance: |mu|^2
    wider = rng.normal(size=(4000, 5)) * 2.0
    # N(0, 4I) vs N(0, I): tr(4I + I - 2 (4I)^(1/2)) = (4 + 1 - 4) x 5 dimensions = 5
    assert frechet_distance(wider, rng.normal(size=(4000, 5))) == pytest.approx(5.0, rel=0.1)
    assert precision_recall(a[:500], a[:500]) == (1.0, 1.0)
    assert precision_recall(a[:500], a[:500] + 100.0) == (0.0, 0.0)


@pytest.mark.parametrize("dataset", list(env.DATASETS))
def test_the_image_sets_are_fixed_and_in_range(dataset: str) -> None:
    images = env.load_images(dataset)
    side, classes = env.DATASETS[dataset]
    assert images.train.shape[1:] == (1, side, side) and images.test.shape[1:] == (1, side, side)
    assert images.train.min() >= -1 and images.train.max() <= 1
    assert set(np.unique(images.train_labels)) == set(range(classes))
    env.load_images.cache_clear()
    assert np.array_equal(env.load_images(dataset).test, images.test)


def test_bad_configs_are_one_line_errors() -> None:
    with pytest.raises(ValueError, match="autoencoder takes 16x16"):
        env.LatentDiffusionConfig(image_size=32)
    assert env.LatentDiffusionConfig(dataset="shapes", image_size=32).side == 32
    with pytest.raises(ValueError, match="multiple of 8"):
        env.LatentDiffusionConfig(width=12)
