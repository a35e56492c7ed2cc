"""MaxCutPool: Abate & Bianchi, "MaxCutPool: differentiable feature-aware Maxcut for pooling in graph neural
networks", ICLR 2025 (arXiv:2409.05100); defaults from the authors' code (NGMLGroup/MaxCutPool, configs
``pooler/maxcutpool*.yaml``, ``architecture/*.yaml``, ``run_maxcut.yaml``). Written here for PyG without
its compiled extensions (no torch_scatter / torch_sparse): sums are ``index_add_``, and every product
with the batch's adjacency is one torch CSR sparse-dense product (symmetric, so its backward reuses it).

The layer (:class:`MaxCutPool`), called as PyG's ``TopKPooling``: ``pool(x, edge_index, edge_attr, batch)``.

1. ScoreNet: a linear embedding, then heterophilic message passing -- GCN layers (``normalize=False``)
   on the propagation matrix I - delta L_sym with delta = 2 (so neighbours enter with a positive weight
   and the node itself with 1 - delta = -1: a high-pass filter whose outputs alternate in sign across
   edges) -- then an MLP and tanh: one score z_i in [-1, 1] per node.
2. Auxiliary loss beta * z^T A z / vol(G) (mean over the graphs of a batch): minimal when the signs
   alternate across edges, i.e. at a maximum cut.
3. The top-k nodes by score (ratio 0.5) are the supernodes; every other node joins the supernode that
   reaches it by the most paths of the shortest length, found by propagating one-hot supernode indicators
   along edges (at most ``max_iter`` = 5 steps, the first supernode on ties; still unassigned nodes join
   a random supernode of their graph). The pooled graph connects supernodes whose members were adjacent.
4. Pooled features: the supernode's own features times its score; the expressive variant (MaxCutPool-E)
   sums the features of every member instead, so that no node's information is dropped.

For MAXCUT (the paper's Sec. 5.1) the layer alone is trained on its auxiliary loss on one graph (after one
GIN layer, Adam 1e-3, ReduceLROnPlateau, early stopping on the loss), and the cut is read from sign(z).
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from iclrbench.core.algorithm import Algorithm, register_algorithm
from iclrbench.core.config import param
from iclrbench.envs.heterophilic_graph_pooling import GraphPoolingConfig, WeightedGraph

if TYPE_CHECKING:
    import torch

TASK = "heterophilic-graph-pooling"


def listmult(values: list[int], times: int) -> tuple[int, ...]:
    """The public configs' ``${listmult: LIST, TIMES}`` resolver (``source/utils/hydra.py``): the list
    repeated ``times`` times (``listmult([4], 32)`` is 32 fours), as a tuple of layer widths."""
    if times < 0:
        raise ValueError(f"listmult: times must be >= 0, got {times}")
    return tuple(values) * times


#: ScoreNet of the MAXCUT experiment (``pooler/maxcutpool-cut.yaml``: ``mp_units: ${listmult: [4], 32}``,
#: ``mlp_units: ${listmult: [4], 8}``): 32 HetMP layers of width 4 (ReLU), an MLP of 8 layers of width 4
#: (ReLU). The depth is the point: 32 hops of propagation reach across the 8 x 12 grid (diameter 18).
CUT_SCORENET = {
    "mp_units": listmult([4], 32),
    "mp_act": "relu",
    "mlp_units": listmult([4], 8),
    "mlp_act": "relu",
}
#: ScoreNet of graph classification (``pooler/maxcutpool.yaml``): 12 HetMP layers (tanh), MLP
#: ``${listmult: [16], 2}`` (ReLU)
CLASSIFY_SCORENET = {
    "mp_units": (32, 32, 32, 32, 16, 16, 16, 16, 8, 8, 8, 8),
    "mp_act": "tanh",
    "mlp_units": listmult([16], 2),
    "mlp_act": "relu",
}


# ------------------------------------------------------------------------------------------ protocols
class MaxCutSolver(Algorithm):
    """Protocol of the maxcut problem: ``solve(graph) -> signs`` (+1 / -1 per node)."""

    #: trainable parameters of the last solve (0 for combinatorial solvers)
    parameters: int = 0

    @classmethod
    def supports(cls, config: GraphPoolingConfig) -> str | None:
        return None if config.problem == "maxcut" else "a MAXCUT solver: runs on problem=maxcut"

    def solve(self, graph: WeightedGraph) -> np.ndarray:
        raise TypeError(f"{type(self).__name__} must implement solve()")


class Pooler(Algorithm):
    """Protocol of the classification problem: ``build(in_channels, pooled_nodes)`` returns a pooling
    module whose ``forward(x, edge_index, batch)`` gives ``(x, edge_index, batch, aux_loss)`` (sparse) or,
    when ``dense`` is true, ``forward(x, adj, mask) -> (x, adj, aux_loss)`` on dense batches."""

    dense: bool = False

    @classmethod
    def supports(cls, config: GraphPoolingConfig) -> str | None:
        return (
            None if config.problem == "classification" else "a pooling layer: runs on problem=classification"
        )

    def build(self, in_channels: int, ratio: float, pooled_nodes: int) -> torch.nn.Module:
        raise TypeError(f"{type(self).__name__} must implement build()")


# ------------------------------------------------------------------------------------------- the layer
def _activation(name: str) -> Any:
    import torch

    return {"relu": torch.relu, "tanh": torch.tanh, "elu": torch.nn.functional.elu}[name]


def _symmetric_product_class() -> type:
    import torch

    class SymmetricProduct(torch.autograd.Function):
        """A @ x for a symmetric sparse A, whose backward is A @ grad (no transpose of A to build)."""

        @staticmethod
        def forward(ctx: Any, operator: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            ctx.operator = operator
            return operator @ x

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> tuple[None, torch.Tensor]:
            return None, ctx.operator @ grad

    return SymmetricProduct


_MODULES: dict[str, type] = {}


def symmetric_product(operator: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``operator @ x`` (operator a symmetric sparse CSR matrix), differentiable in ``x``."""
    if "sym" not in _MODULES:
        _MODULES["sym"] = _symmetric_product_class()
    return _MODULES["sym"].apply(operator, x)


