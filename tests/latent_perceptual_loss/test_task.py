"""latent-perceptual-loss through the runner and the CLI at smoke: every metric, the recipes sharing one
seed's training stream (LPL at weight 0 is the diffusion-only run), determinism, LPL's gradient reaching
the denoiser, an image size its autoencoder does not take refused, and the claim judges saying yes, no and
inconclusive."""

from __future__ import annotations

import numpy as np
import pytest

from iclrbench.benchmarks.latent_perceptual_loss import (
    LatentPerceptualLossTask,
    judge_control,
    judge_lowers_fd,
    judge_overhead,
)
from iclrbench.core.result import RunResult
from iclrbench.testing import evaluate_once, fake_runs
from tests.conftest import Refused

TASK = "latent-perceptual-loss"
if LatentPerceptualLossTask.unavailable():
    pytest.skip(LatentPerceptualLossTask.unavailable() or "", allow_module_level=True)
DECLARED = {m.name for m in LatentPerceptualLossTask.metrics}
MEASURED = {"step_ms", "seconds"}


@pytest.fixture(scope="module")
def outcomes() -> dict[str, RunResult]:
    return {name: evaluate_once(TASK, name) for name in ("lpl", "no-lpl", "lpl-random-decoder", "pixel-mse")}


def test_runs_report_every_declared_metric_in_range(outcomes: dict[str, RunResult]) -> None:
    for name, outcome in outcomes.items():
        m = outcome.metrics
        assert set(m) == DECLARED, name
        assert m["fd"] >= 0 and 0 <= m["precision"] <= 1 and 0 <= m["recall"] <= 1, name
        assert 0 <= m["sample_accuracy"] <= 1 and m["evaluator_accuracy"] > 0.9, name
        assert m["step_ms"] > 0 and np.isfinite(m["final_loss"]), name
    assert outcomes["no-lpl"].metrics["lpl_share"] == 0.0
    assert 0 < outcomes["lpl"].metrics["lpl_share"] < 1


def test_every_run_carries_the_frozen_networks_quality_in_its_provenance(
    outcomes: dict[str, RunResult],
) -> None:
    for name, outcome in outcomes.items():
        artifacts = outcome.provenance["artifacts"]
        assert set(artifacts) == {"autoencoder (digits)", "evaluator (digits)"}, name
        ae, ev = artifacts["autoencoder (digits)"], artifacts["evaluator (digits)"]
        assert 0 < ae["figures"]["mse"] <= 0.002 and ae["floors"] == ["mse <= 0.002"], name
        assert ev["figures"]["accuracy"] == pytest.approx(outcome.metrics["evaluator_accuracy"]), name
        assert "steps" in ae["trained"] and ev["tolerance"] == {"accuracy": 0.01}, name


def test_lpl_at_weight_zero_is_the_diffusion_only_run(outcomes: dict[str, RunResult]) -> None:
    """The seed fixes initial weights, batches, times, noise and sampling noise for every recipe."""
    silent = evaluate_once(TASK, "lpl", lpl_weight=0.0)
    for key, value in outcomes["no-lpl"].metrics.items():
        if key not in MEASURED | {"lpl_share"}:
            assert silent.metrics[key] == pytest.approx(value, rel=1e-6), key
    assert outcomes["lpl"].metrics["fd"] != outcomes["no-lpl"].metrics["fd"]


def test_the_same_seed_gives_the_same_run(outcomes: dict[str, RunResult]) -> None:
    again = evaluate_once(TASK, "lpl")
    for key, value in outcomes["lpl"].metrics.items():
        if key not in MEASURED:
            assert again.metrics[key] == value, key


def test_lpl_sends_a_gradient_through_the_frozen_decoder() -> None:
    import torch

    from iclrbench.algorithms.latent_perceptual_loss import LatentPerceptualLoss
    from iclrbench.algorithms.latent_perceptual_loss import nets as latent_nets

    ae = latent_nets.autoencoder("digits")
    recipe = LatentPerceptualLoss(None, None, np.random.default_rng(0))
    z0 = torch.randn(4, 4, 4, 4, generator=torch.Generator().manual_seed(0))
    z0_hat = (z0 + 0.3 * torch.randn(4, 4, 4, 4)).requires_grad_(True)
    recipe.extra_loss(ae, z0_hat, z0).sum().backward()
    assert z0_hat.grad is not None and z0_hat.grad.abs().sum() > 0
    assert all(p.grad is None for p in ae.parameters())  # the autoencoder stays frozen


def test_an_image_size_the_autoencoder_does_not_take_is_refused(refused: Refused) -> None:
    error = refused("run", TASK, "lpl", "--set", "image_size=32", "--budget", "smoke", "--seeds", "0")
    assert "autoencoder takes 16x16" in error


# ------------------------------------------------------------------------------------------------ judges
def _runs(algorithm: str, p: str, metric: str, values: list[float]) -> list[RunResult]:
    runs = fake_runs(TASK, algorithm, range(5), {}, config={"parameterisation": p})
    for r, v in zip(runs, values, strict=True):
        r.metrics.update({metric: v, "sample_accuracy": 0.9, "lpl_share": 0.3})
    return runs


def _fd_groups(lpl: list[float], base: list[float]) -> list[list[RunResult]]:
    return [
        runs
        for p in ("eps", "v", "flow")
        for runs in (_runs("lpl", p, "fd", lpl), _runs("no-lpl", p, "fd", base))
    ]


def test_the_fd_judge_says_yes_no_and_inconclusive() -> None:
    base = [60.0, 62.0, 58.0, 61.0, 59.0]
    verdict, measured = judge_lowers_fd(_fd_groups([v - 5 for v in base], base))
    assert verdict == "reproduced" and measured["paired_bootstrap_95"]["v"] == [-5.0, -5.0]
    assert judge_lowers_fd(_fd_groups([v + 5 for v in base], base))[0] == "not_reproduced"
    noisy = [v + d for v, d in zip(base, (-3.0, 3.0, -2.0, 2.0, 0.5), strict=True)]
    assert judge_lowers_fd(_fd_groups(noisy, base))[0] == "inconclusive"
    assert judge_lowers_fd([])[0] == "inconclusive"


def test_the_control_and_overhead_judges() -> None:
    base = [60.0, 62.0, 58.0, 61.0, 59.0]
    same = [[*_runs("lpl-random-decoder", "eps", "fd", base)], _runs("no-lpl", "eps", "fd", base)]
    assert judge_control(same)[0] == "reproduced"  # no gain: not lower by 10%
    helps = [
        _runs("lpl-random-decoder", "eps", "fd", [v * 0.5 for v in base]),
        _runs("no-lpl", "eps", "fd", base),
    ]
    assert judge_control(helps)[0] == "not_reproduced"
    cheap = [
        _runs("lpl", "eps", "step_ms", [30.0, 31, 29, 30, 30]),
        _runs("no-lpl", "eps", "step_ms", [20.0] * 5),
    ]
    verdict, measured = judge_overhead(cheap)
    assert verdict == "reproduced" and measured["overhead_ratio"] == pytest.approx(1.5)
    dear = [
        _runs("lpl", "eps", "step_ms", [50.0, 51, 49, 50, 50]),
        _runs("no-lpl", "eps", "step_ms", [20.0] * 5),
    ]
    assert judge_overhead(dear)[0] == "not_reproduced"
