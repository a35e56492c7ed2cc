"""Landscapes and the ask/tell black box: known optima, ranges, validation of queries."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclrbench.core import config as cfg
from iclrbench.core.errors import UserError
from iclrbench.envs.protein_combinatorial_bo import (
    ALPHABET,
    EhrlichLandscape,
    EpistaticFourSiteLandscape,
    NKLandscape,
    ProteinConfig,
    SequenceBlackBox,
    decode,
    encode,
)


def config(**overrides: object) -> ProteinConfig:
    return cfg.build(ProteinConfig, overrides)


def test_four_site_landscape_is_enumerated_with_optimum_one() -> None:
    land = EpistaticFourSiteLandscape(np.random.default_rng(0))
    assert land.table.shape == (20, 20, 20, 20)
    assert land.optimum == 1.0 and land.fitness(land.argmax[None])[0] == 1.0
    values = land.table.ravel()
    assert values.min() > 0 and np.median(values) < 0.05  # GB1-like: most variants are poor
    assert (values > 0.5).sum() < 100


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**31), st.integers(2, 40), st.integers(0, 3))
def test_nk_fitness_lies_in_unit_interval(seed: int, length: int, k: int) -> None:
    land = NKLandscape(length, k, np.random.default_rng(seed))
    x = np.random.default_rng(seed + 1).integers(0, 20, size=(50, length))
    f = land.fitness(x)
    assert f.shape == (50,) and f.min() >= 0 and f.max() <= 1


def test_nk_optimum_is_known_when_enumerable() -> None:
    land = NKLandscape(3, 1, np.random.default_rng(0))
    grid = np.indices((20, 20, 20)).reshape(3, -1).T
    assert land.optimum == pytest.approx(land.fitness(grid).max())
    assert NKLandscape(32, 2, np.random.default_rng(0)).optimum is None


def test_ehrlich_optimum_scores_one_and_infeasible_scores_zero() -> None:
    land = EhrlichLandscape(config(landscape="ehrlich", length=16, motifs=2, motif_length=4), seed=3)
    best = land.function.optimal_solution().numpy()[None]
    assert land.fitness(best)[0] == 1.0
    random = np.random.default_rng(0).integers(0, 20, size=(200, 16))
    f = land.fitness(random)
    assert f.min() >= 0 and np.isfinite(f).all()
    start = land.initial_design(30, np.random.default_rng(1))
    raw = land.function.evaluate_true(__import__("torch").as_tensor(start)).numpy()
    assert np.isfinite(raw).all(), "initial designs come from the feasible Markov process"


def test_ehrlich_config_is_checked() -> None:
    with pytest.raises(UserError, match="exceeds length"):
        config(landscape="ehrlich", length=6, motifs=2, motif_length=4)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (np.zeros((2, 5), dtype=int), r"shape \(n, 4\)"),
        (np.zeros(4, dtype=int), r"shape \(n, 4\)"),
        (np.full((1, 4), 20), "letters must lie in 0..19"),
        (np.full((1, 4), -1), "letters must lie in 0..19"),
        (np.zeros((1, 4)), "integer letter codes"),
    ],
)
def test_bad_queries_are_refused(query: np.ndarray, message: str) -> None:
    box = SequenceBlackBox(config(), np.random.default_rng(0))
    with pytest.raises(ValueError, match=message):
        box.observe(query)
    assert box.queried == []


def test_observation_noise_is_seeded_and_truth_is_recorded() -> None:
    a = SequenceBlackBox(config(noise_std=0.1), np.random.default_rng(0))
    b = SequenceBlackBox(config(noise_std=0.1), np.random.default_rng(0))
    x = np.random.default_rng(1).integers(0, 20, size=(10, 4))
    ya, yb = a.observe(x), b.observe(x)
    assert np.array_equal(ya, yb) and not np.array_equal(ya, a.true_values[0])


@given(st.text(alphabet=ALPHABET, min_size=1, max_size=40))
def test_encode_decode_round_trip(text: str) -> None:
    assert decode(encode(text)) == text


def test_encode_refuses_non_amino_acids() -> None:
    with pytest.raises(ValueError, match="'BZ'"):
        encode("ABZ")
