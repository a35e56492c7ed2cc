"""heterophilic-graph-pooling's data: seeded attributed graphs for MAXCUT and heterophilic graph
classification sets, as torch-geometric ``Data`` objects and ``InMemoryDataset`` s (Abate & Bianchi,
"MaxCutPool", ICLR 2025; data as in the authors' public code, NGMLGroup/MaxCutPool).

MAXCUT graphs (one per run seed; the grid and the ring are the same for every seed):

- ``grid``: the 2D grid graph of ``grid_rows x grid_cols`` nodes (PyGSP's Grid2d; bipartite, so its
  maximum cut is every edge); features are the node coordinates.
- ``ring``: ``nodes`` nodes on a cycle, each joined to its ``ring_neighbours`` nearest on each side
  (PyGSP's Ring); bipartite for k = 1 and an even n; features are the positions on the circle.
- ``er``: Erdos-Renyi G(n, p), redrawn until connected (as PyGSP's ErdosRenyi with connected=True).
- ``regular``: a uniformly random d-regular graph (networkx).
- ``bipartite``: a random bipartite graph of two halves (cross edges with probability p) in which each
  edge is rewired inside a half with probability ``flip_prob``: the planted cut is near-optimal.
- ``gset``: Gset-like graphs of 800 nodes made as Gset's generator (rudy ``-rnd_graph n density seed``)
  makes G1-G5: exactly density * n (n - 1) / 2 edges drawn uniformly, unit weights; 32 random features.

ER, d-regular and planted bipartite graphs have spring-layout positions as features, as the public code
gives PyGSP graphs without coordinates.

Classification sets (one fixed data set per ``data_seed``; run seeds vary folds and training):

- ``multipartite``: the paper's Multipartite set: complete multipartite graphs of ``parts`` parts of
  1..max_part nodes; the part centres are the vertices of a regular polygon of radius 20 * parts, the
  class is the rotation of the centres; a node's features are its 2D position (normal around its part's
  centre) and its part index, as in the public generator.
- ``sbm``: a second heterophilic set: disassortative stochastic block models of ``parts`` blocks, few
  edges inside blocks; the class is the mixing pattern between blocks (which pairs of blocks are wired),
  and node features are noisy one-hot block indicators, so that only the edges tell the classes apart.

Data sets are processed once into the task cache (``$ICLRBENCH_CACHE``, else ``.iclrbench/cache``),
under a directory named by :data:`DATA_VERSION` and a hash of the parameters that define them.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from iclrbench.core.cache import cache_root
from iclrbench.core.config import param, stable_hash
from iclrbench.core.seeding import rng_for

if TYPE_CHECKING:
    import torch
    from torch_geometric.data import Data

#: bump when a generator changes: cached data sets are keyed on it
DATA_VERSION = 1
TASK_ID = "heterophilic-graph-pooling"


@dataclasses.dataclass(frozen=True)
class GraphPoolingConfig:
    """One instance of the task: which problem, which graphs, and the shared training schedule."""

    problem: Literal["maxcut", "classification"] = param(
        "maxcut", "maxcut: cut one graph per seed; classification: heterophilic graph classification"
    )
    # ---- maxcut
    family: Literal["grid", "ring", "er", "regular", "bipartite", "gset"] = param(
        "grid", "maxcut graph family"
    )
    nodes: int = param(100, "nodes of ring / er / regular / bipartite / gset graphs", low=4, high=5000)
    grid_rows: int = param(8, "rows of the grid graph", low=2, high=200)
    grid_cols: int = param(12, "columns of the grid graph", low=2, high=200)
    edge_prob: float = param(0.1, "edge probability of er and of bipartite cross edges", low=0.0, high=1.0)
    degree: int = param(3, "degree of the random regular graph", low=1, high=100)
    ring_neighbours: int = param(1, "ring: neighbours joined on each side", low=1, high=50)
    flip_prob: float = param(
        0.05, "planted bipartite: probability an edge is rewired inside a half", low=0.0, high=1.0
    )
    gset_density: float = param(0.06, "gset: edge density (G1-G5: 6%)", low=0.0, high=1.0)
    cut_epochs: int = param(2000, "maxcut: epochs of training on the cut loss (paper: up to 2000)", low=1)
    cut_patience: int = param(500, "maxcut: stop after this many epochs without a lower loss", low=1)
    # ---- classification
    dataset: Literal["multipartite", "sbm"] = param("multipartite", "classification data set")
    graphs_per_class: int = param(500, "graphs per class (Multipartite: 500)", low=2)
    parts: int = param(10, "parts of a graph = classes (Multipartite: 10 centres)", low=2, high=40)
    max_part: int = param(19, "largest part (Multipartite: 1-19 nodes)", low=1, high=200)
    data_seed: int = param(777, "seed of the data set generator (the paper's: 777)", low=0)
    folds: int = param(10, "folds of stratified cross-validation", low=2, high=50)
    folds_run: int = param(10, "how many of the folds are trained and tested (<= folds)", low=1, high=50)
    epochs: int = param(1000, "classification: maximum epochs per fold", low=1)
    patience: int = param(300, "classification: early stopping on the validation loss", low=1)
    lr: float = param(1e-4, "Adam learning rate of the classifiers (paper: 1e-4)", low=1e-7, high=1.0)
    batch_size: int = param(32, "graphs per batch", low=1, high=4096)
    hidden: int = param(32, "hidden channels of the message-passing blocks", low=2, high=1024)
    pool_ratio: float = param(0.5, "fraction of nodes kept by the pooling layer, in (0, 1]")

    def __post_init__(self) -> None:
        if not 0.0 < self.pool_ratio <= 1.0:
            raise ValueError(f"pool_ratio: {self.pool_ratio} is outside (0, 1]")
        if self.folds_run > self.folds:
            raise ValueError(f"folds_run: {self.folds_run} is more than folds={self.folds}")
        regular = self.problem == "maxcut" and self.family == "regular"
        if regular and (self.degree >= self.nodes or (self.degree * self.nodes) % 2):
            raise ValueError(
                f"degree: no {self.degree}-regular graph on {self.nodes} nodes (need d < n, d n even)"
            )
        graphs = self.graphs_per_class * (self.parts if self.dataset == "multipartite" else 4)
        if self.problem == "classification" and graphs < self.folds:
            raise ValueError(f"folds: {self.folds} folds of {graphs} graphs")


# ---------------------------------------------------------------------------------------------- graphs
@dataclasses.dataclass(frozen=True)
class WeightedGraph:
    """An undirected graph: ``edges`` (m, 2) with i < j, each once; ``weights`` (m,); ``features`` (n, f)."""

    n: int
    edges: np.ndarray
    weights: np.ndarray
    features: np.ndarray
    name: str = ""

    @property
    def m(self) -> int:
        return len(self.edges)

    def edge_index(self) -> np.ndarray:
        """Both directions, as PyG stores an undirected graph: (2, 2m), sorted by (row, column)."""
        return both_directions(self.edges)[0]

    def edge_weights(self) -> np.ndarray:
        """The weight of each column of :meth:`edge_index`."""
        return both_directions(self.edges, self.weights)[1]

    def to_data(self) -> Data:
        """The graph as a PyG ``Data`` (x, edge_index, edge_attr = the weight of each direction)."""
        import torch
        from torch_geometric.data import Data

        return Data(
            x=torch.as_tensor(self.features, dtype=torch.float32),
            edge_index=torch.as_tensor(self.edge_index(), dtype=torch.long),
            edge_attr=torch.as_tensor(self.edge_weights(), dtype=torch.float32),
            num_nodes=self.n,
        )


def both_directions(edges: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(2, 2m) edge index holding each edge both ways, sorted by (row, column) as PyG's coalesced graphs
    are, and the weights in the same order."""
    index = np.concatenate([edges.T, edges[:, ::-1].T], axis=1).reshape(2, -1)
    w = np.ones(len(edges)) if weights is None else np.asarray(weights, dtype=float)
    order = np.lexsort((index[1], index[0]))
    return index[:, order], np.concatenate([w, w])[order]


