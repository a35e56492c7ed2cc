"""Speed of heterophilic-graph-pooling's hot paths: the classifier's forward + backward on a batch of 32
Multipartite graphs with MaxCutPool and, side by side, with PyG's TopKPooling (the issue's aim: MaxCutPool
within 2x of TopK); Goemans-Williamson (SDP + 100 roundings) on ER(100, 0.1) and on an 800-node Gset-like
graph (slow: about a minute). ``make perf`` prints the figures."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.data import Batch, Data

from iclrbench.algorithms.heterophilic_graph_pooling import MaxCutPoolAlgorithm, MaxCutPoolParams
from iclrbench.algorithms.heterophilic_graph_pooling.classify import classifier
from iclrbench.baselines.heterophilic_graph_pooling import GoemansWilliamson, GwParams, TopK
from iclrbench.core import config as cfg
from iclrbench.envs.heterophilic_graph_pooling import (
    GraphPoolingConfig,
    both_directions,
    erdos_renyi,
    gset_like,
    multipartite_graph,
    polygon_centres,
)

pytestmark = pytest.mark.usefixtures("single_thread")
CONFIG = cfg.build(GraphPoolingConfig, {"problem": "classification"})


def multipartite_batch(graphs: int = 32) -> Batch:
    """32 graphs of the Multipartite set (10 parts of 1-19 nodes)."""
    rng = np.random.default_rng(777)
    centres = polygon_centres(10)
    data = []
    for label in range(graphs):
        n, edges, features = multipartite_graph(np.roll(centres, label % 10, axis=0), 19, rng)
        data.append(
            Data(
                x=torch.as_tensor(features, dtype=torch.float32),
                edge_index=torch.as_tensor(both_directions(edges)[0]),
                y=torch.tensor([label % 10]),
                num_nodes=n,
            )
        )
    return Batch.from_data_list(data)


def step(model: torch.nn.Module, batch: Batch) -> float:
    model.zero_grad()
    logits, aux, _ = model(batch)
    loss = torch.nn.functional.cross_entropy(logits, batch.y) + aux
    loss.backward()
    return float(loss.detach())


@pytest.mark.parametrize("pooler", [MaxCutPoolAlgorithm, TopK], ids=["maxcutpool", "topk"])
def test_classifier_forward_backward_32_multipartite(benchmark, pooler: type) -> None:  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    batch = multipartite_batch()
    params = MaxCutPoolParams() if pooler is MaxCutPoolAlgorithm else pooler.Params()
    algo = pooler(params, CONFIG, np.random.default_rng(0))
    model = classifier(3, 10, 32, algo.build(32, 0.5, 50), algo.dense)
    benchmark.group = "graph pooling: forward + backward, 32 Multipartite graphs"
    loss = benchmark.pedantic(step, args=(model, batch), rounds=5, iterations=1, warmup_rounds=1)
    assert np.isfinite(loss)
    benchmark.extra_info.update(nodes=int(batch.num_nodes), edges=int(batch.num_edges))


def _gw(benchmark, graph) -> None:  # type: ignore[no-untyped-def]
    gw = GoemansWilliamson(GwParams(), CONFIG, np.random.default_rng(0))
    benchmark.group = "graph pooling: Goemans-Williamson (SDP + 100 roundings)"
    signs = benchmark.pedantic(gw.solve, args=(graph,), rounds=1, iterations=1)
    assert signs.shape == (graph.n,)
    benchmark.extra_info.update(nodes=graph.n, edges=graph.m)


def test_gw_er_100(benchmark) -> None:  # type: ignore[no-untyped-def]
    _gw(benchmark, erdos_renyi(100, 0.1, np.random.default_rng(0)))


@pytest.mark.slow
def test_gw_gset_800(benchmark) -> None:  # type: ignore[no-untyped-def]
    _gw(benchmark, gset_like(800, 0.06, np.random.default_rng(0)))
