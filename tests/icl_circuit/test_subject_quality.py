"""The tiny subject's verdicts do not depend on the machine (issue 53): trained from the same seed on one
torch thread and on two (float sums in another order, as on another CPU), it converges to the same quality
within the stated tolerance, and the claims at ``smoke`` give the same verdicts on both copies.

Long: it trains the default subject twice (about 4 and 2 minutes on 2 cores)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from iclrbench.benchmarks.icl_circuit import IclCircuitTask
from iclrbench.claims import check_claims
from iclrbench.core.store import ResultStore
from iclrbench.envs.icl_circuit import IclCircuitConfig, train_tiny
from iclrbench.envs.icl_circuit.subjects import TOLERANCE, tiny_path

if IclCircuitTask.unavailable():
    pytest.skip(IclCircuitTask.unavailable() or "", allow_module_level=True)


def _train(threads: int) -> dict[str, float]:
    """The default subject trained on ``threads`` torch threads (the task trains on one: this is the other
    machine), saved where the task's runs load it from."""
    config = IclCircuitConfig()
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        model, quality = train_tiny(config)
    finally:
        torch.set_num_threads(saved)
    path = tiny_path(config)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state": model.state_dict(), "quality": quality}, path)
    return quality


@pytest.fixture(scope="module")
def copies(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, tuple[Path, dict[str, float]]]]:
    out = {}
    with pytest.MonkeyPatch.context() as patch:
        for threads in (1, 2):
            cache = tmp_path_factory.mktemp(f"cache-{threads}-threads")
            patch.setenv("ICLRBENCH_CACHE", str(cache))
            out[threads] = (cache, _train(threads))
    yield out


@pytest.mark.long
def test_the_subject_converges_to_the_same_quality_on_one_and_two_threads(copies: dict) -> None:
    (_, one), (_, two) = copies[1], copies[2]
    for figure, tolerance in TOLERANCE.items():
        assert abs(one[figure] - two[figure]) <= tolerance, (figure, one[figure], two[figure])
    for quality in (one, two):  # both past the transition, not stopped by the cap
        assert 0 < quality["floors_met_at"] < quality["steps"] <= IclCircuitConfig().max_train_steps


@pytest.mark.long
def test_the_claims_at_smoke_give_the_same_verdicts_on_both_copies(
    copies: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    verdicts = {}
    for threads, (cache, _) in copies.items():
        monkeypatch.setenv("ICLRBENCH_CACHE", str(cache))
        with ResultStore(tmp_path / f"{threads}.sqlite") as store:
            verdicts[threads] = {v.id: v.verdict for v in check_claims("icl-circuit", "smoke", store)}
    assert verdicts[1] == verdicts[2]