@dataclasses.dataclass
class Adjacency:
    """A batch's symmetric weighted adjacency without self-loops: CSR matrix, degrees, edge list."""

    matrix: torch.Tensor
    degree: torch.Tensor
    edge_index: torch.Tensor
    weight: torch.Tensor


def adjacency(edge_index: torch.Tensor, edge_weight: torch.Tensor | None, num_nodes: int) -> Adjacency:
    """The adjacency of an undirected graph given in both directions (PyG's convention) as a CSR matrix;
    self-loops are dropped (L_sym is defined on the graph without them, as in PyG's get_laplacian).
    Edges sorted by (row, col) -- as generated graphs and their batches are -- are not sorted again."""
    import torch

    row, col = edge_index
    w = torch.ones(row.numel()) if edge_weight is None else edge_weight.view(-1).float()
    loops = row == col
    if bool(loops.any()):
        row, col, w = row[~loops], col[~loops], w[~loops]
    key = row * num_nodes + col
    if key.numel() > 1 and not bool((key[1:] >= key[:-1]).all()):
        order = torch.argsort(key)
        row, col, w = row[order], col[order], w[order]
    crow = torch.zeros(num_nodes + 1, dtype=torch.long)
    crow[1:] = torch.bincount(row, minlength=num_nodes).cumsum(0)
    with warnings.catch_warnings():  # torch calls its sparse CSR support 'beta'
        warnings.simplefilter("ignore", UserWarning)
        matrix = torch.sparse_csr_tensor(crow, col, w, (num_nodes, num_nodes))
    degree = torch.zeros(num_nodes).index_add_(0, row, w)
    return Adjacency(matrix, degree, torch.stack([row, col]), w)


def propagate(adj: Adjacency, x: torch.Tensor, delta: float) -> torch.Tensor:
    """(I - delta L_sym) x = (1 - delta) x + delta D^-1/2 A D^-1/2 x, L_sym = I - D^-1/2 A D^-1/2 (an
    isolated node keeps (1 - delta) x, as with PyG's get_laplacian(normalization='sym') + identity)."""
    import torch

    if delta == 0:
        return x
    scale = torch.where(adj.degree > 0, adj.degree.clamp(min=1e-12).rsqrt(), torch.zeros_like(adj.degree))
    scale = scale.view(-1, 1)
    return (1.0 - delta) * x + delta * scale * symmetric_product(adj.matrix, scale * x)


def max_cut_loss(z: torch.Tensor, adj: Adjacency, batch: torch.Tensor) -> torch.Tensor:
    """Mean over the graphs of a batch of z^T A z / vol(G), vol = the sum of the degrees."""
    import torch

    z = z.view(-1, 1)
    graphs = int(batch.max()) + 1 if batch.numel() else 1
    per_node = (z * symmetric_product(adj.matrix, z)).view(-1)
    cut = torch.zeros(graphs).index_add_(0, batch, per_node)
    volume = torch.zeros(graphs).index_add_(0, batch, adj.degree)
    return (cut / volume.clamp(min=1e-12)).mean()


