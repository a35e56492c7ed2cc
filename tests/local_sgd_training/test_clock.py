"""The virtual clock's charge for a sync (issue 42): EDiT's layer-wise sync overlaps each module's transfer
with the forward computation of the modules before it; a whole-model sync (DiLoCo) pays the whole
transfer; DDP's bucketed all-reduce overlaps each module's gradients with the backward of the modules
before it. And the efficiency claim's judge, which rests on that clock, with its negative controls."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclrbench.benchmarks.local_sgd_training import EFFICIENCY_ARMS, judge_efficiency
from iclrbench.core.result import RunResult
from iclrbench.envs.local_sgd_training import bucketed_allreduce_time, layerwise_sync_time
from iclrbench.testing import fake_run

TASK = "local-sgd-training"


def test_a_worked_pipeline() -> None:
    # module 0's transfer (1) has nothing to hide behind; module 1's (1) runs during module 0's forward (2)
    assert layerwise_sync_time([1.0, 1.0], [2.0, 2.0]) == pytest.approx(1.0)
    # a slow link: module 1 waits for its transfer after module 0's forward is done
    assert layerwise_sync_time([1.0, 3.0], [1.0, 1.0]) == pytest.approx(1.0 + 3.0 - 1.0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 10.0), st.floats(0.0, 10.0)), min_size=1, max_size=8))
def test_overlap_hides_at_most_the_compute_before_the_last_module(pairs: list[tuple[float, float]]) -> None:
    transfers, forwards = [t for t, _ in pairs], [f for _, f in pairs]
    charged = layerwise_sync_time(transfers, forwards)
    tol = 1e-9 * (1 + sum(transfers) + sum(forwards))
    assert charged <= sum(transfers) + tol  # never more than the whole transfer
    assert charged >= transfers[0] - tol  # the first module's transfer is never hidden
    assert charged >= sum(transfers) - sum(forwards[:-1]) - tol  # only earlier modules' compute hides it
    assert layerwise_sync_time(transfers, [0.0] * len(forwards)) == pytest.approx(sum(transfers))


def test_a_worked_bucketed_allreduce() -> None:
    # backward order: the last module's gradients (1) go while the first module's backward (2) runs
    assert bucketed_allreduce_time([1.0, 2.0], [1.0, 1.0]) == pytest.approx(1.0)
    # a slow link: the second bucket waits for the first
    assert bucketed_allreduce_time([1.0, 1.0], [3.0, 1.0]) == pytest.approx(3.0 + 1.0 - 1.0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 10.0), st.floats(0.0, 10.0)), min_size=1, max_size=8))
def test_buckets_are_the_forward_overlap_run_backwards(pairs: list[tuple[float, float]]) -> None:
    """A two-stage pipeline reversed, with its stages swapped, takes as long: DDP's buckets (compute, then
    send, last module first) charge exactly what the layer-wise sync (send, then compute) charges on the
    reversed modules, so every bound above holds for them mirrored, and neither schedule is favoured."""
    backwards, transfers = [b for b, _ in pairs], [t for _, t in pairs]
    tol = 1e-9 * (1 + sum(transfers) + sum(backwards))
    mirrored = layerwise_sync_time(transfers[::-1], backwards[::-1])
    assert bucketed_allreduce_time(backwards, transfers) == pytest.approx(mirrored, abs=tol)


def _arms(times: dict[str, float]) -> list[list[RunResult]]:
    jitter = (0.0, 1.0, -1.0, 2.0, -2.0)
    return [
        [
            fake_run(TASK, name, s, {"time_to_target": times[name] + jitter[s], "reached_target": 1.0,
                                     "val_loss": 3.5}, config={"link_mb_per_unit": 0.5}, budget="small")
            for s in range(5)
        ]
        for name in times
    ]  # fmt: skip


def test_efficiency_judge_says_yes_and_no() -> None:
    assert judge_efficiency(_arms({"edit": 100.0, "ddp": 180.0, "diloco": 120.0}))[0] == "reproduced"
    # negative controls: EDiT no faster than DiLoCo, or than DDP
    assert judge_efficiency(_arms({"edit": 120.0, "ddp": 180.0, "diloco": 120.0}))[0] == "not_reproduced"
    assert judge_efficiency(_arms({"edit": 100.0, "ddp": 90.0, "diloco": 120.0}))[0] == "not_reproduced"
    assert judge_efficiency([[], [], []])[0] == "inconclusive"
    # CO2 is beside: its times do not decide the verdict, and it is reported
    verdict, measured = judge_efficiency(_arms({"edit": 100.0, "ddp": 180.0, "diloco": 120.0, "co2": 90.0}))
    assert verdict == "reproduced" and measured["time_to_target"]["co2"] == pytest.approx(90.0)
    assert set(EFFICIENCY_ARMS) == {"edit", "ddp", "diloco", "co2"}
