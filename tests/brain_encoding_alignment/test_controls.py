"""brain-encoding-alignment's negative controls (issue 41): each claim's judge, fed real runs at smoke
where the effect has been taken away, does not report it.

- instruction-beats-vision-in-category: the instruction sets' features replaced by Gaussian noise, or
  shuffled across images (``instruction_features``): the caption no longer beats the vision-only model in
  the category region.
- partition-recovers-planted: the same fits scored without the noise ceiling (``no-nc-normalisation``)
  miss the true shares.
- shuffled-control-null: the reference's own (unshuffled) runs, fed to the null's judge, are not null.

The controls' runs are the claims' runs at smoke with one thing changed, relabelled as the algorithm the
judge reads, so it is the same judge on the same kind of runs."""

from __future__ import annotations

import dataclasses

import pytest

from iclrbench.benchmarks.brain_encoding_alignment import (
    BrainEncodingTask,
    judge_null,
    judge_recovery,
    judge_vision,
)
from iclrbench.core.result import RunResult
from iclrbench.testing import evaluate_once

TASK = "brain-encoding-alignment"
if BrainEncodingTask.unavailable():
    pytest.skip(BrainEncodingTask.unavailable() or "", allow_module_level=True)
SEEDS = BrainEncodingTask.claim_seeds("smoke")


def _runs(algorithm: str, judged_as: str = "", **config: str) -> list[RunResult]:
    runs = [evaluate_once(TASK, algorithm, seed=s, **config) for s in SEEDS]
    return [dataclasses.replace(r, algorithm=judged_as or algorithm) for r in runs]


@pytest.fixture(scope="module")
def reference() -> list[RunResult]:
    return _runs("himalaya-ridge")


def test_the_caption_beats_vision_in_the_category_region_on_the_models_features(
    reference: list[RunResult],
) -> None:
    # the part of the claim the controls take away; at smoke's 60 held-out images the early visual part
    # is not settled (one seed each side), so the verdict here is not asserted
    for r in reference:
        assert r.metrics["instruction_vs_vision_category"] > 0.3, r.metrics


@pytest.mark.parametrize("control", ["noise", "shuffled"])
def test_the_vision_comparison_fails_with_instruction_features_taken_away(control: str) -> None:
    runs = _runs("himalaya-ridge", instruction_features=control)
    verdict, measured = judge_vision([runs])
    assert verdict != "reproduced", measured
    for r in runs:  # the caption's stand-in explains nothing of the category region: vision is ahead
        assert r.metrics["instruction_vs_vision_category"] < 0, measured


def test_the_recovery_judge_rejects_unnormalised_scores() -> None:
    raw = _runs("no-nc-normalisation", judged_as="himalaya-ridge")
    verdict, measured = judge_recovery([raw])
    assert verdict != "reproduced", measured
    assert all(r.metrics["mixed_shared_error"] < -0.02 for r in raw), measured


def test_the_null_judge_rejects_real_fits(reference: list[RunResult]) -> None:
    as_null = [dataclasses.replace(r, algorithm="shuffled-control") for r in reference]
    verdict, measured = judge_null([as_null])
    assert verdict == "not_reproduced", measured
