"""Each claim's verdict can change (issue 40): the judges, fed the real runs of ``bench claims
mobile-llm-profiling`` at ``small`` (SmolLM2-135M-Instruct, seeds 0-2, the figures as stored in
``small_runs.json``), give the verdicts the task declares it measured (``Claim.expected``); fed a control,
the full model in place of the quantised configurations, they do not report the effect.

The control is the same engine's full model: ``llamacpp-f16``, SmolLM2's Q4_1 weights de-quantised to F16
(its full model is Q4_1 de-quantised), with its own measured figures from the same runs, standing in for
every other configuration (memory, trends) or for Q3_K_M and Q2_K (agreement). With one configuration
everywhere, bits do not vary, so no line or order over bits can be fitted, and nothing at fewer bits agrees
less than Q8_0 does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iclrbench.benchmarks.mobile_llm_profiling import (
    LLAMA_NAMES,
    MobileLLMTask,
    judge_agreement,
    judge_memory,
    judge_trends,
)
from iclrbench.core.result import RunResult
from iclrbench.testing import fake_runs

TASK = "mobile-llm-profiling"
RUNS = json.loads((Path(__file__).parent / "small_runs.json").read_text())
CLAIMS = {c.id: c for c in MobileLLMTask.claims}
AGREEMENT = ("llamacpp-q8-0", "llamacpp-q3-k-m", "llamacpp-q2-k")


def stored(name: str, as_name: str | None = None) -> list[RunResult]:
    """The stored runs of ``name`` (one per seed), labelled ``as_name`` where it stands in for another."""
    return [
        fake_runs(TASK, as_name or name, (int(seed),), metrics=metrics, budget="small")[0]
        for seed, metrics in sorted(RUNS[name].items())
    ]


def test_the_fixture_holds_every_llama_configuration_on_three_seeds() -> None:
    assert set(RUNS) == set(LLAMA_NAMES) and all(sorted(v) == ["0", "1", "2"] for v in RUNS.values())


@pytest.mark.parametrize(
    ("claim", "judge", "names"),
    [
        ("weight-memory-linear-in-bits", judge_memory, LLAMA_NAMES),
        ("agreement-holds-at-8-bits", judge_agreement, AGREEMENT),
        ("fewer-bits-worse-quality-faster-decode", judge_trends, LLAMA_NAMES),
    ],
)
def test_the_stored_runs_give_the_declared_verdict(claim: str, judge: object, names: tuple[str, ...]) -> None:
    verdict, measured = judge([stored(n) for n in names])  # type: ignore[operator]
    assert verdict == CLAIMS[claim].expected, measured


def test_the_full_model_in_every_place_shows_no_memory_line_and_no_trend() -> None:
    control = [stored("llamacpp-f16", as_name=n) for n in LLAMA_NAMES]
    assert judge_memory(control)[0] != "reproduced"
    assert judge_trends(control)[0] != "reproduced"


def test_the_full_model_in_place_of_q3_k_m_and_q2_k_loses_no_agreement() -> None:
    control = [stored("llamacpp-q8-0"), *(stored("llamacpp-f16", as_name=n) for n in AGREEMENT[1:])]
    verdict, measured = judge_agreement(control)
    assert verdict != "reproduced", measured
    assert measured["q8_0 - q2_k >= 0.05"]["verdict"] != "reproduced"
