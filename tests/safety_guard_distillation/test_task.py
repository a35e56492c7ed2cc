"""safety-guard-distillation end to end at smoke, as ``bench run`` makes a run: every declared metric,
the same seed the same figures, the generators' augmentations counted, the teacher as its own reference,
and bad settings refused in one line."""

from __future__ import annotations

import os

import pytest

from iclrbench.benchmarks.safety_guard_distillation import SafetyGuardTask
from iclrbench.core.errors import UserError
from iclrbench.core.result import RunResult
from iclrbench.testing import evaluate_once

TASK = "safety-guard-distillation"
if SafetyGuardTask.unavailable():
    pytest.skip(SafetyGuardTask.unavailable() or "", allow_module_level=True)
DECLARED = {m.name for m in SafetyGuardTask.metrics}
MEASURED = {m.name for m in SafetyGuardTask.metrics if m.measured}
NAMES = ("harmaug", "harmaug-no-prefix", "no-augmentation", "eda", "teacher")


@pytest.fixture(scope="module")
def runs() -> dict[str, RunResult]:
    return {name: evaluate_once(TASK, name) for name in NAMES}


def test_runs_report_every_declared_metric(runs: dict[str, RunResult]) -> None:
    for name, run in runs.items():
        assert set(run.metrics) == DECLARED, name
        assert 0.0 <= run.metrics["auprc"] <= 1.0 and 0.0 <= run.metrics["f1"] <= 1.0, name
        assert run.metrics["mflops"] > 0 and run.metrics["latency_ms"] > 0, name
    assert runs["teacher"].metrics["flops_fraction"] == 1.0
    assert 0 < runs["harmaug"].metrics["flops_fraction"] < 0.01  # the student: a hashed bag of n-grams
    for name in ("no-augmentation", "teacher"):
        assert runs[name].metrics["harmful_added"] == runs[name].metrics["diversity"] == 0.0, name
    for name in ("harmaug", "harmaug-no-prefix", "eda"):
        assert 0.0 <= runs[name].metrics["harmful_added"] <= 1.0 and runs[name].metrics["diversity"] > 0, name
    curve = runs["harmaug"].curves["train_loss"]
    assert len(curve["x"]) == 10 and curve["y"][-1] < curve["y"][0]
    assert "teacher's held-out AUPRC" in runs["harmaug"].notes


def test_the_same_seed_gives_the_same_figures(runs: dict[str, RunResult]) -> None:
    """The teacher trained again (its per-process cache cleared), the student trained again: the same
    figures. (The synthetic prompts are read from their cache; their sampling's determinism is
    tests/models' llama.cpp test.)"""
    from iclrbench.envs.safety_guard_distillation import teacher_for

    teacher_for.cache_clear()
    again = evaluate_once(TASK, "harmaug")
    for metric in DECLARED - MEASURED:
        assert again.metrics[metric] == pytest.approx(runs["harmaug"].metrics[metric], abs=1e-12), metric
    assert again.curves == runs["harmaug"].curves


def test_the_control_reuses_the_generation_and_moves_only_labels(runs: dict[str, RunResult]) -> None:
    control = evaluate_once(TASK, "harmaug", shuffle_labels=True)
    for metric in ("harmful_added", "refusal_rate", "diversity", "mflops"):
        assert control.metrics[metric] == runs["harmaug"].metrics[metric], metric


def test_an_unknown_held_out_category_is_one_clear_line() -> None:
    with pytest.raises(UserError, match="held_out"):
        evaluate_once(TASK, "harmaug", held_out="weapons")


@pytest.mark.skipif(
    os.environ.get("ICLRBENCH_LONG_CLAIMS") != "1",
    reason="claim-sized (minutes of SmolLM2 a seed on a clean cache): ICLRBENCH_LONG_CLAIMS=1 runs it; "
    "test_controls.py judges the control's stored runs at small in every make test",
)
def test_with_the_synthetic_labels_shuffled_the_student_claim_is_not_reproduced() -> None:
    """The negative control of the student claim, on real runs at ``small`` (seeds 0-2: on a clean cache
    each HarmAug seed samples its 64 prompts and their 128 replies, minutes): each synthetic input labelled
    as another training input, the judge does not find HarmAug's student ahead. Measured over seeds 0-4
    (v3, 2026-12-07): AUPRC 0.649 shuffled, 0.701 with the true labels, 0.687 without augmentation, 0.670
    EDA."""
    from iclrbench.benchmarks.safety_guard_distillation import judge_students

    seeds = (0, 1, 2)
    control = [evaluate_once(TASK, "harmaug", s, "small", shuffle_labels=True) for s in seeds]
    others = [[evaluate_once(TASK, name, s, "small") for s in seeds] for name in ("no-augmentation", "eda")]
    verdict, measured = judge_students([control, *others])
    assert verdict != "reproduced", measured