def select_topk(score: torch.Tensor, ratio: float, batch: torch.Tensor) -> torch.Tensor:
    """Indices of the ceil(ratio * n_g) highest-scoring nodes of every graph, grouped by graph (PyG's
    own ``topk`` selection, as ``TopKPooling`` uses)."""
    from torch_geometric.nn.pool.select.topk import topk

    return topk(score.view(-1), ratio, batch)


def nearest_supernode(
    adj: Adjacency,
    kept: torch.Tensor,
    batch: torch.Tensor,
    max_iter: int,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """For every node, the position in ``kept`` of its supernode: itself if kept, else the supernode
    with the most walks of the shortest length t <= max_iter reaching it (the first on ties), else a
    random supernode of its graph. Walk counts are one sparse product a step: column r + 1 counts walks
    from the r-th supernode of the node's own graph (column 0: none), which works for a whole batch at
    once because the batch's adjacency is block-diagonal."""
    import torch

    n = batch.numel()
    graphs = int(batch.max()) + 1
    kept_counts = torch.bincount(batch[kept], minlength=graphs)
    kept_ptr = torch.cat([torch.zeros(1, dtype=torch.long), kept_counts.cumsum(0)])
    kept_local = torch.arange(kept.numel()) - kept_ptr[batch[kept]]  # rank of a supernode in its graph

    assign = torch.full((n,), -1, dtype=torch.long)
    assign[kept] = torch.arange(kept.numel())
    walks = torch.zeros(n, int(kept_counts.max()) + 1)
    walks[kept, kept_local + 1] = 1.0
    for _ in range(max_iter):
        if bool((assign >= 0).all()):
            break
        walks = adj.matrix @ walks
        best = walks.argmax(dim=-1)  # column of the most walks, 0 when none arrived
        new = (assign < 0) & (best > 0)
        assign[new] = kept_ptr[batch[new]] + best[new] - 1
    left = assign < 0
    if bool(left.any()):
        draw = torch.rand(int(left.sum()), generator=generator)
        pick = (draw * kept_counts[batch[left]]).long()
        assign[left] = kept_ptr[batch[left]] + pick
    return assign


def _pool_module_class() -> type:
    """:class:`MaxCutPool` and its ScoreNet, built on first use (torch and PyG imported lazily)."""
    import torch
    from torch_geometric.utils import coalesce, remove_self_loops

    class HetMP(torch.nn.Module):
        """One heterophilic message-passing layer: P (x W) + b with P = I - delta L_sym, as PyG's
        ``GCNConv(normalize=False)`` computes it on P (glorot weights, zero bias), by a sparse product."""

        def __init__(self, in_channels: int, out_channels: int) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(in_channels, out_channels, bias=False)
            torch.nn.init.xavier_uniform_(self.lin.weight)
            self.bias = torch.nn.Parameter(torch.zeros(out_channels))

        def forward(self, x: torch.Tensor, adj: Adjacency, delta: float) -> torch.Tensor:
            return propagate(adj, self.lin(x), delta) + self.bias

    class ScoreNet(torch.nn.Module):
        """Heterophilic message passing (HetMP layers), an MLP, and tanh: a score per node."""

        def __init__(
            self,
            in_channels: int,
            mp_units: tuple[int, ...],
            mp_act: str,
            mlp_units: tuple[int, ...],
            mlp_act: str,
            delta: float,
        ) -> None:
            super().__init__()
            self.delta = delta
            self.mp_act, self.mlp_act = _activation(mp_act), _activation(mlp_act)
            sizes = [in_channels, *mp_units]
            self.mp = torch.nn.ModuleList(HetMP(a, b) for a, b in itertools.pairwise(sizes))
            sizes = [sizes[-1], *mlp_units]
            self.mlp = torch.nn.ModuleList(torch.nn.Linear(a, b) for a, b in itertools.pairwise(sizes))
            self.out = torch.nn.Linear(sizes[-1], 1)

        def forward(self, x: torch.Tensor, adj: Adjacency) -> torch.Tensor:
            for layer in self.mp:
                x = self.mp_act(layer(x, adj, self.delta))
            for layer in self.mlp:
                x = self.mlp_act(layer(x))
            return torch.tanh(self.out(x)).view(-1)

    class MaxCutPool(torch.nn.Module):
        """MaxCutPool (Abate & Bianchi, ICLR 2025), called as PyG's ``TopKPooling``.

        ``forward(x, edge_index, edge_attr=None, batch=None)`` returns ``(x, edge_index, edge_attr,
        batch, perm, score, aux_loss)``: the pooled graph, the kept nodes (``perm``, grouped by graph),
        every node's score z in [-1, 1] and beta * z^T A z / vol. With ``just_cut`` the pooled graph is not
        built (``x``, ``edge_index``, ``edge_attr``, ``batch`` are returned as given, ``perm`` is None).
        """

        def __init__(
            self,
            in_channels: int,
            ratio: float = 0.5,
            beta: float = 1.0,
            expressive: bool = False,
            max_iter: int = 5,
            delta: float = 2.0,
            just_cut: bool = False,
            mp_units: tuple[int, ...] = CLASSIFY_SCORENET["mp_units"],
            mp_act: str = "tanh",
            mlp_units: tuple[int, ...] = (16, 16),
            mlp_act: str = "relu",
        ) -> None:
            super().__init__()
            if not 0.0 < ratio <= 1.0:
                raise ValueError(f"ratio {ratio} is outside (0, 1]")
            self.ratio, self.beta, self.expressive = ratio, beta, expressive
            self.max_iter, self.just_cut = max_iter, just_cut
            self.embedding = torch.nn.Linear(in_channels, in_channels)
            self.score_net = ScoreNet(in_channels, mp_units, mp_act, mlp_units, mlp_act, delta)

        def forward(
            self,
            x: torch.Tensor,
            edge_index: torch.Tensor,
            edge_attr: torch.Tensor | None = None,
            batch: torch.Tensor | None = None,
        ) -> tuple[Any, ...]:
            if batch is None:
                batch = torch.zeros(x.size(0), dtype=torch.long)
            adj = adjacency(edge_index, edge_attr, x.size(0))
            x = self.embedding(x)
            score = self.score_net(x, adj)
            aux_loss = self.beta * max_cut_loss(score, adj, batch)
            if self.just_cut:  # MAXCUT: only the scores and the loss are needed
                return x, edge_index, edge_attr, batch, None, score, aux_loss
            perm = select_topk(score, self.ratio, batch)
            assign = nearest_supernode(adj, perm, batch, self.max_iter)
            new_index, new_attr = coalesce(
                assign[adj.edge_index], None if edge_attr is None else adj.weight, num_nodes=perm.numel()
            )
            new_index, new_attr = remove_self_loops(new_index, new_attr)
            if new_attr is not None and new_attr.numel():
                new_attr = new_attr / new_attr.max()
            if self.expressive:
                pooled = torch.zeros(perm.numel(), x.size(1)).index_add_(0, assign, x)
            else:
                pooled = x[perm]
            pooled = pooled * score[perm].view(-1, 1)
            return pooled, new_index, new_attr, batch[perm], perm, score, aux_loss

    return MaxCutPool


def maxcutpool_class() -> type:
    """The torch module class :class:`MaxCutPool` (built once, on first use)."""
    if "pool" not in _MODULES:
        _MODULES["pool"] = _pool_module_class()
    return _MODULES["pool"]


def gin(in_channels: int, hidden: int, norm: str | None = "batch_norm") -> Any:
    """A GIN layer whose MLP is [in, hidden, hidden] with ELU (the public models' message passing)."""
    from torch_geometric.nn import MLP, GINConv

    return GINConv(MLP([in_channels, hidden, hidden], act="elu", norm=norm), train_eps=False)


# ------------------------------------------------------------------------------------------- the solver
@dataclasses.dataclass(frozen=True)
class MaxCutPoolParams:
    delta: float = param(2.0, "ScoreNet propagation I - delta L_sym (2: heterophilic)", low=0.0, high=4.0)
    beta: float = param(1.0, "weight of the auxiliary cut loss", low=0.0)
    expressive: bool = param(False, "MaxCutPool-E: supernodes sum their members' features")
    max_iter: int = param(5, "nearest-supernode propagation steps", low=0, high=50)
    cut_lr: float = param(1e-3, "MAXCUT: Adam learning rate (run_maxcut.yaml)", low=1e-7, high=1.0)
    clip: float = param(5.0, "gradient norm clipping", low=0.0)


class MaxCutPoolBase(MaxCutSolver, Pooler):
    """MaxCutPool on both problems: MAXCUT by training on the cut loss alone; pooling for classifiers."""

    Params: Any = MaxCutPoolParams

    @classmethod
    def supports(cls, config: GraphPoolingConfig) -> str | None:
        return None

    def build(self, in_channels: int, ratio: float, pooled_nodes: int) -> torch.nn.Module:
        p = self.params
        layer = maxcutpool_class()(
            in_channels,
            ratio=ratio,
            beta=p.beta,
            expressive=p.expressive,
            max_iter=p.max_iter,
            delta=p.delta,
            **CLASSIFY_SCORENET,
        )
        return _SparseAdapter.wrap(layer, "maxcutpool")

    def solve(self, graph: WeightedGraph) -> np.ndarray:
        import torch

        config: GraphPoolingConfig = self.config
        p = self.params
        torch.manual_seed(int(self.rng.integers(2**31)))
        data = graph.to_data()
        hidden = 32  # architecture/cut.yaml: one GIN layer of 32 channels before the pooling layer
        pre = gin(data.num_features, hidden)
        pool = maxcutpool_class()(
            hidden, ratio=config.pool_ratio, beta=p.beta, delta=p.delta, just_cut=True, **CUT_SCORENET
        )
        model = torch.nn.ModuleList([pre, pool])
        self.parameters = sum(t.numel() for t in model.parameters())
        optimiser = torch.optim.Adam(model.parameters(), lr=p.cut_lr)
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimiser, mode="min", factor=0.5, patience=200, threshold=1e-4, threshold_mode="abs", min_lr=1e-6
        )
        batch = torch.zeros(graph.n, dtype=torch.long)
        weight = data.edge_attr
        best, best_state, since = float("inf"), None, 0
        self.losses: list[float] = []
        for _ in range(config.cut_epochs):
            model.train()
            optimiser.zero_grad()
            h = torch.nn.functional.elu(pre(data.x, data.edge_index))
            loss = pool(h, data.edge_index, weight, batch)[-1]
            loss.backward()
            if p.clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), p.clip)
            optimiser.step()
            value = float(loss.detach())
            self.losses.append(value)
            plateau.step(value)
            if value < best:  # the checkpoint with the lowest training loss is the one tested
                best, best_state, since = value, copy.deepcopy(model.state_dict()), 0
            else:
                since += 1
                if since >= config.cut_patience:
                    break
        if best_state is not None:
            model.load_state_dict(best_state)
        model.eval()
        with torch.no_grad():
            h = torch.nn.functional.elu(pre(data.x, data.edge_index))
            score = pool(h, data.edge_index, weight, batch)[5]
        return np.where(score.numpy() > 0, 1, -1)


