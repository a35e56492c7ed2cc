"""A trained artifact's quality travels with every run and every verdict (issue 53): the floors fail a run
that rests on an unfinished model, the figures land in the run's provenance, and ``bench claims`` and the
claims panel show them beside the verdict."""

from __future__ import annotations

import dataclasses
import html

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iclrbench.claims import check_claims
from iclrbench.core.algorithm import Algorithm
from iclrbench.core.artifact import (
    ARTIFACTS_KEY,
    ArtifactBelowFloor,
    ArtifactQuality,
    Floor,
    provenance_entry,
    summarise,
)
from iclrbench.core.store import ResultStore
from iclrbench.core.task import Outcome
from iclrbench.leaderboard.claims_panel import claim_views
from iclrbench.leaderboard.html import render_html
from tests.core.test_testing import Install, ToyConfig, ToyTask, install  # noqa: F401  (a fixture)

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20)
figures = st.dictionaries(
    st.from_regex(r"[a-z][a-z_]{0,11}", fullmatch=True), st.floats(-1e6, 1e6, allow_nan=False), max_size=4
)


@st.composite
def qualities(draw: st.DrawFn) -> ArtifactQuality:
    figs = draw(figures)
    floors = tuple(
        Floor(k, draw(st.sampled_from([">=", "<="])), draw(st.floats(-1e6, 1e6, allow_nan=False)))
        for k in figs
    )
    return ArtifactQuality(draw(names), figs, floors, {k: abs(v) for k, v in figs.items()}, draw(names))


@given(qualities())
def test_quality_round_trips_through_provenance_json(quality: ArtifactQuality) -> None:
    back = ArtifactQuality.from_json(quality.name, quality.as_json())
    assert back.figures == quality.figures
    assert back.tolerance == quality.tolerance
    assert back.trained == quality.trained
    assert [(f.figure, f.op) for f in back.floors] == [(f.figure, f.op) for f in quality.floors]
    assert all(
        a.bound == pytest.approx(b.bound, rel=1e-5) for a, b in zip(back.floors, quality.floors, strict=True)
    )


@given(qualities())
def test_check_passes_exactly_when_no_floor_is_missed(quality: ArtifactQuality) -> None:
    missed = [f for f in quality.floors if not f.holds(quality.figures[f.figure])]
    if missed:
        with pytest.raises(ArtifactBelowFloor) as caught:
            quality.check("train longer")
        assert all(f.figure in str(caught.value) for f in missed)
        assert str(caught.value).endswith("train longer")
        assert "\n" not in str(caught.value)
    else:
        assert quality.check() is quality


def test_a_floor_names_the_figure_its_value_and_the_bound() -> None:
    q = ArtifactQuality(
        "tiny subject", {"accuracy": 0.61}, (Floor("accuracy", ">=", 0.95),), trained="300 steps"
    )
    with pytest.raises(
        ArtifactBelowFloor, match=r"tiny subject .*accuracy 0\.61 \(needs >= 0\.95\).*300 steps"
    ):
        q.check()
    with pytest.raises(ValueError, match="floor op"):
        Floor("accuracy", ">", 0.9)


def test_summary_gives_a_range_only_where_runs_differ() -> None:
    a = ArtifactQuality(
        "subject", {"accuracy": 0.98, "loss": 0.1}, (Floor("accuracy", ">=", 0.9),), trained="x"
    )
    b = dataclasses.replace(a, figures={"accuracy": 0.99, "loss": 0.1})
    line = summarise([{"artifacts": provenance_entry([a])}, {"artifacts": provenance_entry([b])}, {}])
    assert line == {"subject": "accuracy 0.98 to 0.99, loss 0.1 (floors: accuracy >= 0.9); x"}
    assert summarise([{}, {"artifacts": None}]) == {}


# ------------------------------------------------------------------------------------- through the runner
QUALITY = ArtifactQuality(
    "toy <model>", {"accuracy": 0.97}, (Floor("accuracy", ">=", 0.9),), {"accuracy": 0.01}, "40 steps"
)


class ArtifactTask(ToyTask):
    """The toy task, resting on a 'trained' model whose quality is the config's mean: below 0.9 it fails."""

    id = "toy-artifact"

    def evaluate(self, algorithm: Algorithm, config: ToyConfig, seed: int) -> Outcome:
        quality = dataclasses.replace(QUALITY, figures={"accuracy": config.mean}).check("train longer")
        return dataclasses.replace(super().evaluate(algorithm, config, seed), artifacts=(quality,))

    def evaluate_many(self, algorithms, config, seeds):  # type: ignore[no-untyped-def]
        return [self.evaluate(a, config, s) for a, s in zip(algorithms, seeds, strict=True)]


def test_runs_carry_the_quality_and_verdicts_show_it(install: Install, tmp_path) -> None:  # noqa: F811
    tid = install(ArtifactTask)
    store = ResultStore(tmp_path / "r.sqlite")
    (verdict,) = check_claims(tid, "small", store)
    assert verdict.verdict == "inconclusive"
    runs = store.runs(tid)
    assert runs and all(
        r.provenance["artifacts"]["toy <model>"]["figures"] == {"accuracy": 0.5} for r in runs
    )
    # a mean of 0.5 is below the floor: every run fails, saying why, and nothing is judged on them
    assert {r.status for r in runs} == {"failed"}
    assert all("did not reach its floors (accuracy 0.5 (needs >= 0.9))" in r.error for r in runs)


def test_the_panel_shows_each_artifact_beside_the_verdict(install: Install, tmp_path) -> None:  # noqa: F811
    tid = install(type("Good", (ArtifactTask,), {"id": "toy-artifact-good", "budgets": _good_budgets()}))
    store = ResultStore(tmp_path / "r.sqlite")
    (verdict,) = check_claims(tid, "small", store)
    assert verdict.verdict == "reproduced"
    assert verdict.measured[ARTIFACTS_KEY] == {
        "toy <model>": "accuracy 0.97 (floors: accuracy >= 0.9); 40 steps"
    }
    (view,) = claim_views(tid, store.claims(tid))
    assert view.artifacts == (("toy <model>", "accuracy 0.97 (floors: accuracy >= 0.9); 40 steps"),)
    assert ARTIFACTS_KEY not in view.measured  # beside the verdict, not among its figures
    page = render_html([], store.claims(tid))
    assert f"measured on the {html.escape('toy <model>')}: accuracy 0.97" in page
    assert "toy <model>" not in page  # escaped


def _good_budgets() -> dict:
    return {
        name: dataclasses.replace(b, overrides={**b.overrides, "mean": 0.97})
        for name, b in ToyTask.budgets.items()
    }
