"""The batched DP-SGD game: exact clipped gradients, invariants, determinism, Opacus agreement."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclrbench.core import config as cfg
from iclrbench.envs.dp_hidden_state_audit import Canary, DpAuditConfig, DpSgdGame, make_model


def game(**overrides: object) -> DpSgdGame:
    return DpSgdGame(cfg.build(DpAuditConfig, {"runs": 10, **overrides}), np.random.default_rng(0), 2.0)


@pytest.mark.parametrize("model", ["mlp", "logreg"])
def test_clipped_gradient_sum_matches_autograd_per_example(model: str) -> None:
    config = cfg.build(DpAuditConfig, {"model": model})
    net = make_model(config)
    rng = np.random.default_rng(0)
    theta = torch.as_tensor(rng.normal(size=(3, net.size)), dtype=torch.float64)
    x = torch.as_tensor(rng.normal(size=(7, config.features)))
    y = torch.as_tensor(rng.integers(0, 2, size=7))
    for clip in (0.05, 1.0, 100.0):
        ours = net.clipped_gradient_sum(theta, x, y.double(), clip)
        for run in range(3):
            expected = torch.zeros(net.size, dtype=torch.float64)
            for b in range(7):
                t = theta[run : run + 1].clone().requires_grad_(True)
                net.loss(t, x[b : b + 1], y[b : b + 1]).sum().backward()
                g = t.grad[0]
                expected += g * min(1.0, clip / float(g.norm()))
            assert torch.allclose(ours[run], expected, atol=1e-10)


def test_without_noise_or_canary_every_run_is_identical() -> None:
    g = game(insertions=5)
    final = g.play(None, np.array([True, False, True]), noise=False)
    assert np.allclose(final, final[0]) and not np.allclose(final[0], g.theta0)


def test_canary_moves_only_member_runs() -> None:
    g = game(insertions=3, model="logreg")
    gradient = np.zeros(g.parameters)
    gradient[0] = g.config.clip
    canary = Canary(steps=np.ones(g.config.steps, dtype=bool), gradient=gradient)
    final = g.play(canary, np.array([True, False]), noise=False)
    assert final[0, 0] < final[1, 0]


def test_same_seed_same_trainings() -> None:
    members = np.repeat([True, False], 4)
    a, b = game(insertions=4).play(None, members), game(insertions=4).play(None, members)
    assert np.array_equal(a, b) and not np.allclose(a[0], a[1])


def test_known_batches_cycle_through_the_data() -> None:
    g = game(n_data=128, batch_size=64)
    assert np.array_equal(g.batch(0)[0], g.batch(2)[0]) and not np.array_equal(g.batch(0)[0], g.batch(1)[0])
