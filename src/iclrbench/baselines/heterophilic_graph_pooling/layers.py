"""Pooling layers of heterophilic-graph-pooling's baselines that torch-geometric does not ship in a form that
runs here (or runs in time): EdgePool's contraction on Python lists, k-MIS pooling (PyG 2.8 has no
``KMISPooling``; the public code's copy needs torch_scatter and torch_sparse) and NDP, node decimation
pooling. Written on plain torch / numpy for this suite, after the papers and the authors' public code
(NGMLGroup/MaxCutPool), which MaxCutPool's paper compares against.

- EdgePool (Diehl, 2019; PyG's ``EdgePooling``, the paper's ECPool): PyG's own layer, whose greedy edge
  contraction (``_merge_edges``) reads one tensor element per edge in a Python loop: 20 s a step on a
  batch of 32 Multipartite graphs (280k edges) here. The same greedy matching over Python lists is
  identical in output (a test compares them) and takes a fraction of a second.
- k-MIS (Bacciu et al., "Generalizing downsampling from regular data to graphs", AAAI 2023; public code
  ``source/layers/kmis/``, config ``pooler/kmis.yaml``): a maximal k-independent set of the nodes, taken
  greedily by a learned score s = sigmoid(w^T x + b) divided by the size of each node's k-hop neighbourhood
  ((A + I)^k 1, the 'greedy' heuristic); every node joins the set member nearest to it (the lowest rank
  within k hops); features are multiplied by s (so the scorer is trained) and summed per cluster; the
  pooled graph sums the edges between clusters, self-loops removed. k = round(1 / ratio) = 2.
- NDP (Bianchi et al., "Hierarchical representation learning in graph neural networks with node
  decimation pooling", IEEE TNNLS 2020; public code ``source/layers/ndp.py``): the nodes on the non-negative
  side of the eigenvector of the largest eigenvalue of L_sym are kept (a random split where that cut
  takes under half the edges), the pooled graph is the Kron reduction of the combinatorial Laplacian on
  them, with |weights| <= 0.01 dropped; features are the kept nodes' own. Not trained, so each graph's
  decimation is computed once and cached.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

#: NDP drops pooled edges of |weight| at most this (``pooler/ndp.yaml``: sparse_thresh 1e-2)
NDP_SPARSE_THRESHOLD = 1e-2


# ------------------------------------------------------------------------------------------------ k-MIS
def maximal_k_independent_set(edge_index: Any, n: int, k: int, rank: Any) -> Any:
    """A maximal k-independent set (boolean mask): no two members within k hops, every node within k hops
    of a member; members taken greedily in the order of ``rank`` (0 first). Blelloch's parallel greedy
    rounds, generalised to k hops by Bacciu et al.: a node joins when it has the lowest rank among the
    undecided nodes of its k-hop neighbourhood; then the members' k-hop neighbourhoods are decided."""
    import torch

    row, col = edge_index
    members = torch.zeros(n, dtype=torch.bool)
    decided = torch.zeros(n, dtype=torch.bool)
    while not bool(decided.all()):
        low = rank.clone()
        low[decided] = n
        undecided_low = low.clone()
        for _ in range(k):  # the lowest undecided rank within k hops (the node itself included)
            spread = torch.full((n,), n, dtype=rank.dtype).scatter_reduce(
                0, col, undecided_low[row], "amin", include_self=True
            )
            undecided_low = torch.minimum(spread, undecided_low)
        members |= (rank == undecided_low) & ~decided
        covered = members.clone().long()
        for _ in range(k):  # every node within k hops of a member is decided
            spread = torch.zeros(n, dtype=torch.long).scatter_reduce(0, col, covered[row], "amax")
            covered = torch.maximum(spread, covered)
        decided = covered.bool()
    return members


def k_mis_clusters(edge_index: Any, n: int, k: int, rank: Any, members: Any) -> Any:
    """The cluster of every node: the position (in node order) of the member of lowest rank within k hops,
    so cluster c is the c-th member of ``members`` in node order."""
    import torch

    row, col = edge_index
    low = torch.full((n,), n, dtype=rank.dtype)
    low[members] = rank[members]
    for _ in range(k):
        spread = torch.full((n,), n, dtype=rank.dtype)
        spread = spread.scatter_reduce(0, col, low[row], "amin", include_self=True)
        low = torch.minimum(spread, low)
    _, by_rank = torch.unique(low, return_inverse=True)  # cluster index in the order of the members' ranks
    return torch.argsort(rank[members])[by_rank]


