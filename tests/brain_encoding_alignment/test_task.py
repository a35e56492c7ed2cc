"""brain-encoding-alignment through the runner and the CLI at smoke (real MiniLM features): every metric,
the reference recovering the true shares where the unnormalised and shuffled pipelines cannot,
determinism, feature sets, regions and repeats it cannot use refused, and the claim judges saying yes, no
and inconclusive."""

from __future__ import annotations

import numpy as np
import pytest

from iclrbench.benchmarks.brain_encoding_alignment import (
    BrainEncodingTask,
    judge_null,
    judge_recovery,
    judge_vision,
)
from iclrbench.core.result import RunResult
from iclrbench.testing import evaluate_once, fake_runs
from tests.conftest import Refused

TASK = "brain-encoding-alignment"
if BrainEncodingTask.unavailable():
    pytest.skip(BrainEncodingTask.unavailable() or "", allow_module_level=True)
DECLARED = {m.name for m in BrainEncodingTask.metrics}


@pytest.fixture(scope="module")
def outcomes() -> dict[str, RunResult]:
    names = (
        "himalaya-ridge",
        "ols",
        "global-alpha",
        "no-nc-normalisation",
        "sklearn-ridgecv",
        "shuffled-control",
    )
    return {name: evaluate_once(TASK, name) for name in names}


def test_runs_report_every_declared_metric(outcomes: dict[str, RunResult]) -> None:
    for name, outcome in outcomes.items():
        m = outcome.metrics
        assert set(m) == DECLARED and all(np.isfinite(v) for v in m.values()), name
        assert m["recovery_error"] >= 0 and 0 <= m["noise_ceiling_error"] < 0.2, name
        assert -1 <= m["ranking_agreement"] <= 1, name
        assert set(outcome.curves) == {"r2_early_visual", "r2_category", "r2_count", "r2_mixed"}


def test_every_run_carries_the_image_tower_in_its_provenance(outcomes: dict[str, RunResult]) -> None:
    from iclrbench.models.vision_language import TOWER_FLOORS, tower_quality

    for name, outcome in outcomes.items():  # the clip set is the tower's features
        assert outcome.provenance["artifacts"] == {"image tower": tower_quality().as_json()}, name
    assert outcome.provenance["artifacts"]["image tower"]["floors"] == [str(f) for f in TOWER_FLOORS]


def test_the_reference_recovers_what_the_baselines_cannot(outcomes: dict[str, RunResult]) -> None:
    ref = outcomes["himalaya-ridge"].metrics
    assert ref["recovery_error"] < 0.05 and ref["ranking_agreement"] > 0.7
    for region in ("category", "count"):  # regions a feature set spans almost whole
        assert ref[f"r_norm_{region}"] == pytest.approx(1.0, abs=0.15), region
    raw = outcomes["no-nc-normalisation"].metrics
    # the same fits, unnormalised: every share shrinks by the noise ceiling
    assert raw["mixed_shared_error"] < ref["mixed_shared_error"] - 0.03
    assert raw["r_norm_category"] < ref["r_norm_category"]
    null = outcomes["shuffled-control"].metrics
    assert null["recovery_error"] > 0.1
    # the shuffled fit's R2 is near 0 where the reference's is far from it; its r need not be (one spurious
    # direction correlates with a low-dimensional region's voxels alike)
    for region in ("early_visual", "category", "count", "mixed"):
        assert abs(null[f"r2_norm_{region}"]) < 0.1 and ref[f"r2_norm_{region}"] > 0.4, region


def test_the_same_seed_gives_the_same_run(outcomes: dict[str, RunResult]) -> None:
    again = evaluate_once(TASK, "himalaya-ridge")
    for key, value in outcomes["himalaya-ridge"].metrics.items():
        if key != "seconds":
            assert again.metrics[key] == pytest.approx(value, rel=1e-9), key
    other = evaluate_once(TASK, "himalaya-ridge", seed=1)
    assert other.metrics["recovery_error"] != outcomes["himalaya-ridge"].metrics["recovery_error"]


