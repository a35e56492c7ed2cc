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

from iclrbench.benchmarks.brain_encoding_alignment import BrainEncodingTask
from iclrbench.benchmarks.federated_prompt_mixture import FederatedPromptTask
from iclrbench.claims import check_claims
from iclrbench.core.artifact import ArtifactQuality
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


def test_the_caller_s_thread_count_does_not_reach_the_training(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tiny pre-training (20 images a class, 2 epochs) under 1 and under 2 torch threads: the same tower,
    trained on one thread both times."""
    for key, value in {
        "images_per_class": 20,
        "held_out_per_class": 5,
        "max_epochs": 2,
        "batch_size": 32,
    }.items():
        monkeypatch.setitem(vl.PRETRAIN, key, value)
    seen: list[int] = []
    train = vl._pretrain

    def spy(*args: object) -> dict[str, object]:
        seen.append(torch.get_num_threads())
        return train(*args)

    monkeypatch.setattr(vl, "_pretrain", spy)
    before = torch.get_num_threads()
    towers = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            towers.append(vl.pretrain_image_tower())
            assert torch.get_num_threads() == threads  # restored
    finally:
        torch.set_num_threads(before)
    assert seen == [1, 1]
    one, two = towers
    assert one["quality"]["figures"] == two["quality"]["figures"] and one["logit_scale"] == two["logit_scale"]
    assert all(torch.equal(one["state"][k], two["state"][k]) for k in one["state"])


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
#: claims whose verdict at smoke the tower's rounding flips: none since task version 5 (issue 53). Before
#: it, smoke trained 1 local epoch a round, the prompts barely moved, and methods tied exactly on every
#: seed: pathological pFedMoAP and PromptFL both 0.9792 (a zero-width interval below +1 point:
#: not_reproduced) on one tower, 0.974 vs 0.969 (inconclusive) on the other. At 5 local epochs, on this
#: machine's two towers, both claims came out inconclusive on both.
FLIPS_AT_SMOKE: set[tuple[str, str]] = set()
CLAIMS = [
    pytest.param(
        task,
        claim.id,
        marks=[
            pytest.mark.xfail(
                reason="flips with the tower's rounding at smoke (FLIPS_AT_SMOKE)", strict=False
            )
        ]
        if (task, claim.id) in FLIPS_AT_SMOKE
        else [],
        id=f"{task}:{claim.id}",
    )
    for task, claims in ((BRAIN, BrainEncodingTask.claims), (FEDERATED, FederatedPromptTask.claims))
    for claim in claims
]


@dataclasses.dataclass(frozen=True)
class TwoTowers:
    """The tower as built and one trained again from a 1e-6 perturbation, with both tasks' verdicts at
    smoke on each: ``verdicts[tower][task][claim id]``."""

    built: ArtifactQuality
    perturbed: ArtifactQuality
    verdicts: dict[str, dict[str, dict[str, str]]]


def _verdicts(task: str, db: Path) -> dict[str, str]:
    with ResultStore(db) as store:
        claims = check_claims(task, "smoke", store)
    for c in claims:  # -s shows what each verdict was measured on
        figures = {
            k: v["effect"] if isinstance(v, dict) and "effect" in v else v for k, v in c.measured.items()
        }
        print(task, c.id, c.verdict, {k: v for k, v in figures.items() if k not in ("artifacts", "rule")})
    return {c.id: c.verdict for c in claims}


@pytest.fixture(scope="module")
def two_towers(tmp_path_factory: pytest.TempPathFactory) -> TwoTowers:
    """~9 min on 2 idle cores (a tower trained, 2 x 18 runs at smoke), 18 on busy ones."""
    tmp = tmp_path_factory.mktemp("towers")
    built = vl.tower_quality()
    verdicts = {"built": {task: _verdicts(task, tmp / f"built-{task}.sqlite") for task in (BRAIN, FEDERATED)}}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ICLRBENCH_CACHE", str(tmp / "cache"))  # Flower's actors read it too
        path = vl.image_tower_path()
        path.parent.mkdir(parents=True)
        vl.write_image_tower(path, perturb=1e-6)
        perturbed = vl.tower_quality()
        verdicts["perturbed"] = {
            task: _verdicts(task, tmp / f"perturbed-{task}.sqlite") for task in (BRAIN, FEDERATED)
        }
    print(f"image tower: as built {dict(built.figures)}, perturbed {dict(perturbed.figures)}")
    return TwoTowers(built, perturbed, verdicts)


@pytest.mark.long
@pytest.mark.timeout(3600)
def test_a_perturbed_tower_lands_within_tolerance(two_towers: TwoTowers) -> None:
    built, perturbed = two_towers.built.figures, two_towers.perturbed.figures
    assert perturbed != built  # another tower, not the cached one read again
    for figure, tolerance in vl.TOWER_TOLERANCE.items():
        assert abs(perturbed[figure] - built[figure]) <= tolerance, (figure, built[figure], perturbed[figure])
    assert two_towers.perturbed.check() is two_towers.perturbed


@pytest.mark.long
@pytest.mark.timeout(3600)
@pytest.mark.parametrize(("task", "claim"), CLAIMS)
def test_both_towers_give_the_same_verdicts_at_smoke(two_towers: TwoTowers, task: str, claim: str) -> None:
    built, perturbed = (
        two_towers.verdicts["built"][task][claim],
        two_towers.verdicts["perturbed"][task][claim],
    )
    assert built == perturbed, (
        f"{task} {claim}: {built} on the tower as built, {perturbed} on the perturbed one"
    )
