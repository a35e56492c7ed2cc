"""icl-circuit through the runner and the CLI at smoke (the d=64 subject trained until converged, cached
once): every metric, the invariants of an ablation, determinism, the subject's floors and the below-chance
gate, the subject's quality in every run's provenance, layers the subject does not have refused, the
induction quarter resolved per run, the claim judges saying yes, no and inconclusive and each judge fed its
control (the unablated model in place of the mask, a subject that does not merge) not reporting the effect,
and the SmolLM2 subject on real text: its masks cutting exactly the links they name, its label logits those
of the whole model, its reference passes cached."""

from __future__ import annotations

import dataclasses
import importlib.util

import numpy as np
import pytest

from iclrbench.benchmarks.icl_circuit import (
    BelowChance,
    IclCircuitTask,
    judge_bypass,
    judge_encode,
    judge_gain,
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
        assert m["above_zero_shot"] == pytest.approx(m["accuracy"] - m["zero_shot_accuracy"]), name
        assert m["icl_gain"] == pytest.approx(m["unablated_accuracy"] - m["zero_shot_accuracy"]), name
        # the tiny world names its labels afresh per episode: without demonstrations, chance (200 episodes)
        assert abs(m["zero_shot_accuracy"] - 1 / 3) < 0.15, name
        assert m["induction_quarter"] in (1, 2, 3, 4) and m["masked_layers"] == (0 if name == "none" else 2)
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


def test_the_induction_quarter_is_the_unablated_peaks(outcomes: dict[str, RunResult]) -> None:
    run = evaluate_once(TASK, "yi-to-sq", layers="induction")
    quarter = int(outcomes["none"].metrics["induction_quarter"])
    assert run.metrics["induction_quarter"] == quarter and run.metrics["masked_layers"] == 1.0
    assert f"masked layers [{quarter - 1}]" in run.notes  # the tiny subject's quarters are single layers
    same = evaluate_once(TASK, "yi-to-sq", layers=f"q{quarter}")
    assert same.metrics["accuracy"] == run.metrics["accuracy"]


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
    ("setting", "needle"),
    [
        ("layers=0-7", "layers 0-7: the tiny model has layers 0-3"),
        ("layers=top", "layers"),
        ("k=0", "k=0 is for smollm2"),
    ],
)
def test_settings_the_subject_cannot_take_are_refused(refused: Refused, setting: str, needle: str) -> None:
    error = refused("run", TASK, "yi-to-sq", "--set", setting, "--budget", "smoke", "--seeds", "0")
    assert needle in error


def test_more_episodes_than_the_test_pool_are_refused(refused: Refused) -> None:
    error = refused(
        "run", TASK, "none", "--set", "subject=smollm2", "--set", "dataset=financial_phrasebank",
        "--set", "episodes=600", "--seeds", "0",
    )  # fmt: skip
    assert "test pool has 512" in error


# ------------------------------------------------------------------------------------------------ judges
def _runs(algorithm: str, layers: str, values: dict[str, list[float]]) -> list[RunResult]:
    runs = fake_runs(TASK, algorithm, range(5), {}, config={"layers": layers})
    for i, r in enumerate(runs):
        r.metrics.update({k: v[i] for k, v in values.items()})
    return runs


#: figures shaped as small's SmolLM2 runs could give them: unablated 0.80, zero-shot 0.60 (k = 0), the mask in
#: the induction quarter leaving 0.61, the random control costing nothing
UNABLATED, ZERO_SHOT = [0.8, 0.82, 0.79, 0.81, 0.8], [0.6, 0.62, 0.58, 0.61, 0.6]


def _gain_runs(masked: list[float], control_drop: list[float], zero: list[float] = ZERO_SHOT) -> list[list]:
    base = {"unablated_accuracy": UNABLATED, "zero_shot_accuracy": zero, "chance": [0.5] * 5}
    gain = [u - z for u, z in zip(UNABLATED, zero, strict=True)]

    def runs(name: str, accuracy: list[float]) -> list[RunResult]:
        return _runs(name, "induction", {
            **base, "accuracy": accuracy, "icl_gain": gain, "induction_quarter": [3.0] * 5,
            "above_zero_shot": [a - z for a, z in zip(accuracy, zero, strict=True)],
            "accuracy_drop": [u - a for u, a in zip(UNABLATED, accuracy, strict=True)],
        })  # fmt: skip

    control = [u - d for u, d in zip(UNABLATED, control_drop, strict=True)]
    return [runs("yi-to-sq", masked), runs("random-control", control)]


