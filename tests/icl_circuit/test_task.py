"""icl-circuit through the runner and the CLI at smoke (the d=64 subject trained until converged, cached
once): every metric, the invariants of an ablation, determinism, the subject's floors and the below-chance
gate, the subject's quality in every run's provenance, layers
the subject does not have refused, the claim judges saying yes, no and inconclusive, and the SmolLM2
subject's masks cutting exactly the links they name."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from iclrbench.benchmarks.icl_circuit import (
    BelowChance,
    IclCircuitTask,
    judge_bypass,
    judge_encode,
    judge_to_chance,
)
from iclrbench.core.artifact import ArtifactBelowFloor
from iclrbench.core.result import RunResult
from iclrbench.testing import RunFailed, evaluate_once, fake_runs
from tests.conftest import Refused

TASK = "icl-circuit"
if IclCircuitTask.unavailable():
    pytest.skip(IclCircuitTask.unavailable() or "", allow_module_level=True)
DECLARED = {m.name for m in IclCircuitTask.metrics}


@pytest.fixture(scope="module")
def outcomes() -> dict[str, RunResult]:
    return {name: evaluate_once(TASK, name) for name in ("none", "yi-to-sq", "random-control")}


def test_runs_report_every_declared_metric_in_range(outcomes: dict[str, RunResult]) -> None:
    for name, outcome in outcomes.items():
        m = outcome.metrics
        assert set(m) == DECLARED, name
        assert 0 <= m["accuracy"] <= 1 and m["chance"] == pytest.approx(1 / 3), name
        assert m["above_chance"] == pytest.approx(m["accuracy"] - m["chance"]), name
        assert m["unablated_accuracy"] >= m["chance"] + 0.15, name  # the gate the analyses passed
        assert 0 <= m["merge_attention"] <= 1 and -1 <= m["correct_induction"] <= 1, name
        assert 0 <= m["encode_layer"] <= 3 and 0 <= m["induction_layer"] <= 3, name
        assert set(outcome.curves) == {
            "kernel_alignment",
            "centroid_accuracy",
            "merge_attention",
            "correct_induction",
        }


def test_no_mask_changes_nothing(outcomes: dict[str, RunResult]) -> None:
    none = outcomes["none"].metrics
    assert none["accuracy"] == none["unablated_accuracy"] and none["accuracy_drop"] == 0.0
    # every algorithm sees the same episodes for a seed: the same unablated accuracy
    assert {o.metrics["unablated_accuracy"] for o in outcomes.values()} == {none["unablated_accuracy"]}
    masked_nowhere = evaluate_once(TASK, "yi-to-sq", layers="none")
    assert masked_nowhere.metrics["accuracy_drop"] == 0.0


def test_the_same_seed_gives_the_same_run(outcomes: dict[str, RunResult]) -> None:
    again = evaluate_once(TASK, "random-control")
    for key, value in outcomes["random-control"].metrics.items():
        if key != "seconds":
            assert again.metrics[key] == value, key
    other = evaluate_once(TASK, "random-control", seed=1)  # other episodes, other random links
    changed = [k for k, v in other.metrics.items() if v != outcomes["random-control"].metrics[k]]
    assert {"kernel_alignment_rise", "merge_attention", "correct_induction"} & set(changed)


def test_an_unconverged_subject_is_not_analysed_and_its_figures_are_kept() -> None:
    """10 steps: nowhere near the floors; the run fails saying which figure missed, by how much, and how
    to fix it, and the failed run keeps the subject's figures in its provenance."""
    with pytest.raises(RunFailed) as caught:
        evaluate_once(TASK, "none", max_train_steps=10, d_model=32)
    result = caught.value.result
    assert result.error.startswith(
        f"{ArtifactBelowFloor.__name__}: the tiny subject did not reach its floors"
    )
    assert "(needs >= 0.95)" in result.error and "10 steps" in result.error
    assert "--set max_train_steps=" in result.error
    figures = result.provenance["artifacts"]["tiny subject"]["figures"]
    assert figures["accuracy"] < 0.95


def test_a_subject_that_beats_its_floors_but_not_chance_on_the_test_episodes_is_not_analysed() -> None:
    """The per-run gate stays: floors of 0 let an untrained subject through training, and the test
    episodes' chance check stops it."""
    with pytest.raises(RunFailed, match=f"{BelowChance.__name__}: .*does not beat chance"):
        evaluate_once(
            TASK, "none", max_train_steps=10, d_model=32, accuracy_floor=0, induction_floor=-1,
            min_above_chance=0.5,
        )  # fmt: skip


def test_runs_carry_the_subjects_quality(outcomes: dict[str, RunResult]) -> None:
    for run in outcomes.values():
        quality = run.provenance["artifacts"]["tiny subject"]
        assert quality["figures"]["accuracy"] >= 0.95 and quality["figures"]["induction"] >= 0.15
        assert quality["floors"] == ["accuracy >= 0.95", "induction >= 0.15"]
        assert "floors met at" in quality["trained"]


@pytest.mark.parametrize(
    ("layers", "needle"),
    [("0-7", "layers 0-7: the tiny model has layers 0-3"), ("top", "layers")],
)
def test_layers_the_subject_does_not_have_are_refused(refused: Refused, layers: str, needle: str) -> None:
    error = refused("run", TASK, "yi-to-sq", "--set", f"layers={layers}", "--budget", "smoke", "--seeds", "0")
    assert needle in error


