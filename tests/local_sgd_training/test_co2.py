"""CO2's outer step (Sun et al., ICLR 2024; the asynchronous baseline of EDiT's section 4) on one module and a
one-worker group, without processes: a sync's average arrives one round late, the momentum is clamped, the
clock charges only what the next round's steps cannot hide."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from iclrbench.algorithms.local_sgd_training import SyncSpec
from iclrbench.algorithms.local_sgd_training.worker import OuterSync
from iclrbench.baselines.local_sgd_training import CO2
from iclrbench.core import config as cfg
from iclrbench.envs.local_sgd_training import LocalSGDConfig


class OneWorker:
    """The collectives of a group of one: an all-reduce returns its input."""

    rank, world = 0, 1

    def __init__(self) -> None:
        self.bytes = self.control_bytes = 0

    def all_reduce(self, tensor: Any) -> Any:
        self.bytes += tensor.numel() * tensor.element_size()
        return tensor

    def all_gather(self, tensor: Any) -> list[Any]:
        return [tensor.clone()]


def _rounds(spec: SyncSpec, moves: list[float]) -> list[float]:
    """A 1-weight module at 0; each round the local steps move it by ``moves[r]``, then it syncs; returns the
    weight each sync leaves."""
    module = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        module.weight.zero_()
    outer = OuterSync([module], spec, OneWorker())
    outer.start()
    out = []
    for move in moves:
        with torch.no_grad():
            module.weight.add_(move)
        outer.request()
        module(torch.zeros(1, 1))  # the pre-hook syncs
        out.append(module.weight.item())
    return out


def test_a_round_is_applied_one_round_late() -> None:
    """Outer lr 1, no momentum: the synchronous step adopts each round's average at once; CO2's first sync
    goes back to where the round began, and each later one applies the round before's move."""
    moves = [1.0, 2.0, 4.0]
    sync = SyncSpec(kind="local", outer_lr=1.0)
    assert _rounds(sync, moves) == pytest.approx([1.0, 3.0, 7.0])
    co2 = SyncSpec(kind="local", outer_lr=1.0, delayed=True)
    assert _rounds(co2, moves) == pytest.approx([0.0, 1.0, 3.0])


def test_the_gap_penalty_divides_and_heavy_ball_momentum_accumulates() -> None:
    spec = SyncSpec(kind="local", outer_lr=1.0, momentum=0.5, delayed=True, gap_penalty=2.0)
    # stale moves 1 then 1: m = 0.5 then 0.5 * 0.5 + 0.5 = 0.75; weights 0, 0.5, 1.25
    assert _rounds(spec, [1.0, 1.0, 1.0]) == pytest.approx([0.0, 0.5, 1.25])


@given(st.lists(st.floats(-50.0, 50.0), min_size=2, max_size=8), st.floats(0.05, 5.0))
@settings(max_examples=40, deadline=None)
def test_the_clamped_momentum_moves_a_sync_at_most_the_clamp(moves: list[float], clamp: float) -> None:
    spec = SyncSpec(kind="local", outer_lr=1.0, momentum=0.9, delayed=True, momentum_clamp=clamp)
    weights = [0.0, *_rounds(spec, moves)]
    steps = [abs(b - a) for a, b in itertools.pairwise(weights)]  # a sync moves by -lr m
    assert steps[0] == 0.0 and max(steps) <= clamp * (1 + 1e-5) + 1e-6


def test_co2s_spec_follows_its_parameters_and_the_task() -> None:
    config = LocalSGDConfig()
    spec = _co2(config, {"clamp": 0.0, "momentum": 0.5})
    assert spec.delayed and not spec.nesterov and not spec.layerwise and not spec.penalty
    assert (spec.momentum, spec.momentum_clamp, spec.tau) == (0.5, 0.0, config.tau)
    default = _co2(config, {})
    figures = (default.outer_lr, default.momentum, default.momentum_clamp, default.gap_penalty)
    assert figures == (1.0, 0.2, 1.0, 1.0)


def _co2(config: LocalSGDConfig, params: dict[str, Any]) -> SyncSpec:
    return CO2(cfg.build(CO2.Params, params), config, np.random.default_rng(0)).sync_spec()
