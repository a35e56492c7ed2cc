"""The vision-language image tower as a trained artifact (issue 53): it trains until its validation retrieval
plateaus, its quality is measured on held-out images once and saved with its weights, every run of the two
tasks that rest on it checks that quality against the floors and carries it in its provenance, and a tower
trained again from a tiny perturbation lands within the stated tolerance and gives the same verdicts.

The tower trains inside ``one_torch_thread()`` whatever the caller's thread count, so training it under 1
and 2 threads gives the same tower bit for bit; another machine's rounding is stood in for by a 1e-6
perturbation of the initial weights, which moves the trajectory from the first epoch on."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from iclrbench.claims import check_claims
from iclrbench.core.store import ResultStore
from iclrbench.testing import evaluate_once
from iclrbench.testing.runs import RunFailed

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
vl = pytest.importorskip("iclrbench.models.vision_language")

BRAIN = "brain-encoding-alignment"
FEDERATED = "federated-prompt-mixture"


# ------------------------------------------------------------------------------------------ convergence
@pytest.mark.parametrize(
    ("history", "stop", "best"),
    [
        ([], False, 0),
        ([0.3], False, 0),
        ([0.1, 0.5, 0.9, 0.9, 0.9, 0.9, 0.9], True, 2),  # flat for 4 epochs after the best
        ([0.1, 0.5, 0.9, 0.9, 0.9, 0.9], False, 2),  # flat for 3 only
        ([0.1, 0.5, 0.9, 0.2, 0.1, 0.3, 0.904], True, 2),  # a collapse and a rise within min_delta
        ([0.1, 0.5, 0.9, 0.2, 0.1, 0.3, 0.95], False, 6),  # a collapse, then a new best
        ([0.9, 0.903, 0.906, 0.909, 0.912], False, 4),  # creeping up by 0.003: a rise every 2 epochs
    ],
)
def test_plateaued_is_the_patience_criterion(history: list[float], stop: bool, best: int) -> None:
    assert vl.plateaued(history, patience=4, min_delta=0.005) == (stop, best)


# ------------------------------------------------------------------------------------- the cached tower
def test_the_quality_is_saved_with_the_weights_and_loaded_not_measured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    quality = vl.tower_quality()  # builds the tower if the cache has none
    saved = torch.load(vl.image_tower_path(), weights_only=True)
    assert saved["quality"]["figures"] == dict(quality.figures)
    assert set(quality.figures) == {"retrieval_accuracy", "zero_shot_accuracy", "held_out_loss"}
    assert quality.check() is quality, quality.shortfalls()
    assert saved["quality"]["converged"], saved["quality"]["trained"]
    assert saved["quality"]["best_epoch"] <= saved["quality"]["epochs"] < vl.PRETRAIN["max_epochs"]
    assert f"{saved['quality']['epochs']} epochs" in quality.trained

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the tower's quality was measured again on load")

    monkeypatch.setattr(vl, "measure_tower", never)
    monkeypatch.setattr(vl, "pretrain_image_tower", never)
    vl._load.cache_clear()
    assert vl.tower_quality() == quality  # read back from the file


@pytest.mark.parametrize("task", [BRAIN, FEDERATED])
def test_a_tower_below_its_floors_fails_the_run_saying_so(task: str, monkeypatch: pytest.MonkeyPatch) -> None:
    good = vl.tower_quality()
    bad = dataclasses.replace(good, figures={**good.figures, "zero_shot_accuracy": 0.41})
    monkeypatch.setattr(vl, "tower_quality", lambda: bad)
    with pytest.raises(RunFailed) as failed:
        evaluate_once(task, "zero-shot" if task == FEDERATED else "himalaya-ridge")
    result = failed.value.result
    assert result.status == "failed" and result.error.startswith("ArtifactBelowFloor: the image tower")
    (floor,) = [f for f in vl.TOWER_FLOORS if f.figure == "zero_shot_accuracy"]
    assert f"zero_shot_accuracy 0.41 (needs >= {floor.bound:g})" in result.error and "\n" not in result.error
    assert str(vl.image_tower_path()) in result.error  # how to fix it
    assert result.provenance["artifacts"] == {"image tower": bad.as_json()}  # the figures that failed it


def test_a_brain_run_without_the_clip_set_does_not_rest_on_the_tower(monkeypatch: pytest.MonkeyPatch) -> None:
    good = vl.tower_quality()
    monkeypatch.setattr(vl, "tower_quality", lambda: dataclasses.replace(good, figures={}))
    no_clip = "caption,count,colour,position,vision"
    result = evaluate_once(BRAIN, "ols", feature_sets=no_clip, images=80, voxels_per_region=4)
    assert "artifacts" not in result.provenance


# ------------------------------------------------------------------------------- trained again, perturbed
def _verdicts(task: str, db: Path) -> dict[str, str]:
    with ResultStore(db) as store:
        return {c.id: c.verdict for c in check_claims(task, "smoke", store)}


@pytest.mark.long
def test_a_perturbed_tower_lands_within_tolerance_and_gives_the_same_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    default = vl.tower_quality()
    verdicts = {task: _verdicts(task, tmp_path / f"default-{task}.sqlite") for task in (BRAIN, FEDERATED)}

    monkeypatch.setenv("ICLRBENCH_CACHE", str(tmp_path / "cache"))  # Flower's actors read it too
    path = vl.image_tower_path()
    path.parent.mkdir(parents=True)
    vl.write_image_tower(path, perturb=1e-6)
    perturbed = vl.tower_quality()
    assert perturbed.figures != default.figures  # another tower, not the cached one read again
    for figure, tolerance in vl.TOWER_TOLERANCE.items():
        assert abs(perturbed.figures[figure] - default.figures[figure]) <= tolerance, (
            figure,
            default.figures[figure],
            perturbed.figures[figure],
        )
    for task in (BRAIN, FEDERATED):
        assert _verdicts(task, tmp_path / f"perturbed-{task}.sqlite") == verdicts[task], task
