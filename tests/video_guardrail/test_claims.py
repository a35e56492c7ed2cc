"""video-guardrail's judges on made-up runs: each says yes, no and cannot tell, and each fed its control (the
method replaced by what it is compared with) does not report the effect."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclrbench.benchmarks.video_guardrail import (
    average_precision,
    judge_bias,
    judge_pruning,
    macro,
    position_bias,
)
from iclrbench.core.result import RunResult
from iclrbench.envs.video_guardrail import CATEGORIES, Split
from iclrbench.testing import fake_run

TASK = "video-guardrail"
JITTER = (0.0, 0.004, -0.004, 0.002, -0.002)


def _arm(name: str, **metrics: float) -> list[RunResult]:
    return [fake_run(TASK, name, s, {k: v + JITTER[s] for k, v in metrics.items()}) for s in range(5)]


def test_the_bias_judge_says_yes_no_and_cannot_tell() -> None:
    pepe = _arm("safewatch-no-pruning", position_bias=0.0, f1=0.9)
    assert judge_bias([pepe, _arm("sequential", position_bias=0.05, f1=0.9)])[0] == "reproduced"
    assert judge_bias([pepe, _arm("sequential", position_bias=-0.03, f1=0.9)])[0] == "not_reproduced"
    assert judge_bias([pepe[:1], _arm("sequential", position_bias=0.05)[:1]])[0] == "inconclusive"


def test_the_bias_judge_fed_pepe_for_both_does_not_report_a_bias() -> None:
    pepe = _arm("safewatch-no-pruning", position_bias=0.0, f1=0.9)
    control = [fake_run(TASK, "sequential", r.seed, r.metrics) for r in pepe]
    assert judge_bias([pepe, control])[0] != "reproduced"


def test_the_pruning_judge_says_yes_no_and_cannot_tell() -> None:
    none = _arm("safewatch-no-pruning", f1=0.90, prefill_mflops=10.0, kept_tokens=96)
    yes = [none, _arm("safewatch", f1=0.898, prefill_mflops=4.0), _arm("safewatch-random-pruning", f1=0.80)]
    assert judge_pruning(yes)[0] == "reproduced"
    lossy = [none, _arm("safewatch", f1=0.85), _arm("safewatch-random-pruning", f1=0.80)]
    assert judge_pruning(lossy)[0] == "not_reproduced"
    assert judge_pruning([none[:1], yes[1][:1], yes[2][:1]])[0] == "inconclusive"


def test_the_pruning_judge_fed_random_pruning_for_pap_does_not_report_the_effect() -> None:
    none = _arm("safewatch-no-pruning", f1=0.90)
    random = _arm("safewatch-random-pruning", f1=0.80)
    as_pap = [fake_run(TASK, "safewatch", r.seed, r.metrics) for r in random]
    assert judge_pruning([none, as_pap, random])[0] != "reproduced"


@given(st.lists(st.tuples(st.integers(0, 1), st.integers(-3, 3)), min_size=1, max_size=40))
@settings(max_examples=100, deadline=None)
def test_average_precision_matches_sklearn_ties_and_all(pairs: list[tuple[int, int]]) -> None:
    from sklearn.metrics import average_precision_score

    labels = np.array([y for y, _ in pairs], float)
    scores = np.array([s for _, s in pairs], float)
    if labels.sum() == 0:
        assert np.isnan(average_precision(labels, scores))
    else:
        assert abs(average_precision(labels, scores) - average_precision_score(labels, scores)) < 1e-12


def test_macro_scores_know_a_perfect_and_a_useless_guardrail() -> None:
    rng = np.random.default_rng(0)
    categories = np.tile(np.arange(4), (50, 1))
    labels = (rng.random((50, 4)) < 0.3).astype(np.float32)
    split = Split(np.zeros((50, 1, 1), np.float32), categories, np.zeros_like(categories), labels, labels > 0)
    names = CATEGORIES[:4]
    assert macro(split, np.where(labels > 0, 5.0, -5.0), names) == (1.0, 1.0)
    f1, auprc = macro(split, np.full(labels.shape, -1.0), names)  # never flags, one score for all
    assert f1 == 0.0 and abs(auprc - labels.mean()) < 0.05


# statistical, derandomised (the same examples on every run): over 40 seeds of 1,000 videos the figure's
# standard deviation was 0.0047 for verdicts flipped at random (0.4) and 0.0036 for whole rotations (0.3)
@given(st.integers(0, 2**16), st.floats(0.0, 0.4))
@settings(max_examples=30, deadline=None, derandomize=True)
def test_position_bias_is_zero_without_an_order_and_about_zero_for_noise(seed: int, flip: float) -> None:
    rng = np.random.default_rng(seed)
    right = rng.random((1000, 6, 1)) < 0.8
    blind = np.repeat(right, 6, axis=2)  # every verdict the same at every position
    assert position_bias(blind, seed)[0] == 0.0
    noisy = blind ^ (rng.random(blind.shape) < flip)  # flips at random, no position preferred
    assert abs(position_bias(noisy, seed)[0]) < 0.03


def test_position_bias_is_about_zero_on_average_when_whole_rotations_flip() -> None:
    """A reordering that changes every verdict of a rotation (what sequential encoding's context does) moves
    every position alike: no position effect, so over 10 seeds the mean bias is within 0.0025 of 0 (its
    standard error about 0.0011). Version 1's null, which shuffled single verdicts, gave -0.0017 on these
    seeds: this bound is a sanity check, too loose to tell the two nulls apart."""
    n, p = 1000, 6
    shift = (np.arange(p)[None, :] - np.arange(p)[:, None]) % p  # rotation of entry (j, k)
    biases = []
    for seed in range(10):
        rng = np.random.default_rng(seed)
        correct = np.repeat(rng.random((n, p, 1)) < 0.8, p, axis=2)
        correct ^= (rng.random((n, p)) < 0.3)[:, shift]  # (video, rotation) flips
        biases.append(position_bias(correct, seed)[0])
    assert abs(np.mean(biases)) < 0.0025, biases


def test_position_bias_finds_a_position_that_is_worse() -> None:
    rng = np.random.default_rng(0)
    correct = np.repeat(rng.random((200, 6, 1)) < 0.8, 6, axis=2)
    correct[:, :, -1] &= rng.random((200, 6)) < 0.7  # the last position loses about 0.24 of its right ones
    bias, accuracy = position_bias(correct, 0)
    assert bias > 0.1 and accuracy.argmin() == 5


def test_an_explanation_counts_only_on_a_flagged_broken_policy_with_its_frame_and_cell() -> None:
    from iclrbench.benchmarks.video_guardrail import explanation_accuracy

    labels = np.array([[1.0, 1.0, 1.0, 0.0]])
    when, where = np.array([[2, 0, 1, -1]]), np.array([[5, 3, 7, -1]])
    split = Split(np.zeros((1, 1, 1), np.float32), np.zeros((1, 4), np.int64), np.zeros((1, 4), np.int64),
                  labels, labels > 0, when, where)  # fmt: skip
    flagged = np.array([[1.0, 1.0, -1.0, 1.0]])  # the third broken policy missed
    # right on the first; the second names the wrong cell; the third is missed; the kept one is not asked
    assert explanation_accuracy(split, flagged, np.array([[2, 0, 1, 0]]), np.array([[5, 4, 7, 0]])) == 1 / 3
    assert explanation_accuracy(split, flagged, when, where) == 2 / 3
    assert explanation_accuracy(split, -flagged, when, where) == 1 / 3  # flagging the missed one only


def test_the_explanation_loss_is_the_heads_cross_entropy_on_broken_policies_only() -> None:
    torch = pytest.importorskip("torch")
    from iclrbench.algorithms.video_guardrail import EXPLANATION_WEIGHT, explanation_loss

    frames, cells = 6, 16
    uniform = torch.zeros(2, 3, frames + cells)
    when = torch.tensor([[1, -1, 4], [-1, -1, -1]])
    where = torch.tensor([[0, -1, 9], [-1, -1, -1]])
    expected = EXPLANATION_WEIGHT * (np.log(frames) + np.log(cells))
    assert float(explanation_loss(uniform, when, where, frames)) == pytest.approx(expected)
    assert float(explanation_loss(uniform, torch.full_like(when, -1), where, frames)) == 0.0
