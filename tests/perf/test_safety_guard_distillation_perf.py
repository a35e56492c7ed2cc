"""Speed of safety-guard-distillation's hot path, scoring prompts: the student (a hashed n-gram bag, 64
hidden units) against the teacher it is distilled from (MiniLM's embedding and its head), on the same 64
HarmBench behaviours, nothing memoised. ``make perf`` prints both; the note gives the ratio, beside the
counted FLOPs' ratio."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from iclrbench.algorithms.safety_guard_distillation import build_student, student_scores
from iclrbench.envs.safety_guard_distillation import (
    Examples,
    SafetyGuardConfig,
    Teacher,
    harmbench_behaviours,
)

pytestmark = pytest.mark.usefixtures("single_thread")
CONFIG = SafetyGuardConfig()


@pytest.fixture(scope="module")
def prompts() -> list[str]:
    try:
        return [t for t, _ in harmbench_behaviours()[:64]]
    except Exception as exc:
        pytest.skip(str(exc))


def test_student_scores_64_prompts(benchmark, prompts) -> None:  # type: ignore[no-untyped-def]
    model = build_student(CONFIG.buckets, 64, seed=0)
    benchmark.group = "safety-guard-distillation: scoring 64 prompts"
    scores = benchmark.pedantic(
        lambda: student_scores(model, prompts, CONFIG.buckets), rounds=10, warmup_rounds=1
    )
    assert scores.shape == (64,) and np.all((scores >= 0) & (scores <= 1))


def test_teacher_scores_64_prompts(benchmark, prompts) -> None:  # type: ignore[no-untyped-def]
    train = Examples(tuple(prompts[:8]), np.array([1, 0] * 4), ("x",) * 8, ("prompt",) * 8)
    teacher = Teacher(train, epochs=1, seed=0)
    benchmark.group = "safety-guard-distillation: scoring 64 prompts"
    scores = benchmark.pedantic(lambda: teacher.unsafe(prompts, memoised=False), rounds=3, warmup_rounds=1)
    assert scores.shape == (64,)