# ------------------------------------------------------------------------------------------------ judges
def _runs(algorithm: str, layers: str, values: dict[str, list[float]]) -> list[RunResult]:
    runs = fake_runs(TASK, algorithm, range(5), {}, config={"layers": layers})
    for i, r in enumerate(runs):
        r.metrics.update({k: v[i] for k, v in values.items()})
    return runs


def _to_chance(
    upper: list[float], lower_drop: list[float], control_drop: list[float]
) -> list[list[RunResult]]:
    base = {"unablated_accuracy": [0.99] * 5, "chance": [1 / 3] * 5, "accuracy": [0.5] * 5}
    return [
        _runs("yi-to-sq", "upper", {**base, "above_chance": upper, "accuracy_drop": [0.6] * 5}),
        _runs("yi-to-sq", "lower", {**base, "above_chance": [0.6] * 5, "accuracy_drop": lower_drop}),
        _runs("random-control", "upper", {**base, "above_chance": [0.6] * 5, "accuracy_drop": control_drop}),
        _runs("random-control", "lower", {**base, "above_chance": [0.6] * 5, "accuracy_drop": control_drop}),
    ]


def test_the_to_chance_judge_says_yes_no_and_inconclusive() -> None:
    near = [-0.01, 0.0, 0.01, 0.005, -0.005]
    small = [0.0, 0.01, 0.02, 0.01, 0.0]
    assert judge_to_chance(_to_chance(near, small, small))[0] == "reproduced"
    far = [0.2, 0.25, 0.22, 0.21, 0.24]  # accuracy survives the mask
    assert judge_to_chance(_to_chance(far, small, small))[0] == "not_reproduced"
    costly = [0.2, 0.3, 0.25, 0.2, 0.3]  # the random control hurts as much
    assert judge_to_chance(_to_chance(near, small, costly))[0] == "not_reproduced"
    noisy = [-0.2, 0.2, 0.0, -0.1, 0.1]
    assert judge_to_chance(_to_chance(noisy, small, small))[0] == "inconclusive"
    assert judge_to_chance([])[0] == "inconclusive"


def test_the_encode_and_bypass_judges_say_yes_and_no() -> None:
    good = {
        "kernel_alignment_rise": [0.1, 0.12, 0.09, 0.11, 0.1],
        "centroid_above_chance": [0.5, 0.52, 0.49, 0.5, 0.51],
        "encode_layer": [0.0] * 5,
        "induction_layer": [3.0] * 5,
    }
    assert judge_encode([_runs("none", "none", good)])[0] == "reproduced"
    late = {**good, "encode_layer": [3.0] * 5, "induction_layer": [1.0] * 5}
    assert judge_encode([_runs("none", "none", late)])[0] == "not_reproduced"
    survives = _runs("si-to-yi", "all", {"above_chance": [0.4, 0.42, 0.41, 0.39, 0.4], "accuracy": [0.7] * 5})
    assert judge_bypass([survives])[0] == "reproduced"
    killed = _runs(
        "si-to-yi", "all", {"above_chance": [0.0, 0.01, -0.01, 0.0, 0.005], "accuracy": [0.33] * 5}
    )
    assert judge_bypass([killed])[0] == "not_reproduced"


# ------------------------------------------------------------------------------------------------ smollm2
@pytest.mark.slow
def test_smollm2_masks_cut_exactly_the_links_they_name() -> None:
    """On SmolLM2's text prompts (every episode its own layout), a mask on layers 28-29 leaves those
    layers' attention at exactly zero on its links, and every layer before them untouched."""
    pytest.importorskip("transformers")
    from iclrbench.algorithms.icl_circuit import ABLATIONS
    from iclrbench.envs.icl_circuit import IclCircuitConfig
    from iclrbench.envs.icl_circuit.subjects import SmolSubject
    from iclrbench.models.torch_threads import one_torch_thread

    config = IclCircuitConfig(subject="smollm2", layers="28-29", k=2, episodes=10, batch=3)
    subject = SmolSubject(config)
    episodes = subject.episodes(3, np.random.default_rng(0))
    text = subject.lm.detokenize(episodes.ids[0][: episodes.roles.length[0]])
    assert text.startswith("Review:") and text.endswith("Sentiment:")
    masks = ABLATIONS["yi_to_sq"](None, config, np.random.default_rng(0)).masks(episodes)
    assert sorted(masks) == [28, 29] and masks[28].shape[0] == 3
    with one_torch_thread():  # several threads may sum in another order from one pass to the next
        plain, cut = subject.trace(episodes), subject.trace(episodes, masks)
        again = SmolSubject(dataclasses.replace(config, layers="none")).trace(episodes)
    assert np.abs(cut.retrieve[28:]).max() == 0.0 and np.abs(plain.retrieve[28:]).max() > 0
    np.testing.assert_array_equal(cut.sq_hidden[:28], plain.sq_hidden[:28])
    assert np.abs(cut.label_logits - plain.label_logits).max() > 1e-3
    np.testing.assert_array_equal(again.label_logits, plain.label_logits)
