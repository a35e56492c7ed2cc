"""The MaxCutPool layer: PyG-style call and outputs, its operator and loss against dense formulas, the
nearest-supernode assignment, gradients, and MaxCutPool trained on MAXCUT."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch_geometric.data import Batch, Data
from torch_geometric.utils import get_laplacian, to_dense_adj

from iclrbench.algorithms import heterophilic_graph_pooling as mcp
from iclrbench.core import config as cfg
from iclrbench.envs.heterophilic_graph_pooling import (
    GraphPoolingConfig,
    both_directions,
    cut_fraction,
    grid_graph,
    multipartite_graph,
    polygon_centres,
)
from iclrbench.models.torch_threads import one_torch_thread


def multipartite_batch(graphs: int = 4, seed: int = 0) -> Batch:
    rng = np.random.default_rng(seed)
    data = []
    for _ in range(graphs):
        n, edges, features = multipartite_graph(polygon_centres(4), 5, rng)
        index = torch.as_tensor(both_directions(edges)[0])
        data.append(Data(x=torch.as_tensor(features, dtype=torch.float32), edge_index=index, num_nodes=n))
    return Batch.from_data_list(data)


def test_operator_and_loss_match_dense_formulas() -> None:
    torch.manual_seed(0)
    batch = multipartite_batch(1)
    n = batch.num_nodes
    adj = mcp.adjacency(batch.edge_index, None, n)
    x = torch.randn(n, 3)
    lap_index, lap_weight = get_laplacian(batch.edge_index, normalization="sym", num_nodes=n)
    lap = torch.zeros(n, n).index_put_((lap_index[0], lap_index[1]), lap_weight, accumulate=True)
    assert torch.allclose(mcp.propagate(adj, x, 2.0), (torch.eye(n) - 2.0 * lap) @ x, atol=1e-5)
    assert torch.equal(mcp.propagate(adj, x, 0.0), x)
    z = torch.tanh(torch.randn(n))
    dense = to_dense_adj(batch.edge_index, max_num_nodes=n)[0]
    expected = z @ dense @ z / dense.sum()
    assert torch.allclose(mcp.max_cut_loss(z, adj, torch.zeros(n, dtype=torch.long)), expected, atol=1e-6)


def test_nearest_supernode_on_a_path() -> None:
    # path 0-1-2-3-4-5-6, supernodes 0 and 6: 1, 2 join 0; 4, 5 join 6; 3 is reached by one walk from
    # each at length 3 and joins the first (0)
    edges = np.array([[i, i + 1] for i in range(6)])
    index = torch.as_tensor(both_directions(edges)[0])
    adj = mcp.adjacency(index, None, 7)
    kept = torch.tensor([0, 6])
    assign = mcp.nearest_supernode(adj, kept, torch.zeros(7, dtype=torch.long), max_iter=5)
    assert assign.tolist() == [0, 0, 0, 0, 1, 1, 1]
    # with one step only, the middle node is left to a random supernode of its graph
    one = mcp.nearest_supernode(adj, kept, torch.zeros(7, dtype=torch.long), max_iter=1)
    assert one[[0, 1, 5, 6]].tolist() == [0, 0, 1, 1] and set(one[2:5].tolist()) <= {0, 1}


@pytest.mark.parametrize("expressive", [False, True])
def test_layer_outputs_like_topk_pooling(expressive: bool) -> None:
    torch.manual_seed(0)
    batch = multipartite_batch(4)
    pool = mcp.maxcutpool_class()(3, ratio=0.5, expressive=expressive)
    x, edge_index, edge_attr, new_batch, perm, score, aux = pool(batch.x, batch.edge_index, None, batch.batch)
    sizes = torch.bincount(batch.batch)
    expected = torch.ceil(0.5 * sizes).long()
    assert torch.equal(torch.bincount(new_batch), expected)  # ceil(ratio n_g) supernodes per graph
    assert x.shape == (int(expected.sum()), 3) and perm.shape == (int(expected.sum()),)
    assert edge_attr is None and edge_index.min() >= 0 and edge_index.max() < x.size(0)
    assert torch.equal(new_batch[edge_index[0]], new_batch[edge_index[1]])  # no edge across graphs
    assert bool((edge_index[0] != edge_index[1]).all())
    assert score.shape == (batch.num_nodes,) and bool((score.abs() <= 1).all())
    assert aux.dim() == 0 and -1 <= float(aux.detach()) <= 1


def test_gradients_reach_every_parameter() -> None:
    torch.manual_seed(1)
    batch = multipartite_batch(3)
    pool = mcp.maxcutpool_class()(3, expressive=True)
    x, *_, aux = pool(batch.x, batch.edge_index, None, batch.batch)
    (x.sum() + aux).backward()
    for name, parameter in pool.named_parameters():
        assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), name
        assert parameter.grad.abs().sum() > 0, name


def test_ratio_outside_0_1_is_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        mcp.maxcutpool_class()(3, ratio=0.0)


def test_maxcutpool_learns_to_cut_the_grid() -> None:
    with one_torch_thread():  # as the task runs it
        _learns_to_cut_the_grid()


def _learns_to_cut_the_grid() -> None:
    config = cfg.build(GraphPoolingConfig, {"cut_epochs": 300, "cut_patience": 300})
    algo = mcp.MaxCutPoolAlgorithm(mcp.MaxCutPoolParams(), config, np.random.default_rng(0))
    grid = grid_graph(6, 6)
    signs = algo.solve(grid)
    assert cut_fraction(grid, signs) > 0.75  # random signs cut half
    assert algo.losses[-1] < algo.losses[0] and math.isfinite(algo.losses[-1])
    again = mcp.MaxCutPoolAlgorithm(mcp.MaxCutPoolParams(), config, np.random.default_rng(0)).solve(grid)
    assert np.array_equal(signs, again)
