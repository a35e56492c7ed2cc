"""The claims' judges on fake runs: yes, no and cannot tell, each with its control; and average precision
against sklearn's definition."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclrbench.benchmarks.safety_guard_distillation import (
    average_precision,
    f1_score,
    judge_prefix,
    judge_students,
)
from iclrbench.testing import fake_runs

TASK = "safety-guard-distillation"
SEEDS = (0, 1, 2, 3, 4)


def _runs(name: str, metric: str, values: list[float], **extra: float) -> list:
    return [
        fake_runs(TASK, name, (s,), metrics={metric: v, "flops_fraction": 0.01, **extra})[0]
        for s, v in zip(SEEDS, values, strict=True)
    ]


def test_the_prefix_judge_says_yes_no_and_cannot_tell() -> None:
    with_prefix = _runs("harmaug", "harmful_added", [0.8, 0.7, 0.75, 0.82, 0.78])
    yes = judge_prefix([with_prefix, _runs("harmaug-no-prefix", "harmful_added", [0.2, 0.3, 0.25, 0.2, 0.3])])
    assert yes[0] == "reproduced"
    control = [
        _runs("harmaug", "harmful_added", [0.3, 0.2, 0.26, 0.21, 0.3]),
        _runs("harmaug-no-prefix", "harmful_added", [0.2, 0.3, 0.25, 0.2, 0.3]),
    ]
    assert judge_prefix(control)[0] == "not_reproduced"  # no prefix effect: the same share either way
    assert judge_prefix([with_prefix[:1], with_prefix[:1]])[0] == "inconclusive"


def _students(harmaug: list[float], fraction: float = 0.01) -> list[list]:
    return [
        _runs("harmaug", "auprc", harmaug, flops_fraction=fraction),
        _runs("no-augmentation", "auprc", [0.70, 0.72, 0.69, 0.71, 0.70]),
        _runs("eda", "auprc", [0.71, 0.70, 0.70, 0.72, 0.69]),
    ]


def test_the_student_judge_says_yes_and_no() -> None:
    assert judge_students(_students([0.80, 0.82, 0.79, 0.81, 0.83]))[0] == "reproduced"
    # the control: a HarmAug whose added prompts taught nothing scores as the labelled set alone does
    assert judge_students(_students([0.69, 0.71, 0.68, 0.70, 0.69]))[0] == "not_reproduced"
    verdict, measured = judge_students(_students([0.80, 0.82, 0.79, 0.81, 0.83], fraction=0.5))
    assert (
        verdict == "not_reproduced"
        and measured["student / teacher flops < 0.25"]["verdict"] == "not_reproduced"
    )
    assert judge_students([[], [], []])[0] == "inconclusive"


@given(
    st.lists(st.tuples(st.booleans(), st.sampled_from([0.1, 0.3, 0.5, 0.7, 0.9])), min_size=1, max_size=40)
)
@settings(max_examples=100, deadline=None)
def test_average_precision_is_sklearns(pairs: list[tuple[bool, float]]) -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    labels = np.array([p[0] for p in pairs], float)
    scores = np.array([p[1] for p in pairs])
    if labels.sum() == 0:
        assert np.isnan(average_precision(labels, scores))
    else:
        assert average_precision(labels, scores) == pytest.approx(
            metrics.average_precision_score(labels, scores)
        )


def test_f1_on_known_verdicts() -> None:
    assert f1_score([1, 1, 0, 0], [1, 0, 1, 0]) == pytest.approx(0.5)
    assert f1_score([1, 0], [0, 0]) == 0.0