def cut_weight(graph: WeightedGraph, signs: np.ndarray) -> float:
    """Total weight of the edges whose ends have different signs."""
    s = np.asarray(signs)
    if s.shape != (graph.n,):
        raise ValueError(f"a cut needs one sign per node ({graph.n}), got shape {s.shape}")
    crossing = s[graph.edges[:, 0]] != s[graph.edges[:, 1]]
    return float(graph.weights[crossing].sum())


def cut_fraction(graph: WeightedGraph, signs: np.ndarray) -> float:
    """The cut's weight over the total edge weight (1.0: every edge cut; for unit weights, the fraction
    of edges cut, the paper's 'percentage of cut edges')."""
    total = float(graph.weights.sum())
    return cut_weight(graph, signs) / total if total > 0 else 0.0


def _unique_edges(pairs: np.ndarray) -> np.ndarray:
    """Edges as sorted (i < j) unique pairs, self-loops dropped."""
    pairs = np.sort(np.asarray(pairs, dtype=np.int64).reshape(-1, 2), axis=1)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    return np.unique(pairs, axis=0) if len(pairs) else pairs.reshape(0, 2)


def _graph(n: int, pairs: np.ndarray, features: np.ndarray, name: str) -> WeightedGraph:
    edges = _unique_edges(pairs)
    return WeightedGraph(n, edges, np.ones(len(edges)), np.asarray(features, dtype=np.float32), name)


