"""The tiny llama's quality (issue 53): measured once when it is trained, kept beside its GGUF file, checked
against its floors before a run rests on it, recorded in every run's provenance; and a verdict that does not
depend on the machine: trained again on another thread count from weights perturbed by 1e-6 (what another
CPU's rounding does to the same seed), it converges to the same quality within the stated tolerance, and
the claims at ``smoke`` give the same verdicts on both copies.

The long test trains the smoke model twice (about 1 minute each on 2 busy cores) and runs the smoke claims
on each copy (16 runs each)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from iclrbench.benchmarks.mobile_llm_profiling import MobileLLMTask, tiny_spec
from iclrbench.claims import check_claims
from iclrbench.core.artifact import ArtifactQuality
from iclrbench.core.store import ResultStore
from iclrbench.envs.mobile_llm_profiling import tiny_llama
from iclrbench.testing import RunFailed, evaluate_once

TASK = "mobile-llm-profiling"
if MobileLLMTask.unavailable():
    pytest.skip(MobileLLMTask.unavailable() or "", allow_module_level=True)
SMOKE = tiny_spec(MobileLLMTask().make_config("smoke"))


def test_the_smoke_model_converged_and_keeps_its_quality_beside_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trained until converged (not stopped by the cap: one cycle of 150 steps left it knowing 13 of its
    24 facts), its figures above the floors; read back from ``report.json`` without measuring it again."""
    path = tiny_llama.tiny_model_path(SMOKE)
    report = json.loads((path.parent / "report.json").read_text())
    assert report["converged"] and 1 < report["cycles"] < tiny_llama.MAX_CYCLES, report["trained"]
    assert report["curve"][-1][1] == report["curve"][-2][1] == 1.0
    assert report["steps"] == report["cycles"] * SMOKE.steps
    monkeypatch.setattr(tiny_llama, "measure_quality", _never)
    quality = tiny_llama.tiny_quality(SMOKE)
    assert quality.figures["fact_accuracy"] == 1.0 and not quality.shortfalls()
    assert quality.trained == report["trained"] and ", converged" in quality.trained
    assert set(quality.tolerance) == set(quality.figures)


def _never(*_: object) -> dict[str, float]:
    raise AssertionError("a cached model's quality is read, never measured again")


def test_a_run_records_the_model_it_rests_on() -> None:
    """The run's provenance carries the tiny llama's quality, and the full model knows every fact asked
    (its accuracy, measured at training on all the questions, is what the run's reference answers show)."""
    result = evaluate_once(TASK, "torch-fp32")
    recorded = result.provenance["artifacts"]["tiny llama"]
    assert recorded == tiny_llama.tiny_quality(SMOKE).as_json()
    assert recorded["floors"] == [str(f) for f in tiny_llama.FLOORS]
    assert "full model knows 12/12 facts" in result.notes


def test_a_model_below_its_floors_fails_the_run_with_one_clear_line() -> None:
    """In cycles of 10 steps (4 at most) the model knows almost nothing: the run fails before any analysis,
    saying which figure missed which floor and how to fix it."""
    with pytest.raises(RunFailed) as failed:
        evaluate_once(TASK, "torch-fp32", tiny_steps=10)
    error = failed.value.result.error
    assert "the tiny llama did not reach its floors (fact_accuracy" in error and "needs >= 0.9" in error
    assert "40 steps, 4 one-cycle rounds of 10, not converged" in error and "--set tiny_steps=20" in error
    kept = failed.value.result.provenance["artifacts"]["tiny llama"]  # the figures that failed it
    assert kept["figures"]["fact_accuracy"] < 0.9 and kept["floors"] == [str(f) for f in tiny_llama.FLOORS]


# ------------------------------------------------------------------- trained again, on another machine
@pytest.fixture(scope="module")
def copies(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """The smoke model trained twice, each in a cache of its own where the task's runs find it: on 2
    threads as it is, and on 1 thread from initial weights perturbed by 1e-6."""
    out = {}
    with pytest.MonkeyPatch.context() as patch:
        for name, threads, jitter in (("two threads", 2, 0.0), ("one thread, perturbed", 1, 1e-6)):
            out[name] = tmp_path_factory.mktemp(name.replace(" ", "-").replace(",", ""))
            patch.setenv("ICLRBENCH_CACHE", str(out[name]))
            patch.setattr(tiny_llama, "train_tiny", functools.partial(_train, threads=threads, jitter=jitter))
            tiny_llama.tiny_model_path(SMOKE)
    yield out


_train = tiny_llama.train_tiny


def _quality(cache: Path, monkeypatch: pytest.MonkeyPatch) -> ArtifactQuality:
    monkeypatch.setenv("ICLRBENCH_CACHE", str(cache))
    return tiny_llama.tiny_quality(SMOKE)


@pytest.mark.long
def test_the_model_lands_within_its_tolerance_when_trained_again(
    copies: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = (_quality(cache, monkeypatch) for cache in copies.values())
    for figure, tolerance in tiny_llama.TOLERANCE.items():
        assert abs(a.figures[figure] - b.figures[figure]) <= tolerance, (figure, a.figures, b.figures)
    for quality in (a, b):  # both converged, above the floors
        assert ", converged" in quality.trained and not quality.shortfalls(), quality


@pytest.fixture(scope="module")
def verdicts(copies: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """Each copy's smoke verdicts: ``{copy: {claim id: verdict}}``."""
    out, stores = {}, tmp_path_factory.mktemp("mobile-stores")
    with pytest.MonkeyPatch.context() as patch:
        for name, cache in copies.items():
            patch.setenv("ICLRBENCH_CACHE", str(cache))
            with ResultStore(stores / f"{cache.name}.sqlite") as store:
                out[name] = {v.id: v.verdict for v in check_claims(TASK, "smoke", store)}
    return out


#: two verdicts once differed between the copies (on a fresh 2-core machine, the full suite, 2026-12-06) and
#: no longer rest on what differed: the trend claim's perplexities, spanning 0.7-1.4% over the 8
#: quantisations in an order of each copy's own, are below the judge's resolution (PERPLEXITY_RESOLUTION),
#: and the roofline claim is not judged on the tiny model, whose decode rate timed beside the suite's other
#: worker swung 1,700-3,800 tokens/s
@pytest.mark.long
@pytest.mark.parametrize("claim_id", [c.id for c in MobileLLMTask.claims])
def test_the_claims_at_smoke_give_the_same_verdicts_on_both_copies(
    claim_id: str, verdicts: dict[str, dict[str, str]]
) -> None:
    first, second = (v[claim_id] for v in verdicts.values())
    assert first == second, verdicts
