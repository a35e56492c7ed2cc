"""video-guardrail end to end at smoke, as ``bench run`` makes a run: every declared metric, the same seed
the same figures, PEPE's verdicts blind to the order through the whole pipeline, pruning's counted cost; and
the negative control of the held-out policies (long: one training at ``small``)."""

from __future__ import annotations

import pytest

from iclrbench.benchmarks.video_guardrail import VideoGuardrailTask
from iclrbench.core.result import RunResult
from iclrbench.testing import evaluate_once

TASK = "video-guardrail"
if VideoGuardrailTask.unavailable():
    pytest.skip(VideoGuardrailTask.unavailable() or "", allow_module_level=True)
DECLARED = {m.name for m in VideoGuardrailTask.metrics}
MEASURED = {m.name for m in VideoGuardrailTask.metrics if m.measured}
NAMES = ("safewatch", "safewatch-no-pruning", "safewatch-random-pruning", "sequential", "per-frame")


@pytest.fixture(scope="module")
def runs() -> dict[str, RunResult]:
    return {name: evaluate_once(TASK, name) for name in NAMES}


def test_runs_report_every_declared_metric(runs: dict[str, RunResult]) -> None:
    for name, run in runs.items():
        assert set(run.metrics) == DECLARED, name
        assert 0.0 <= run.metrics["f1"] <= 1.0 and 0.0 <= run.metrics["ranking"] <= 1.0, name
        assert run.metrics["prefill_mflops"] > 0 and run.metrics["kept_tokens"] >= 1, name
        curve = run.curves["train_loss"]  # the leaderboard's curve: 20 points, the loss falling
        assert len(curve["x"]) == 20 and curve["x"][-1] == 100 and curve["y"][-1] < curve["y"][0], name


def test_pepe_is_blind_to_the_order_and_pruning_cuts_the_counted_cost(runs: dict[str, RunResult]) -> None:
    assert abs(runs["safewatch-no-pruning"].metrics["position_bias"]) < 0.01
    full, pruned = runs["safewatch-no-pruning"].metrics, runs["safewatch"].metrics
    assert pruned["prefill_mflops"] < full["prefill_mflops"] and pruned["kept_tokens"] < full["kept_tokens"]
    assert pruned["kept_tokens"] == runs["safewatch-random-pruning"].metrics["kept_tokens"]
    assert runs["per-frame"].metrics["heldout_ranking"] == 0.5  # it reads no policy: one score a video


def test_the_same_seed_gives_the_same_figures(runs: dict[str, RunResult]) -> None:
    again = evaluate_once(TASK, "safewatch")
    for metric in DECLARED - MEASURED:
        assert again.metrics[metric] == pytest.approx(runs["safewatch"].metrics[metric], abs=1e-12), metric
    assert again.curves == runs["safewatch"].curves


@pytest.mark.long
def test_with_the_policy_texts_shuffled_the_held_out_policies_stay_at_chance() -> None:
    """The negative control: trained with each category's policy text swapped for another's, the guardrail
    cannot learn what a policy's words mean, so on held-out policies its within-video ranking is a coin's:
    0.511 on seed 0 (0.555 when the derangement still reached the held-out categories' texts), where the
    guardrail trained on the true texts ranked 0.766 over 5 seeds at ``small`` (2026-12-06)."""
    run = evaluate_once(TASK, "safewatch-no-pruning", budget="small", shuffle_policies=True)
    assert abs(run.metrics["heldout_ranking"] - 0.5) < 0.1, run.metrics