def test_the_gain_judge_says_yes_no_and_inconclusive() -> None:
    removed = [0.61, 0.6, 0.6, 0.62, 0.59]
    free = [0.0, 0.01, 0.0, 0.005, 0.0]
    assert judge_gain(_gain_runs(removed, free))[0] == "reproduced"
    survives = [0.75, 0.78, 0.74, 0.77, 0.76]  # the gain survives the mask
    assert judge_gain(_gain_runs(survives, free))[0] == "not_reproduced"
    costly = [0.2, 0.3, 0.25, 0.2, 0.3]  # the random control hurts as much
    assert judge_gain(_gain_runs(removed, costly))[0] == "not_reproduced"
    no_gain = _gain_runs([0.79, 0.8, 0.78, 0.8, 0.79], free, zero=[0.79, 0.81, 0.78, 0.8, 0.8])
    assert judge_gain(no_gain)[0] == "not_reproduced"  # nothing to remove: the setting cannot show it
    noisy = [0.4, 0.8, 0.6, 0.5, 0.7]
    assert judge_gain(_gain_runs(noisy, free))[0] == "inconclusive"
    assert judge_gain([])[0] == "inconclusive"


def test_the_gain_judge_fed_the_unablated_model_in_place_of_the_mask_reports_no_effect() -> None:
    """The control: the same judge, the same seeds, the unablated accuracy where the masked one was. A
    judge that passed whatever the mask did would call this reproduced."""
    removed = [0.61, 0.6, 0.6, 0.62, 0.59]
    free = [0.0, 0.01, 0.0, 0.005, 0.0]
    assert judge_gain(_gain_runs(removed, free))[0] == "reproduced"
    verdict, measured = judge_gain(_gain_runs(UNABLATED, free))
    assert verdict == "not_reproduced", measured


def test_the_gain_judge_on_real_runs_with_the_unablated_model_in_place_of_the_mask() -> None:
    """Real runs at smoke (the tiny subject; 5 seeds, since smoke's 2 leave a Student-t interval on 1
    degree of freedom that decides nothing): the 'none' runs, relabelled as the mask, keep the whole
    in-context gain, so the judge does not report it removed."""
    control = [evaluate_once(TASK, "random-control", seed=s, layers="induction") for s in range(5)]
    unablated = [evaluate_once(TASK, "none", seed=s, layers="induction") for s in range(5)]
    for run in unablated:
        run.algorithm = "yi-to-sq"
    verdict, measured = judge_gain([unablated, control])
    assert verdict == "not_reproduced", measured


def test_the_encode_judge_says_yes_and_no() -> None:
    good = {
        "kernel_alignment_rise": [0.1, 0.12, 0.09, 0.11, 0.1],
        "centroid_above_chance": [0.5, 0.52, 0.49, 0.5, 0.51],
        "encode_layer": [0.0] * 5,
        "induction_layer": [3.0] * 5,
    }
    assert judge_encode([_runs("none", "none", good)])[0] == "reproduced"
    late = {**good, "encode_layer": [3.0] * 5, "induction_layer": [1.0] * 5}
    assert judge_encode([_runs("none", "none", late)])[0] == "not_reproduced"
    noise = {**good, "centroid_above_chance": [-0.01, 0.0, 0.01, -0.02, 0.0]}  # features carry no class
    assert judge_encode([_runs("none", "none", noise)])[0] != "reproduced"


def _bypass(above_zero_shot: list[float], excess: list[float]) -> list[list[RunResult]]:
    return [_runs("si-to-yi", "all", {"above_zero_shot": above_zero_shot, "merge_excess": excess})]


def test_the_bypass_judge_says_yes_and_no() -> None:
    merges = [0.5, 0.55, 0.52, 0.6, 0.5]
    survives = [0.15, 0.17, 0.16, 0.14, 0.15]
    assert judge_bypass(_bypass(survives, merges))[0] == "reproduced"
    killed = [0.0, 0.01, -0.01, 0.0, 0.005]  # the cut takes the in-context gain
    assert judge_bypass(_bypass(killed, merges))[0] == "not_reproduced"


def test_the_bypass_judge_fed_a_subject_that_does_not_merge_reports_no_bypass() -> None:
    """The control of issue 40: a subject whose labels read their forerunners no more than any token
    reads its previous one survives the cut because there is nothing to cut; the judge must not call that
    a bypass, whatever the accuracy does."""
    survives = [0.15, 0.17, 0.16, 0.14, 0.15]
    no_merge = [0.01, 0.02, 0.0, 0.015, 0.01]
    verdict, measured = judge_bypass(_bypass(survives, no_merge))
    assert verdict == "not_reproduced", measured


