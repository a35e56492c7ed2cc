"""The generators of heterophilic-graph-pooling: edge counts, simple undirected graphs, seeds, data sets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclrbench.core import config as cfg
from iclrbench.core.errors import UserError
from iclrbench.envs import heterophilic_graph_pooling as env


def assert_simple(graph: env.WeightedGraph) -> None:
    """Edges i < j, each once, no self-loops, in range; edge_index holds both directions, sorted."""
    e = graph.edges
    assert e.shape == (graph.m, 2)
    assert np.all(e[:, 0] < e[:, 1]) and e.min(initial=0) >= 0 and e.max(initial=0) < graph.n
    assert len(np.unique(e, axis=0)) == graph.m
    index = graph.edge_index()
    assert index.shape == (2, 2 * graph.m)
    pairs = set(map(tuple, index.T))
    assert all((j, i) in pairs for i, j in pairs)
    keys = index[0] * graph.n + index[1]
    assert np.all(np.diff(keys) > 0)
    assert graph.features.shape[0] == graph.n and np.isfinite(graph.features).all()


@given(rows=st.integers(2, 12), cols=st.integers(2, 12))
def test_grid_edge_count_and_simplicity(rows: int, cols: int) -> None:
    g = env.grid_graph(rows, cols)
    assert g.n == rows * cols and g.m == rows * (cols - 1) + cols * (rows - 1)
    assert_simple(g)


@given(n=st.integers(5, 60), k=st.integers(1, 3))
def test_ring_edge_count(n: int, k: int) -> None:
    if 2 * k >= n:
        with pytest.raises(ValueError):
            env.ring_graph(n, k)
        return
    g = env.ring_graph(n, k)
    assert g.m == n * k and np.all(np.bincount(g.edges.ravel(), minlength=n) == 2 * k)
    assert_simple(g)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(6, 40), d=st.integers(1, 5))
def test_regular_graphs_are_regular(seed: int, n: int, d: int) -> None:
    if d >= n or (n * d) % 2:
        return
    g = env.random_regular(n, d, np.random.default_rng(seed))
    assert np.all(np.bincount(g.edges.ravel(), minlength=n) == d)
    assert_simple(g)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(10, 60), density=st.floats(0.01, 0.5))
def test_gset_like_has_exactly_density_edges(seed: int, n: int, density: float) -> None:
    g = env.gset_like(n, density, np.random.default_rng(seed))
    assert g.m == round(density * n * (n - 1) / 2) and g.features.shape == (n, 32)
    assert_simple(g)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(6, 60), p=st.floats(0.05, 0.9))
def test_er_and_planted_bipartite(seed: int, n: int, p: float) -> None:
    er = env.erdos_renyi(n, p, np.random.default_rng(seed))
    assert_simple(er)
    unflipped = env.planted_bipartite(n, p, 0.0, np.random.default_rng(seed))
    assert_simple(unflipped)
    half = n // 2
    assert np.all((unflipped.edges[:, 0] < half) & (unflipped.edges[:, 1] >= half))  # all cross the halves
    planted = np.where(np.arange(n) < half, 1, -1)
    assert unflipped.m == 0 or env.cut_fraction(unflipped, planted) == 1.0


def test_maxcut_graphs_follow_the_seed_and_the_family() -> None:
    config = cfg.build(env.GraphPoolingConfig, {"family": "er"})
    a, b, c = (env.maxcut_graph(config, s) for s in (3, 3, 4))
    assert np.array_equal(a.edges, b.edges) and np.array_equal(a.features, b.features)
    assert not np.array_equal(a.edges, c.edges)
    grid = cfg.build(env.GraphPoolingConfig, {})
    assert np.array_equal(env.maxcut_graph(grid, 0).edges, env.maxcut_graph(grid, 9).edges)


def test_cut_fraction_counts_crossing_weight() -> None:
    g = env.ring_graph(4)
    assert env.cut_fraction(g, np.array([1, -1, 1, -1])) == 1.0
    assert env.cut_fraction(g, np.ones(4)) == 0.0
    assert env.cut_fraction(g, np.array([1, 1, -1, -1])) == 0.5
    with pytest.raises(ValueError):
        env.cut_fraction(g, np.ones(3))


def test_multipartite_graphs_are_complete_multipartite() -> None:
    centres = env.polygon_centres(10)
    assert np.allclose(np.linalg.norm(centres, axis=1), 200.0)
    n, edges, features = env.multipartite_graph(centres, 19, np.random.default_rng(0))
    part = features[:, 2].astype(int)
    sizes = np.bincount(part, minlength=10)
    assert sizes.min() >= 1 and sizes.max() <= 19 and n == sizes.sum()
    assert len(edges) == (n * n - (sizes**2).sum()) // 2  # every pair of nodes in different parts
    assert np.all(part[edges[:, 0]] != part[edges[:, 1]])
    # positions lie around their part's centre (normal, sd 1)
    assert np.abs(features[:, :2] - centres[part]).max() < 6


def test_stratified_folds_partition_and_balance() -> None:
    labels = np.repeat(np.arange(4), 25)
    folds = env.stratified_folds(labels, 5, np.random.default_rng(0))
    assert np.array_equal(np.sort(np.concatenate(folds)), np.arange(100))
    for fold in folds:
        assert np.all(np.bincount(labels[fold], minlength=4) == 5)


def test_dataset_is_cached_and_keyed_by_its_parameters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ICLRBENCH_CACHE", str(tmp_path))
    config = cfg.build(env.GraphPoolingConfig, {"problem": "classification", "graphs_per_class": 3})
    first = env.heterophilic_dataset(config)
    assert len(first) == 30 and sorted(set(first.y.tolist())) == list(range(10))
    files = list(tmp_path.rglob("data.pt"))
    assert len(files) == 1
    stamp = files[0].stat().st_mtime_ns
    again = env.heterophilic_dataset(config)  # read back, not regenerated
    assert files[0].stat().st_mtime_ns == stamp
    assert np.array_equal(first.x.numpy(), again.x.numpy())
    sbm = cfg.build(
        env.GraphPoolingConfig, {"problem": "classification", "dataset": "sbm", "graphs_per_class": 3}
    )
    assert len(env.heterophilic_dataset(sbm)) == 12 and len(list(tmp_path.rglob("data.pt"))) == 2


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"problem": "bogus"}, "problem"),
        ({"pool_ratio": 0}, "pool_ratio"),
        ({"pool_ratio": 1.5}, "pool_ratio"),
        ({"family": "regular", "nodes": 5, "degree": 3}, "degree"),
        ({"folds_run": 11}, "folds_run"),
    ],
)
def test_bad_config_is_one_line(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(UserError) as info:
        cfg.build(env.GraphPoolingConfig, overrides)
    assert message in str(info.value) and "\n" not in str(info.value)