def test_a_user_partition_is_the_primary_metric(outcomes: dict[str, RunResult]) -> None:
    outcome = evaluate_once(TASK, "himalaya-ridge", partitions="category:caption+clip")
    assert "category:caption+clip" in outcome.notes and "mixed:caption+count" in outcome.notes
    assert outcome.metrics["recovery_error"] < 0.1
    assert outcome.metrics["recovery_error"] != outcomes["himalaya-ridge"].metrics["recovery_error"]
    # the claims' shares are the same either way
    assert outcome.metrics["mixed_shared_error"] == outcomes["himalaya-ridge"].metrics["mixed_shared_error"]


@pytest.mark.parametrize(
    ("setting", "needle"),
    [
        ("feature_sets=caption,count,vision,clop", "unknown feature set 'clop'"),
        ("partitions=visual:caption+count", "unknown region 'visual'"),
        ("repeats=1", "two repeats"),
        ("feature_sets=caption,vision", "must include"),
    ],
)
def test_feature_sets_regions_and_repeats_it_cannot_use_are_refused(
    refused: Refused, setting: str, needle: str
) -> None:
    error = refused("run", TASK, "himalaya-ridge", "--set", setting, "--budget", "smoke", "--seeds", "0")
    assert needle in error


# ------------------------------------------------------------------------------------------------ judges
def _runs(algorithm: str, **metrics: list[float]) -> list[RunResult]:
    runs = fake_runs(TASK, algorithm, range(5), {})
    for i, r in enumerate(runs):
        r.metrics.update({name: values[i] for name, values in metrics.items()})
    return runs


def test_the_recovery_judge() -> None:
    small = [0.001, -0.002, 0.003, 0.0, -0.001]
    good = [_runs("himalaya-ridge", count_unique_error=small, mixed_shared_error=small, recovery_error=small)]
    assert judge_recovery(good)[0] == "reproduced"
    off = [v - 0.06 for v in small]
    bad = [_runs("himalaya-ridge", count_unique_error=small, mixed_shared_error=off, recovery_error=small)]
    assert judge_recovery(bad)[0] == "not_reproduced"
    wide = [0.03, -0.03, 0.02, -0.02, 0.0]
    assert judge_recovery([_runs("himalaya-ridge", count_unique_error=wide, mixed_shared_error=small)])[
        0
    ] == ("inconclusive")
    assert judge_recovery([])[0] == "inconclusive"


def test_the_vision_and_null_judges() -> None:
    yes = _runs(
        "himalaya-ridge",
        instruction_vs_vision_category=[0.5, 0.6, 0.55, 0.5, 0.52],
        instruction_vs_vision_early_visual=[-0.4, -0.5, -0.45, -0.4, -0.42],
    )
    assert judge_vision([yes])[0] == "reproduced"
    no = _runs(
        "himalaya-ridge",
        instruction_vs_vision_category=[-0.5, -0.6, -0.55, -0.5, -0.52],
        instruction_vs_vision_early_visual=[-0.4, -0.5, -0.45, -0.4, -0.42],
    )
    assert judge_vision([no])[0] == "not_reproduced"
    regions = ("early_visual", "category", "count", "mixed")
    quiet = _runs(
        "shuffled-control", **{f"r2_norm_{r}": [0.001, -0.002, 0.0, 0.002, -0.001] for r in regions}
    )
    assert judge_null([quiet])[0] == "reproduced"
    loud = _runs("shuffled-control", **{f"r2_norm_{r}": [0.3, 0.31, 0.29, 0.3, 0.3] for r in regions})
    assert judge_null([loud])[0] == "not_reproduced"
    noisy = _runs("shuffled-control", **{f"r2_norm_{r}": [0.08, -0.07, 0.06, -0.05, 0.0] for r in regions})
    assert judge_null([noisy])[0] == "inconclusive"
    # r is not what the null is judged on: a spread of r with R2 at 0 is still null
    spread = _runs(
        "shuffled-control",
        **{f"r2_norm_{r}": [0.001, -0.002, 0.0, 0.002, -0.001] for r in regions},
        **{f"r_norm_{r}": [0.5, -0.48, 0.3, -0.2, 0.1] for r in regions},
    )
    assert judge_null([spread])[0] == "reproduced"
