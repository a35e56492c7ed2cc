"""Each claim's verdict can change (ARCHITECTURE.md item 11): the judges, fed the real runs of ``bench
claims safety-guard-distillation`` at ``small`` (task v3, 2026-12-07, seeds 0-4, the figures as stored in
``small_runs.json``), give the verdicts the task declares it measured (``Claim.expected``); fed a control,
they do not report the effect.

The controls: for the prefix claim, the runs without the prefix standing in for both arms (no prefix
either way); for the student claim, HarmAug with its synthetic prompts' labels drawn from the whole
training set (``harmaug.shuffle_labels=true``: the prompts kept, their labels' meaning gone) in place of
HarmAug."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iclrbench.benchmarks.safety_guard_distillation import SafetyGuardTask, judge_prefix, judge_students
from iclrbench.core.result import RunResult
from iclrbench.testing import fake_runs

TASK = "safety-guard-distillation"
RUNS = json.loads((Path(__file__).parent / "small_runs.json").read_text())
CLAIMS = {c.id: c for c in SafetyGuardTask.claims}


def stored(name: str, as_name: str | None = None) -> list[RunResult]:
    """The stored runs of ``name`` (one per seed), labelled ``as_name`` where they stand in for another."""
    return [
        fake_runs(TASK, as_name or name, (int(seed),), metrics=metrics, budget="small")[0]
        for seed, metrics in sorted(RUNS[name].items())
    ]


def test_the_fixture_holds_every_arm_on_five_seeds() -> None:
    expected = {"harmaug", "harmaug-no-prefix", "no-augmentation", "eda", "harmaug-shuffled-labels"}
    assert set(RUNS) == expected
    assert all(sorted(v) == ["0", "1", "2", "3", "4"] for v in RUNS.values())


@pytest.mark.parametrize(
    ("claim", "judge", "names"),
    [
        ("prefix-raises-harmful-generations", judge_prefix, ("harmaug", "harmaug-no-prefix")),
        (
            "harmaug-student-beats-no-augmentation-and-eda",
            judge_students,
            ("harmaug", "no-augmentation", "eda"),
        ),
    ],
)
def test_the_stored_runs_give_the_declared_verdict(claim: str, judge: object, names: tuple[str, ...]) -> None:
    verdict, measured = judge([stored(n) for n in names])  # type: ignore[operator]
    assert verdict == CLAIMS[claim].expected, measured


def test_without_the_prefix_on_both_sides_the_prefix_shows_no_effect() -> None:
    control = [stored("harmaug-no-prefix", "harmaug"), stored("harmaug-no-prefix")]
    verdict, measured = judge_prefix(control)
    assert verdict != "reproduced", measured
    assert measured["harmful share: prefix - no prefix >= 0.1"]["effect"] == 0.0


def test_with_the_labels_meaning_gone_harmaug_gains_less_over_no_augmentation() -> None:
    """The control's student: not found ahead, and its gain over no augmentation below HarmAug's own."""
    control = [stored("harmaug-shuffled-labels", "harmaug"), stored("no-augmentation"), stored("eda")]
    verdict, measured = judge_students(control)
    assert verdict != "reproduced", measured
    real = judge_students([stored("harmaug"), stored("no-augmentation"), stored("eda")])[1]
    part = "auprc harmaug - no augmentation > 0"
    assert measured[part]["effect"] < real[part]["effect"], (measured[part], real[part])