def _kmis_class() -> type:
    import torch
    from torch_geometric.utils import coalesce, remove_self_loops

    class KMISPool(torch.nn.Module):
        """k-MIS pooling as the public code configures it: linear scorer (sigmoid), greedy heuristic, scores
        multiplied into the features before the clusters are summed, edges summed."""

        def __init__(self, in_channels: int, k: int = 2) -> None:
            super().__init__()
            if k < 1:
                raise ValueError(f"k-MIS needs k >= 1, got {k}")
            self.k = k
            self.lin = torch.nn.Linear(in_channels, 1)
            bound = 1.0 / in_channels**0.5  # PyG's Linear(weight_initializer='uniform')
            torch.nn.init.uniform_(self.lin.weight, -bound, bound)

        def forward(self, x: Any, edge_index: Any, batch: Any) -> tuple[Any, Any, Any, Any]:
            n = x.size(0)
            row, col = edge_index
            score = torch.sigmoid(self.lin(x)).view(-1)
            reach = torch.ones(n)
            for _ in range(self.k):  # (A + I)^k 1: the k-hop neighbourhood sizes
                reach = reach + torch.zeros(n).index_add_(0, col, reach[row])
            with torch.no_grad():  # the selection is discrete; the score reaches the loss through x * s
                order = torch.argsort(score.detach() / reach, descending=True)
                rank = torch.empty(n, dtype=torch.long)
                rank[order] = torch.arange(n)
                members = maximal_k_independent_set(edge_index, n, self.k, rank)
                cluster = k_mis_clusters(edge_index, n, self.k, rank, members)
            c = int(members.sum())
            pooled = torch.zeros(c, x.size(1)).index_add_(0, cluster, x * score.view(-1, 1))
            new_index, _ = coalesce(cluster[edge_index], torch.ones(row.numel()), num_nodes=c)
            new_index, _ = remove_self_loops(new_index)
            return pooled, new_index, batch[members], x.new_zeros(())

    return KMISPool