def grid_graph(rows: int, cols: int) -> WeightedGraph:
    """The rows x cols grid (4-neighbourhood); features are the coordinates (column / cols, row / rows)."""
    index = np.arange(rows * cols).reshape(rows, cols)
    horizontal = np.stack([index[:, :-1].ravel(), index[:, 1:].ravel()], axis=1)
    vertical = np.stack([index[:-1, :].ravel(), index[1:, :].ravel()], axis=1)
    row, col = np.divmod(np.arange(rows * cols), cols)
    coords = np.stack([col / cols, row / rows], axis=1)  # PyGSP's Grid2d coordinates, in [0, 1)
    return _graph(rows * cols, np.concatenate([horizontal, vertical]), coords, f"grid {rows}x{cols}")


def ring_graph(n: int, k: int = 1) -> WeightedGraph:
    """n nodes on a cycle, each joined to the k nearest on each side; features: positions on a circle."""
    if 2 * k >= n:
        raise ValueError(f"a ring of {n} nodes cannot join {k} neighbours on each side")
    nodes = np.arange(n)
    pairs = np.concatenate([np.stack([nodes, (nodes + j) % n], axis=1) for j in range(1, k + 1)])
    angle = 2 * np.pi * nodes / n
    return _graph(n, pairs, np.stack([np.cos(angle), np.sin(angle)], axis=1), f"ring {n} k={k}")


