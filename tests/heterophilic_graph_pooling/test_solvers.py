"""MAXCUT solvers: known optima, GW between 0.878 x and 1 x the optimum, determinism, refusals."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclrbench.baselines import heterophilic_graph_pooling as base
from iclrbench.core import config as cfg
from iclrbench.core.errors import UserError
from iclrbench.envs.heterophilic_graph_pooling import (
    GraphPoolingConfig,
    WeightedGraph,
    cut_fraction,
    cut_weight,
    erdos_renyi,
    grid_graph,
    ring_graph,
)

SMALL_ER = erdos_renyi(12, 0.4, np.random.default_rng(7))


def solver(cls: type, seed: int = 0, **params: object) -> base.MaxCutSolver:
    config = cfg.build(GraphPoolingConfig, {})
    return cls(cfg.build(cls.Params, params), config, np.random.default_rng(seed))


def brute_force(graph: WeightedGraph) -> float:
    return max(
        cut_weight(graph, np.array([1 - 2 * ((code >> i) & 1) for i in range(graph.n)]))
        for code in range(1 << graph.n)
    )


def test_exact_cuts_every_edge_of_the_bipartite_grid() -> None:
    grid = grid_graph(8, 12)
    assert cut_fraction(grid, solver(base.Exact).solve(grid)) == 1.0
    assert cut_fraction(grid, solver(base.Spectral).solve(grid)) == 1.0  # top eigenvector alternates


def test_exact_enumeration_matches_brute_force() -> None:
    odd_ring = ring_graph(9)  # not bipartite: the optimum leaves one edge uncut
    assert base.two_colouring(odd_ring) is None
    assert cut_weight(odd_ring, solver(base.Exact).solve(odd_ring)) == 8
    assert cut_weight(SMALL_ER, solver(base.Exact).solve(SMALL_ER)) == brute_force(SMALL_ER)


def test_gw_lies_between_its_guarantee_and_the_optimum() -> None:
    optimum = cut_weight(SMALL_ER, solver(base.Exact).solve(SMALL_ER))
    gw = solver(base.GoemansWilliamson)
    value = cut_weight(SMALL_ER, gw.solve(SMALL_ER))
    assert 0.878 * optimum <= value <= optimum
    assert gw.bound >= optimum - 1e-2 * optimum  # the SDP relaxation bounds the optimum (to SCS's tolerance)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 1000))
def test_greedy_ends_in_a_one_flip_local_optimum(seed: int) -> None:
    graph = erdos_renyi(30, 0.2, np.random.default_rng(seed))
    signs = solver(base.Greedy, seed, restarts=1).solve(graph)
    value = cut_weight(graph, signs)
    for i in range(graph.n):
        flipped = signs.copy()
        flipped[i] = -flipped[i]
        assert cut_weight(graph, flipped) <= value + 1e-9
    assert value >= graph.weights.sum() / 2  # every one-flip local optimum cuts half the weight


@pytest.mark.parametrize(
    "cls", [base.GoemansWilliamson, base.Spectral, base.Greedy, base.RandomCut, base.Exact]
)
def test_cuts_are_signs_and_fractions_lie_in_0_1(cls: type) -> None:
    signs = solver(cls).solve(SMALL_ER)
    assert signs.shape == (SMALL_ER.n,) and set(np.unique(signs)) <= {-1, 1}
    assert 0.0 <= cut_fraction(SMALL_ER, signs) <= 1.0


@pytest.mark.parametrize("cls", [base.GoemansWilliamson, base.Greedy, base.RandomCut])
def test_same_seed_same_cut(cls: type) -> None:
    graph = erdos_renyi(40, 0.15, np.random.default_rng(1))
    assert np.array_equal(solver(cls, 5).solve(graph), solver(cls, 5).solve(graph))


def test_exact_refuses_large_graphs_in_one_line() -> None:
    config = cfg.build(GraphPoolingConfig, {"family": "er", "nodes": 100})
    reason = base.Exact.supports(config)
    assert reason is not None and "100 nodes" in reason
    assert base.Exact.supports(cfg.build(GraphPoolingConfig, {"family": "er", "nodes": 20})) is None
    assert base.Exact.supports(cfg.build(GraphPoolingConfig, {})) is None  # the grid is bipartite
    with pytest.raises(UserError, match="at most 22 nodes"):
        base.exact_by_enumeration(erdos_renyi(30, 0.2, np.random.default_rng(0)))