# -------------------------------------------------------------------------------------------------- NDP
def ndp_side(a: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """NDP's cut of a graph (dense symmetric weighted adjacency ``a``): the nodes on the non-negative side
    of the eigenvector of the largest eigenvalue of L_sym = I - D^-1/2 A D^-1/2, and that cut's share of
    the edge weight; where it is under one half, a uniformly random side instead (as the public ``ndp()``).

    The public code finds the eigenvector with ARPACK (``eigsh``, v0 = ones); here a dense ``eigh`` (the
    graphs are small), whose sign convention may keep the other side of the same cut."""
    n = a.shape[0]
    degree = a.sum(axis=1)
    inv_sqrt = np.where(degree > 0, 1.0 / np.sqrt(np.maximum(degree, 1e-12)), 0.0)
    lap_sym = np.eye(n) - inv_sqrt[:, None] * a * inv_sqrt[None, :]
    keep = np.linalg.eigh(lap_sym)[1][:, -1] >= 0
    volume = a.sum()
    crossing = keep[:, None] != keep[None, :]
    cut = float((a * crossing).sum() / volume) if volume > 0 else 0.0
    if cut < 0.5:
        keep = rng.choice([False, True], size=n)
    return keep, cut


def ndp_decimate(
    edges: np.ndarray, n: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Node decimation of one graph (``edges`` (2, m), both directions, unit weights): the kept nodes, the
    pooled graph's edges (2, e) and weights -- the Kron reduction L_kk - L_kd L_dd^-1 L_dk of the
    combinatorial Laplacian on the kept nodes k (d: the dropped ones), as an adjacency with |w| <= 0.01
    dropped -- and the spectral cut's share of the edges."""
    a = np.zeros((n, n))
    if edges.size:
        a[edges[0], edges[1]] = 1.0
    np.fill_diagonal(a, 0.0)
    if n == 1:
        return np.array([0]), np.zeros((2, 0), dtype=np.int64), np.zeros(0), 0.0
    keep, cut = ndp_side(a, rng)
    lap = np.diag(a.sum(axis=1)) - a
    kept = np.flatnonzero(keep)
    if kept.size == 0:  # as the public code: keep node 0
        kept = np.array([0])
    if kept.size == 1:  # nothing to reduce: one node, no edges
        return kept, np.zeros((2, 0), dtype=np.int64), np.zeros(0), cut
    pooled = kron_adjacency(lap, kept)
    pooled[np.abs(pooled) <= NDP_SPARSE_THRESHOLD] = 0.0
    rows, cols = np.nonzero(pooled)
    return kept, np.stack([rows, cols]).astype(np.int64), pooled[rows, cols], cut


def kron_adjacency(lap: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """The adjacency -(L_kk - L_kd L_dd^-1 L_dk) (zero diagonal) of the Kron reduction of the Laplacian
    ``lap`` onto the nodes ``kept`` (d: the others); L_dd singular is damped by 1e-6 I as the public code
    does."""
    dropped = np.setdiff1d(np.arange(lap.shape[0]), kept)
    reduced = lap[np.ix_(kept, kept)]
    if dropped.size:
        inner = lap[np.ix_(dropped, dropped)]
        try:
            solved = np.linalg.solve(inner, lap[np.ix_(dropped, kept)])
        except np.linalg.LinAlgError:
            solved = np.linalg.solve(inner + 1e-6 * np.eye(dropped.size), lap[np.ix_(dropped, kept)])
        reduced = reduced - lap[np.ix_(kept, dropped)] @ solved
    pooled = -(reduced + reduced.T) / 2
    np.fill_diagonal(pooled, 0.0)
    return pooled


def _ndp_class() -> type:
    import torch

    class NDPPool(torch.nn.Module):
        """NDP on a batch: each graph decimated on its own (cached by its edges, as NDP is precomputed),
        kept nodes' features, the Kron-reduced graph's edges (its weights are not used by the GIN after
        pooling, as in the public models)."""

        def __init__(self, seed: int) -> None:
            super().__init__()
            self.rng = np.random.default_rng(seed)
            self.cache: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

        def _graph(self, edges: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
            key = hashlib.blake2b(edges.tobytes() + n.to_bytes(8, "little"), digest_size=16).digest()
            if key not in self.cache:
                kept, pooled_edges, _, _ = ndp_decimate(edges, n, self.rng)
                self.cache[key] = (kept, pooled_edges)
            return self.cache[key]

        def forward(self, x: Any, edge_index: Any, batch: Any) -> tuple[Any, Any, Any, Any]:
            graphs = int(batch.max()) + 1 if batch.numel() else 0
            counts = torch.bincount(batch, minlength=graphs).numpy()
            ptr = np.concatenate([[0], np.cumsum(counts)])
            index = edge_index.numpy()
            owner = batch.numpy()[index[0]]
            order = np.argsort(owner, kind="stable")
            bounds = np.searchsorted(owner[order], np.arange(graphs + 1))
            kept_all, edges_all, offset = [], [], 0
            for g in range(graphs):
                local = index[:, order[bounds[g] : bounds[g + 1]]] - ptr[g]
                kept, pooled_edges = self._graph(np.ascontiguousarray(local), int(counts[g]))
                kept_all.append(kept + ptr[g])
                edges_all.append(pooled_edges + offset)
                offset += kept.size
            kept_t = torch.as_tensor(np.concatenate(kept_all))
            new_index = torch.as_tensor(np.concatenate(edges_all, axis=1))
            return x[kept_t], new_index, batch[kept_t], x.new_zeros(())

    return NDPPool


def _edge_pool_class() -> type:
    import torch
    from torch_geometric.nn import EdgePooling
    from torch_geometric.nn.pool.edge_pool import UnpoolInfo
    from torch_geometric.utils import coalesce, scatter

    class ListEdgePooling(EdgePooling):
        """PyG's EdgePooling, its ``_merge_edges`` over Python lists: edges by descending score, each taken
        when both ends are still free; the free nodes stay single, numbered after the merged pairs in node
        order; features summed per cluster and scaled by the edge's score (1 for single nodes)."""

        def _merge_edges(self, x: Any, edge_index: Any, batch: Any, edge_score: Any) -> tuple[Any, ...]:
            n = x.size(0)
            order = torch.argsort(edge_score, descending=True).tolist()
            sources, targets = edge_index.cpu().tolist()
            free, cluster, chosen = [True] * n, [0] * n, []
            for edge in order:
                source, target = sources[edge], targets[edge]
                if not (free[source] and free[target]):
                    continue
                cluster[source] = cluster[target] = len(chosen)
                free[source] = free[target] = False
                chosen.append(edge)
            single = [v for v in range(n) if free[v]]
            for k, v in enumerate(single):
                cluster[v] = len(chosen) + k
            size = len(chosen) + len(single)
            assignment = torch.tensor(cluster, dtype=torch.long)
            new_x = scatter(x, assignment, dim=0, dim_size=size, reduce="sum")
            new_score = edge_score[torch.tensor(chosen, dtype=torch.long)]
            if single:
                new_score = torch.cat([new_score, x.new_ones(len(single))])
            new_x = new_x * new_score.view(-1, 1)
            new_index = coalesce(assignment[edge_index], num_nodes=size)
            new_batch = x.new_empty(size, dtype=torch.long).scatter_(0, assignment, batch)
            info = UnpoolInfo(
                edge_index=edge_index, cluster=assignment, batch=batch, new_edge_score=new_score
            )
            return new_x, new_index, new_batch, info

    return ListEdgePooling


_CLASSES: dict[str, type] = {}


def edge_pool(in_channels: int) -> Any:
    """A :class:`ListEdgePooling` module (PyG's EdgePooling, its contraction on Python lists)."""
    if "edge" not in _CLASSES:
        _CLASSES["edge"] = _edge_pool_class()
    return _CLASSES["edge"](in_channels)


def kmis_pool(in_channels: int, k: int) -> Any:
    """A :class:`KMISPool` module (torch imported on first use)."""
    if "kmis" not in _CLASSES:
        _CLASSES["kmis"] = _kmis_class()
    return _CLASSES["kmis"](in_channels, k)


def ndp_pool(seed: int) -> Any:
    """An :class:`NDPPool` module whose random fallback cuts draw from ``seed``."""
    if "ndp" not in _CLASSES:
        _CLASSES["ndp"] = _ndp_class()
    return _CLASSES["ndp"](seed)
