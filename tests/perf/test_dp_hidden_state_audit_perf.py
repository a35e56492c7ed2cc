"""Speed of dp-hidden-state-audit's hot path: 2 x 1000 DP-SGD trainings of the 112-parameter MLP, 250 steps,
as one batched computation, against one training through Opacus's own engine
(``../shared/peers/opacus_audit_run.py``'s loop). ``make perf`` prints both; the note gives the ratio
per training."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from iclrbench.benchmarks.dp_hidden_state_audit import noise_multiplier
from iclrbench.core import config as cfg
from iclrbench.envs.dp_hidden_state_audit import DpAuditConfig, DpSgdGame

pytestmark = pytest.mark.usefixtures("single_thread")


def test_ours_2x1000_runs_250_steps(benchmark) -> None:  # type: ignore[no-untyped-def]
    config = cfg.build(DpAuditConfig, {"runs": 1000})
    game = DpSgdGame(config, np.random.default_rng(0), noise_multiplier(config))
    members = np.repeat([True, False], config.runs)
    benchmark.group = "dp-audit 250 steps, 112 parameters"
    final = benchmark.pedantic(game.play, args=(None, members), rounds=2, iterations=1)
    assert final.shape == (2000, 112) and np.isfinite(final).all()
    benchmark.extra_info["trainings_per_call"] = 2000


def test_opacus_one_run(benchmark) -> None:  # type: ignore[no-untyped-def]
    import torch
    from opacus import PrivacyEngine
    from torch import nn

    def one_run(seed: int) -> int:
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(512, 8, generator=g)
        y = (x[:, 0] > 0).long()
        model = nn.Sequential(nn.Linear(8, 10), nn.ReLU(), nn.Linear(10, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model, opt, loader = PrivacyEngine().make_private(
                module=model,
                optimizer=opt,
                data_loader=loader,
                noise_multiplier=1.0,
                max_grad_norm=1.0,
                poisson_sampling=False,
            )
        steps = 0
        while steps < 250:
            for xb, yb in loader:
                opt.zero_grad()
                nn.functional.cross_entropy(model(xb), yb).backward()
                opt.step()
                steps += 1
                if steps == 250:
                    break
        return steps

    benchmark.group = "dp-audit 250 steps, 112 parameters"
    assert benchmark.pedantic(one_run, args=(0,), rounds=2, iterations=1) == 250
    benchmark.extra_info["trainings_per_call"] = 1