class _SparseAdapter:
    """Wraps a PyG-style sparse pooling layer into the task's protocol
    ``forward(x, edge_index, batch) -> (x, edge_index, batch, aux_loss)``."""

    @staticmethod
    def wrap(layer: Any, kind: str) -> Any:
        import torch

        class Adapter(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.layer = layer
                self.kind = kind

            def forward(self, x: Any, edge_index: Any, batch: Any) -> tuple[Any, Any, Any, Any]:
                zero = x.new_zeros(())
                if self.kind == "maxcutpool":
                    x, edge_index, _, batch, _, _, aux = self.layer(x, edge_index, None, batch)
                    return x, edge_index, batch, aux
                if self.kind in ("topk", "sagpool"):
                    x, edge_index, _, batch, _, _ = self.layer(x, edge_index, None, batch)
                elif self.kind == "asapool":
                    x, edge_index, _, batch, _ = self.layer(x, edge_index, batch=batch)
                elif self.kind == "edgepool":
                    x, edge_index, batch, _ = self.layer(x, edge_index, batch)
                return x, edge_index, batch, zero

        return Adapter()


@register_algorithm(task=TASK, name="maxcutpool", role="reference")
class MaxCutPoolAlgorithm(MaxCutPoolBase):
    """MaxCutPool (Abate & Bianchi, ICLR 2025): HetMP ScoreNet (delta = 2), cut loss, top-k supernodes and
    nearest-neighbour assignment; on MAXCUT trained on the cut loss alone, cut = sign(z)."""


@dataclasses.dataclass(frozen=True)
class ExpressiveParams(MaxCutPoolParams):
    expressive: bool = param(True, "MaxCutPool-E: supernodes sum their members' features")


@register_algorithm(task=TASK, name="maxcutpool-e", role="reference")
class MaxCutPoolExpressive(MaxCutPoolBase):
    """MaxCutPool-E: the expressive variant, each supernode sums the features of the nodes assigned to it
    (an injective aggregation, so the pooled graph keeps the input's distinguishing power)."""

    Params = ExpressiveParams
