"""Opacus's own PrivacyEngine, run for a few dozen trainings, gives the same distribution of the test
statistic as the batched game (two-sample Kolmogorov-Smirnov), in both worlds."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import ks_2samp

from iclrbench.core import config as cfg
from iclrbench.envs.dp_hidden_state_audit import Canary, DpAuditConfig, DpSgdGame

RUNS, INSERTIONS, COORDINATE = 40, 40, 3


def opacus_statistic(game: DpSgdGame, canary: Canary | None, seed: int) -> float:
    import torch
    from opacus import PrivacyEngine
    from torch import nn

    c = game.config
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(c.features, c.hidden), nn.ReLU(), nn.Linear(c.hidden, 2))
    with torch.no_grad():
        flat = torch.as_tensor(game.theta0, dtype=torch.float32)
        start = 0
        for p in model.parameters():
            p.copy_(flat[start : start + p.numel()].reshape(p.shape))
            start += p.numel()
    data = torch.utils.data.TensorDataset(
        torch.as_tensor(game.x, dtype=torch.float32), torch.as_tensor(game.y)
    )
    loader = torch.utils.data.DataLoader(data, batch_size=c.batch_size, shuffle=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=c.learning_rate)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, optimizer, loader = PrivacyEngine().make_private(
            module=model,
            optimizer=optimizer,
            data_loader=loader,
            noise_multiplier=game.noise_multiplier,
            max_grad_norm=c.clip,
            poisson_sampling=False,
        )
    params = list(model.parameters())
    accumulate = optimizer.clip_and_accumulate
    state = {"step": 0}

    def accumulate_with_canary() -> None:  # the crafted gradient joins the clipped sum, before the noise
        accumulate()
        if canary is not None and canary.steps[state["step"]]:
            params[0].summed_grad.view(-1)[COORDINATE] += c.clip
        state["step"] += 1

    optimizer.clip_and_accumulate = accumulate_with_canary
    while state["step"] < c.steps:
        for xb, yb in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
            if state["step"] == c.steps:
                break
    return float(game.theta0[COORDINATE] - params[0].detach().view(-1)[COORDINATE])


@pytest.mark.long  # 234 s on 2 cores under make test (2026-12-05): a minute or more, so CI's long tests
def test_batched_game_matches_opacus() -> None:
    config = cfg.build(DpAuditConfig, {"insertions": INSERTIONS, "runs": RUNS})
    game = DpSgdGame(config, np.random.default_rng(0), noise_multiplier=1.5)
    gradient = np.zeros(game.parameters)
    gradient[COORDINATE] = config.clip
    canary = Canary(steps=np.ones(config.steps, dtype=bool), gradient=gradient)
    ours = game.play(canary, np.repeat([True, False], RUNS))
    ours_stat = game.theta0[COORDINATE] - ours[:, COORDINATE]
    for world, mine in (("in", ours_stat[:RUNS]), ("out", ours_stat[RUNS:])):
        theirs = np.array([opacus_statistic(game, canary if world == "in" else None, s) for s in range(RUNS)])
        assert ks_2samp(mine, theirs).pvalue > 0.01, world
        assert abs(mine.mean() - theirs.mean()) < 4 * theirs.std() / np.sqrt(RUNS)
