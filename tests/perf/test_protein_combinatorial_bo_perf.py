"""Speed of protein-combinatorial-bo's hot paths: one GameOpt round at L = 32 (GP fit + best-response
games) and one exhaustive UCB round over all 20^4 = 160,000 sequences. ``make perf`` prints the figures."""

from __future__ import annotations

import numpy as np
import pytest

from iclrbench.algorithms.protein_combinatorial_bo import GameOptBestResponse
from iclrbench.baselines.protein_combinatorial_bo import ExhaustiveUcb
from iclrbench.core import config as cfg
from iclrbench.envs.protein_combinatorial_bo import ProteinConfig, SequenceBlackBox


def primed(cls: type, **overrides: object):  # type: ignore[no-untyped-def]
    config = cfg.build(ProteinConfig, overrides)
    box = SequenceBlackBox(config, np.random.default_rng(0))
    start = box.landscape.initial_design(48, np.random.default_rng(1))
    algo = cls(cls.Params(), config, np.random.default_rng(2))
    algo.tell(start, box.observe(start))
    return algo


pytestmark = pytest.mark.usefixtures("single_thread")


def test_gameopt_round_ehrlich_l32(benchmark) -> None:  # type: ignore[no-untyped-def]
    algo = primed(GameOptBestResponse, landscape="ehrlich", length=32)
    benchmark.group = "protein: one acquisition round"
    batch = benchmark.pedantic(algo.ask, args=(8,), rounds=3, iterations=1)
    assert batch.shape == (8, 32)
    benchmark.extra_info["acquisition_evaluations"] = algo.acquisition_evaluations


def test_exhaustive_round_20_pow_4(benchmark) -> None:  # type: ignore[no-untyped-def]
    algo = primed(ExhaustiveUcb, landscape="gb1-4")
    benchmark.group = "protein: one acquisition round"
    batch = benchmark.pedantic(algo.ask, args=(8,), rounds=3, iterations=1)
    assert batch.shape == (8, 4) and algo.acquisition_evaluations == 160_000
    benchmark.extra_info["acquisition_evaluations"] = algo.acquisition_evaluations
