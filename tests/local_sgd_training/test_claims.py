"""The penalty claim's judge (issue 42): EDiT against EDiT without its penalty under two faults, with each
arm's clean run as its baseline. It reports the effect on runs that show it, and a control does not: the
same judge fed the penalty-free control in EDiT's place (or EDiT in the control's) cannot call it
reproduced."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from iclrbench.benchmarks.local_sgd_training import PENALTY_ARMS, judge_penalty, penalty_requests
from iclrbench.core.result import RunResult
from iclrbench.testing import fake_run

TASK = "local-sgd-training"
SEEDS = range(5)
JITTER = (0.0, 0.01, -0.01, 0.02, -0.02)  # per seed, so paired differences have a spread


def arm(name: str, spike: float, val_loss: float = 3.0) -> list[RunResult]:
    return [
        fake_run(TASK, name, s, {"loss_spike": spike + JITTER[s], "val_loss": val_loss + JITTER[s] / 10,
                                 "flagged": 0.0}, budget="small")
        for s in SEEDS
    ]  # fmt: skip


def groups(edit: dict[str, float], control: dict[str, float]) -> list[list[RunResult]]:
    """In penalty_requests' order: per scenario (lr-spike, corrupt, clean), edit, the control, DiLoCo."""
    return [
        arm(name, spikes[scenario])
        for scenario in ("lr-spike", "corrupt", "clean")
        for name, spikes in zip(PENALTY_ARMS, (edit, control, control), strict=True)
    ]


SPIKY = {"lr-spike": 0.8, "corrupt": 0.6, "clean": 0.1}
CALM = {"lr-spike": 0.12, "corrupt": 0.11, "clean": 0.1}


def test_the_requests_are_three_arms_in_each_of_three_scenarios() -> None:
    requests = penalty_requests("small")
    assert [r.algorithm for r in requests] == list(PENALTY_ARMS) * 3
    assert [r.overrides.get("anomaly", "none") for r in requests[::3]] == ["lr-spike", "corrupt", "none"]


def test_edit_calm_and_its_control_spiking_is_reproduced() -> None:
    verdict, measured = judge_penalty(groups(CALM, SPIKY))
    assert verdict == "reproduced", measured


def test_the_control_in_edits_place_is_not_reproduced() -> None:
    assert judge_penalty(groups(SPIKY, SPIKY))[0] == "not_reproduced"
    assert judge_penalty(groups(CALM, CALM))[0] == "not_reproduced"  # nothing spikes: no effect to stop


def test_a_fault_only_the_lr_spike_shows_is_not_enough() -> None:
    """The paper's spikes come from bad data: a control that spikes only under the lr spike leaves the
    corrupted-batch part unmet."""
    control = {"lr-spike": 0.8, "corrupt": 0.11, "clean": 0.1}
    assert judge_penalty(groups(CALM, control))[0] == "not_reproduced"


@settings(max_examples=30, deadline=None)
@given(st.floats(0.0, 2.0), st.floats(0.0, 2.0))
def test_identical_arms_never_reproduce(lr_spike: float, corrupt: float) -> None:
    same = {"lr-spike": lr_spike, "corrupt": corrupt, "clean": 0.1}
    assert judge_penalty(groups(same, same))[0] != "reproduced"
