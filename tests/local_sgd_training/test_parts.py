"""local-sgd-training's parts without workers: the anomaly detector, the worker weights, the corpus, the
seeded world."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from iclrbench.algorithms.local_sgd_training import EwmaDetector, softmax_weights
from iclrbench.envs.local_sgd_training import Chain, LocalSGDConfig, machine_refuses, make_world, max_workers

norms = st.lists(st.floats(0.5, 2.0), min_size=12, max_size=60)


@given(norms)
@settings(max_examples=50, deadline=None)
def test_the_detector_flags_a_norm_far_above_its_history_and_nothing_before_warmup(
    values: list[float],
) -> None:
    assume(max(values) - min(values) > 0.01)  # a constant history has no spread: z is 0 (as in atorch)
    detector = EwmaDetector(alpha=0.02, threshold=3.0, warmup=10)
    for i, x in enumerate(values):
        if i < 10:
            assert not detector.is_outlier(1e9)  # still warming up: nothing is flagged
        detector.update(x)
    spread = max(values) - min(values) + 1e-3
    assert detector.is_outlier(max(values) + 1e3 * spread)


def test_the_detector_never_flags_a_steady_stream_or_a_falling_norm() -> None:
    detector = EwmaDetector(alpha=0.02, threshold=3.0, warmup=10)
    rng = np.random.default_rng(0)
    flagged = 0
    for t in range(300):
        x = 1.0 / (1 + 0.01 * t) + 0.02 * rng.standard_normal()  # norms shrink as training settles
        flagged += detector.is_outlier(x)
        detector.update(x)
    assert flagged <= 3  # a one-sided 3-sigma test: rare false alarms at most


@given(st.lists(st.floats(-10.0, 10.0), min_size=2, max_size=40))
def test_the_first_values_are_weighed_equally(values: list[float]) -> None:
    detector = EwmaDetector(alpha=0.02, threshold=3.0, warmup=10)
    for x in values:
        detector.update(x)
    first = values[:50]  # a = 1 / count while that exceeds alpha: the plain mean and population variance
    assert detector.mean == pytest.approx(np.mean(first), abs=1e-9)
    assert detector.var == pytest.approx(np.var(first), abs=1e-9)


@given(st.lists(st.floats(0.0, 50.0), min_size=2, max_size=8), st.floats(0.1, 10.0))
def test_worker_weights_sum_to_one_and_favour_small_norms(values: list[float], temperature: float) -> None:
    w = softmax_weights(values, temperature)
    assert math.isclose(sum(w), 1.0, rel_tol=1e-9) and all(x >= 0 for x in w)
    order = np.argsort(values, kind="stable")
    assert all(w[order[i]] >= w[order[i + 1]] - 1e-12 for i in range(len(values) - 1))


def test_an_anomalous_workers_weight_vanishes() -> None:
    assert softmax_weights([1.0, 1.0 + 1e6], 1.0)[1] == 0.0


@given(st.integers(4, 40), st.floats(0.05, 2.0), st.integers(0, 10))
@settings(max_examples=25, deadline=None)
def test_the_chain_is_a_distribution_and_its_entropy_a_floor(
    vocab: int, concentration: float, seed: int
) -> None:
    chain = Chain.make(vocab, concentration, seed)
    assert np.allclose(chain.probs.sum(-1), 1.0)
    assert 0.0 <= chain.entropy_rate() <= math.log(vocab) + 1e-9
    pi = chain.stationary()
    assert np.allclose(pi @ chain.probs, pi, atol=1e-6)


def test_samples_follow_the_chain_and_the_seed() -> None:
    chain = Chain.make(8, 0.3, 0)
    a = chain.sample(4000, 20, np.random.default_rng(1))
    assert np.array_equal(a, chain.sample(4000, 20, np.random.default_rng(1)))
    counts = np.zeros((8, 8))
    np.add.at(counts, (a[:, :-1].ravel(), a[:, 1:].ravel()), 1)
    empirical = counts / counts.sum(1, keepdims=True)
    assert np.abs(empirical - chain.probs).max() < 0.05


def test_the_world_is_the_seeds_and_the_slow_worker_is_last() -> None:
    config = LocalSGDConfig(workers=3, slow_factor=3.0, anomaly="corrupt")
    a, b = make_world(config, 0), make_world(config, 0)
    assert a == b and a != make_world(config, 1)
    assert a.step_costs[-1] > 2.0 * max(a.step_costs[:-1])
    assert sorted(a.permutation) == list(range(config.vocab)) and 0 <= a.faulty < 3
    assert a.faulty_now(a.faulty, config.anomaly_start, config)
    assert not a.faulty_now(a.faulty, config.anomaly_start + config.anomaly_steps, config)


def test_configs_refuse_what_cannot_run() -> None:
    with pytest.raises(ValueError, match="multiple of heads"):
        LocalSGDConfig(d_model=30, heads=4)
    assert machine_refuses(LocalSGDConfig()) is None
    if max_workers() < 8:
        assert "at most" in (machine_refuses(LocalSGDConfig(workers=max_workers() + 1)) or "")
    assert "does not answer" in (machine_refuses(LocalSGDConfig(rendezvous="10.255.255.1")) or "")