def _spring_features(n: int, edges: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """2D spring-layout positions (networkx), as the public code gives PyGSP graphs without coordinates."""
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(map(tuple, edges))
    layout = nx.spring_layout(g, seed=int(rng.integers(2**31)), iterations=50)
    return np.array([layout[i] for i in range(n)])


def erdos_renyi(n: int, p: float, rng: np.random.Generator, max_tries: int = 100) -> WeightedGraph:
    """G(n, p) redrawn until connected (at most ``max_tries`` times, then the last draw)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    iu = np.triu_indices(n, 1)
    for _ in range(max_tries):
        keep = rng.random(len(iu[0])) < p
        pairs = np.stack([iu[0][keep], iu[1][keep]], axis=1)
        adj = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
        if connected_components(adj, directed=False)[0] == 1:
            break
    return _graph(n, pairs, _spring_features(n, pairs, rng), f"ER({n}, {p:g})")


def random_regular(n: int, d: int, rng: np.random.Generator) -> WeightedGraph:
    """A uniformly random d-regular simple graph (networkx's pairing algorithm)."""
    import networkx as nx

    g = nx.random_regular_graph(d, n, seed=int(rng.integers(2**31)))
    pairs = np.array(list(g.edges()), dtype=np.int64).reshape(-1, 2)
    return _graph(n, pairs, _spring_features(n, pairs, rng), f"{d}-regular({n})")


def planted_bipartite(n: int, p: float, flip: float, rng: np.random.Generator) -> WeightedGraph:
    """Halves A = [0, n/2), B = the rest; each A-B pair is an edge with probability p; each edge is then,
    with probability ``flip``, rewired to a random pair inside one half. The planted cut (A vs B) cuts
    every edge that was not rewired."""
    half = n // 2
    a, b = np.meshgrid(np.arange(half), np.arange(half, n), indexing="ij")
    keep = rng.random(a.shape) < p
    pairs = np.stack([a[keep], b[keep]], axis=1)
    flipped = rng.random(len(pairs)) < flip
    side = rng.random(len(pairs)) < 0.5  # rewire inside A or inside B
    low = np.where(side, 0, half)
    size = np.where(side, half, n - half)
    inside = low[:, None] + (rng.random((len(pairs), 2)) * size[:, None]).astype(np.int64)
    pairs[flipped] = inside[flipped]
    edges = _unique_edges(pairs)
    return _graph(n, edges, _spring_features(n, edges, rng), f"planted bipartite({n}, {p:g}, flip {flip:g})")


def gset_like(n: int, density: float, rng: np.random.Generator) -> WeightedGraph:
    """As rudy's ``-rnd_graph n density seed`` (Gset G1-G5: n = 800, density 6%): round(density * n (n-1)
    / 2) distinct edges drawn uniformly at random, unit weights; 32 standard-normal features per node as
    the public code gives Gset graphs."""
    total = n * (n - 1) // 2
    m = round(density * total)
    chosen = rng.choice(total, size=m, replace=False)
    # invert the row-major index of the strict upper triangle
    iu = np.triu_indices(n, 1)
    pairs = np.stack([iu[0][chosen], iu[1][chosen]], axis=1)
    return _graph(n, pairs, rng.standard_normal((n, 32)), f"gset-like({n}, {density:.0%})")


def maxcut_graph(config: GraphPoolingConfig, seed: int) -> WeightedGraph:
    """The graph of a run: drawn from ``(seed, task, "env", family)`` so every algorithm cuts the same one."""
    rng = rng_for(seed, TASK_ID, "env", config.family)
    family = config.family
    if family == "grid":
        return grid_graph(config.grid_rows, config.grid_cols)
    if family == "ring":
        return ring_graph(config.nodes, config.ring_neighbours)
    if family == "er":
        return erdos_renyi(config.nodes, config.edge_prob, rng)
    if family == "regular":
        return random_regular(config.nodes, config.degree, rng)
    if family == "bipartite":
        return planted_bipartite(config.nodes, config.edge_prob, config.flip_prob, rng)
    if family == "gset":
        return gset_like(config.nodes, config.gset_density, rng)
    raise ValueError(f"unknown graph family {family!r}")


# ----------------------------------------------------------------------------------- classification
def polygon_centres(parts: int) -> np.ndarray:
    """Vertices of a regular polygon of radius 20 * parts (the public generator's part centres)."""
    angle = 2 * math.pi * np.arange(parts) / parts
    return 20 * parts * np.stack([np.cos(angle), np.sin(angle)], axis=1)


def multipartite_graph(
    centres: np.ndarray, max_part: int, rng: np.random.Generator
) -> tuple[int, np.ndarray, np.ndarray]:
    """One complete multipartite graph: part sizes uniform in 1..max_part, node positions N(centre, 1).
    Returns (n, edges (m, 2) i < j, features (n, 3) = x, y, part index)."""
    sizes = rng.integers(1, max_part + 1, size=len(centres))
    part = np.repeat(np.arange(len(centres)), sizes)
    positions = rng.normal(centres[part], 1.0)
    i, j = np.triu_indices(len(part), 1)
    keep = part[i] != part[j]
    edges = np.stack([i[keep], j[keep]], axis=1)
    return len(part), edges, np.concatenate([positions, part[:, None]], axis=1)


def sbm_patterns(parts: int) -> list[np.ndarray]:
    """The mixing patterns (block adjacency, no diagonal) that are the classes of the ``sbm`` set:
    a cycle of blocks, a perfect matching of blocks, complete multipartite, and a star around block 0."""
    eye = np.eye(parts, dtype=bool)
    cycle = np.roll(eye, 1, axis=1) | np.roll(eye, -1, axis=1)
    matching = np.zeros_like(eye)
    for b in range(0, parts - 1, 2):
        matching[b, b + 1] = matching[b + 1, b] = True
    complete = ~eye
    star = np.zeros_like(eye)
    star[0, 1:] = star[1:, 0] = True
    return [cycle & ~eye, matching, complete, star]


def sbm_graph(
    pattern: np.ndarray, max_part: int, rng: np.random.Generator, p_in: float = 0.05, p_out: float = 0.7
) -> tuple[int, np.ndarray, np.ndarray]:
    """A disassortative SBM: blocks of 2..max_part nodes, edges with probability p_out between blocks the
    pattern wires and p_in inside a block; features: one-hot block index + N(0, 0.5) noise."""
    parts = len(pattern)
    sizes = rng.integers(min(2, max_part), max_part + 1, size=parts)
    block = np.repeat(np.arange(parts), sizes)
    i, j = np.triu_indices(len(block), 1)
    same = block[i] == block[j]
    prob = np.where(same, p_in, np.where(pattern[block[i], block[j]], p_out, 0.0))
    keep = rng.random(len(i)) < prob
    edges = np.stack([i[keep], j[keep]], axis=1)
    features = np.eye(parts)[block] + rng.normal(0.0, 0.5, (len(block), parts))
    return len(block), edges, features


def cache_dir() -> Path:
    """The task cache (:func:`iclrbench.core.cache.cache_root`)."""
    return cache_root()


def dataset_key(config: GraphPoolingConfig) -> dict[str, Any]:
    """What a classification data set depends on (not the run seed: the data set is fixed)."""
    return {
        "dataset": config.dataset,
        "graphs_per_class": config.graphs_per_class,
        "parts": config.parts,
        "max_part": config.max_part,
        "data_seed": config.data_seed,
        "version": DATA_VERSION,
    }


def _data_list(config: GraphPoolingConfig) -> list[Data]:
    import torch
    from torch_geometric.data import Data

    rng = rng_for(config.data_seed, TASK_ID, "data", config.dataset)
    out = []
    if config.dataset == "multipartite":
        centres = polygon_centres(config.parts)
        classes = [np.roll(centres, c, axis=0) for c in range(config.parts)]  # class c: rotation by c
    else:
        classes = sbm_patterns(config.parts)
    for label, spec in enumerate(classes):
        for _ in range(config.graphs_per_class):
            if config.dataset == "multipartite":
                n, edges, features = multipartite_graph(spec, config.max_part, rng)
            else:
                n, edges, features = sbm_graph(spec, config.max_part, rng)
            edge_index = both_directions(edges)[0]
            out.append(
                Data(
                    x=torch.as_tensor(features, dtype=torch.float32),
                    edge_index=torch.as_tensor(edge_index, dtype=torch.long),
                    y=torch.tensor([label]),
                    num_nodes=n,
                )
            )
    return out


def _in_memory_dataset_class() -> type:
    """The ``InMemoryDataset`` subclass, built on first use so that importing this module stays light."""
    from torch_geometric.data import InMemoryDataset

    class HeterophilicGraphs(InMemoryDataset):
        """A generated classification set (Multipartite or disassortative SBM), processed once into
        ``root/processed/data.pt`` with PyG's own ``save`` / ``load`` (tensors only, no pickle)."""

        def __init__(self, root: str, config: GraphPoolingConfig, force_reload: bool = False) -> None:
            self.config = config
            super().__init__(root, force_reload=force_reload, log=False)
            self.load(self.processed_paths[0])

        @property
        def raw_file_names(self) -> list[str]:
            return []  # generated, nothing to download

        @property
        def processed_file_names(self) -> list[str]:
            return ["data.pt"]

        def download(self) -> None:
            return None

        def process(self) -> None:
            self.save(_data_list(self.config), self.processed_paths[0])

    return HeterophilicGraphs


_CLASSES: dict[str, type] = {}


def heterophilic_dataset(config: GraphPoolingConfig, root: Path | None = None) -> Any:
    """The classification data set of ``config`` (an ``InMemoryDataset``), generated on first use and read
    from the cache afterwards."""
    if "cls" not in _CLASSES:
        _CLASSES["cls"] = _in_memory_dataset_class()
    key = dataset_key(config)
    where = (
        root or cache_dir() / "graph_pooling" / f"v{DATA_VERSION}" / f"{config.dataset}-{stable_hash(key)}"
    )
    return _CLASSES["cls"](str(where), config)


def stratified_folds(labels: np.ndarray, folds: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Test indices of ``folds`` stratified folds: each class shuffled and dealt round-robin."""
    out: list[list[int]] = [[] for _ in range(folds)]
    offset = 0
    for c in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == c))
        for i, index in enumerate(members):
            out[(i + offset) % folds].append(int(index))
        offset += len(members)
    return [np.sort(np.array(f, dtype=np.int64)) for f in out]


def edge_index_tensor(graph: WeightedGraph) -> torch.Tensor:
    import torch

    return torch.as_tensor(graph.edge_index(), dtype=torch.long)