def test_the_bypass_judge_fed_the_unablated_model_needs_the_cut_to_keep_the_gain() -> None:
    """The same judge fed the unablated runs in place of the cut: the gain is the unablated one, so the
    verdict follows the merge read-out alone; fed a cut that removes the gain, it is not reproduced."""
    merges = [0.5, 0.55, 0.52, 0.6, 0.5]
    unablated_gain = [u - z for u, z in zip(UNABLATED, ZERO_SHOT, strict=True)]
    assert judge_bypass(_bypass(unablated_gain, merges))[0] == "reproduced"
    assert judge_bypass(_bypass([0.0, -0.01, 0.01, 0.0, 0.0], merges))[0] == "not_reproduced"


# ------------------------------------------------------------------------------------------------ smollm2
@pytest.mark.slow
def test_smollm2_masks_cut_exactly_the_links_they_name() -> None:
    """On SmolLM2's real-text prompts (every episode its own layout), a mask on layers 28-29 leaves those
    layers' attention at exactly zero on its links and every layer before them untouched; the label logits
    read at s_q are the whole model's; batches cut to their longest prompt change nothing."""
    pytest.importorskip("transformers")
    if importlib.util.find_spec("StaICC") is None:
        pytest.skip("staicc is not installed")
    import torch

    from iclrbench.algorithms.icl_circuit import ABLATIONS
    from iclrbench.envs.icl_circuit import IclCircuitConfig
    from iclrbench.envs.icl_circuit.subjects import SmolSubject
    from iclrbench.models.torch_threads import one_torch_thread

    config = IclCircuitConfig(subject="smollm2", layers="28-29", k=2, episodes=10, batch=2)
    subject = SmolSubject(config)
    episodes, zero = subject.episodes(3, np.random.default_rng(0))
    text = subject.lm.detokenize(episodes.ids[0][: episodes.roles.length[0]])
    assert text.startswith("sentence: ") and text.endswith(" sentiment:") and text.count("sentiment:") == 3
    assert subject.lm.detokenize(zero.ids[0][: zero.roles.length[0]]) == text[text.rindex("sentence: ") :]
    masks = ABLATIONS["yi_to_sq"](None, config, np.random.default_rng(0)).masks(episodes)
    assert sorted(masks) == [28, 29] and masks[28].shape[0] == 3
    with one_torch_thread():  # several threads may sum in another order from one pass to the next
        plain, cut = subject.trace(episodes), subject.trace(episodes, masks)
        whole = SmolSubject(dataclasses.replace(config, batch=3)).trace(episodes)
        with torch.inference_mode():
            full = [
                subject.lm.model(torch.from_numpy(episodes.ids[i : i + 1, : episodes.roles.length[i]]))
                .logits[0, -1, torch.from_numpy(episodes.label_tokens[i])]
                .numpy()
                for i in range(3)
            ]
    assert np.abs(cut.retrieve[28:]).max() == 0.0 and np.abs(plain.retrieve[28:]).max() > 0
    np.testing.assert_array_equal(cut.sq_hidden[:28], plain.sq_hidden[:28])
    assert np.abs(cut.label_logits - plain.label_logits).max() > 1e-3
    np.testing.assert_allclose(plain.label_logits, np.stack(full), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(whole.label_logits, plain.label_logits, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_smollm2_runs_share_their_cached_reference_passes(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A SmolLM2 run at k=4 reports its zero-shot accuracy from the same queries; a second mask of the same
    seed reads the cached unablated and zero-shot passes (the same figures, one file); k=0 works."""
    pytest.importorskip("transformers")
    if importlib.util.find_spec("StaICC") is None:
        pytest.skip("staicc is not installed")
    from iclrbench.envs.icl_circuit import subjects

    monkeypatch.setattr(subjects, "cache_root", lambda: tmp_path)  # the reference passes only: not the model
    small = {"budget": "small", "episodes": 10, "batch": 5}  # small's data and gate, 10 test items
    none = evaluate_once(TASK, "none", layers="none", **small)
    cut = evaluate_once(TASK, "si-to-yi", layers="all", **small)
    assert len(list((tmp_path / TASK).glob("reference-*.npz"))) == 1
    for key in ("unablated_accuracy", "zero_shot_accuracy", "merge_excess", "induction_quarter"):
        assert cut.metrics[key] == none.metrics[key], key
    assert none.metrics["chance"] == pytest.approx(1 / 3) and none.metrics["masked_layers"] == 0
    assert cut.metrics["masked_layers"] == 30
    zero = evaluate_once(TASK, "yi-to-sq", layers="all", k=0, **small)
    assert (
        zero.metrics["accuracy"] == zero.metrics["zero_shot_accuracy"] == none.metrics["zero_shot_accuracy"]
    )
    assert zero.metrics["merge_excess"] == 0.0 and zero.metrics["icl_gain"] == 0.0
