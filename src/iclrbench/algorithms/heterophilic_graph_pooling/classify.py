"""heterophilic-graph-pooling, classification: the paper's classifier and its training schedule, the same
for every pooling layer (Abate & Bianchi, ICLR 2025, Sec. 5.2 and App. C; the public code's
``architecture/graphclassifier.yaml`` and ``run_graph_classification.yaml``).

Model: one GIN layer (MLP [in, 32, 32], ELU, batch norm) -> the pooling layer -> one GIN layer (dense GIN
after dense pooling) -> sum readout -> MLP [32, 32, 16, classes] with dropout 0.5. Loss: cross-entropy plus
the pooling layer's auxiliary loss. Adam, gradient-norm clipping 5, early stopping on the validation loss
(the checkpoint of lowest validation loss is tested). Evaluation: stratified k-fold cross-validation,
15% of each training part held out for validation; the same folds for every algorithm of a seed.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import numpy as np

from iclrbench.algorithms.heterophilic_graph_pooling import Pooler, gin
from iclrbench.core.seeding import rng_for
from iclrbench.envs.heterophilic_graph_pooling import (
    TASK_ID,
    GraphPoolingConfig,
    heterophilic_dataset,
    stratified_folds,
)

VALIDATION_SHARE = 0.15


def _classifier_class() -> type:
    import torch
    from torch_geometric.nn import MLP, DenseGINConv, global_add_pool
    from torch_geometric.utils import to_dense_adj, to_dense_batch

    class GraphClassifier(torch.nn.Module):
        """Message passing, one pooling layer, message passing, sum readout, MLP."""

        def __init__(self, in_channels: int, classes: int, hidden: int, pool: Any, dense: bool) -> None:
            super().__init__()
            self.pre = gin(in_channels, hidden)
            self.pool = pool
            self.dense = dense
            mlp = MLP([hidden, hidden, hidden], act="elu", norm=None)
            self.post = DenseGINConv(mlp, train_eps=False) if dense else gin(hidden, hidden, norm=None)
            self.readout = MLP([hidden, hidden, hidden // 2, classes], act="elu", norm=None, dropout=0.5)

        def forward(self, data: Any) -> tuple[Any, Any, Any]:
            """Logits, auxiliary loss, and nodes after pooling per graph."""
            elu = torch.nn.functional.elu
            graphs = int(data.num_graphs)
            x = elu(self.pre(data.x, data.edge_index))
            if self.dense:
                x, mask = to_dense_batch(x, data.batch, batch_size=graphs)
                adj = to_dense_adj(data.edge_index, data.batch, batch_size=graphs, max_num_nodes=x.size(1))
                x, adj, aux = self.pool(x, adj, mask)
                x = elu(self.post(x, adj)).sum(dim=1)
                kept = torch.full((graphs,), float(adj.size(1)))
            else:
                x, edge_index, batch, aux = self.pool(x, data.edge_index, data.batch)
                x = elu(self.post(x, edge_index))
                x = global_add_pool(x, batch, size=graphs)
                kept = torch.bincount(batch, minlength=graphs).float()
            return self.readout(x), aux, kept

    return GraphClassifier


_CLASSES: dict[str, type] = {}


def classifier(in_channels: int, classes: int, hidden: int, pool: Any, dense: bool) -> Any:
    """A :class:`GraphClassifier` around ``pool``."""
    if "model" not in _CLASSES:
        _CLASSES["model"] = _classifier_class()
    return _CLASSES["model"](in_channels, classes, hidden, pool, dense)


def _epoch_loss(model: Any, loader: Any, train: bool, optimiser: Any = None, clip: float = 5.0) -> float:
    import torch

    ce = torch.nn.functional.cross_entropy
    total, count = 0.0, 0
    model.train(train)
    for data in loader:
        with torch.set_grad_enabled(train):
            logits, aux, _ = model(data)
            loss = ce(logits, data.y) + aux
        if train:
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimiser.step()
        total += float(loss.detach()) * int(data.num_graphs)
        count += int(data.num_graphs)
    return total / max(count, 1)


def _test(model: Any, loader: Any) -> tuple[float, float]:
    """(accuracy, mean fraction of nodes left after pooling) on ``loader``."""
    import torch

    model.eval()
    right, count, kept = 0, 0, []
    with torch.no_grad():
        for data in loader:
            logits, _, pooled = model(data)
            right += int((logits.argmax(dim=-1) == data.y).sum())
            count += int(data.num_graphs)
            sizes = torch.bincount(data.batch, minlength=int(data.num_graphs)).float()
            kept.append((pooled / sizes).numpy())
    return right / max(count, 1), float(np.concatenate(kept).mean()) if kept else 1.0


def dense_clusters(config: GraphPoolingConfig, sizes: np.ndarray) -> int:
    """Clusters of the dense poolers (DiffPool, MinCutPool, DMoN): int(avg_nodes * ratio), as the public
    ``run_graph_classification.py`` computes ``pooled_nodes``. Its ``MultipartiteDataModule`` sets
    avg_nodes = max_N (20; parts have 1..max_N - 1 nodes, so ``max_part + 1`` here), not the mean graph
    size (~100): 10 clusters; other sets (as its TU modules) take the mean number of nodes."""
    average = config.max_part + 1 if config.dataset == "multipartite" else int(sizes.mean())
    return max(1, int(average * config.pool_ratio))


def cross_validate(
    pooler: Pooler, config: GraphPoolingConfig, seed: int
) -> tuple[dict[str, float], list[list[float]]]:
    """Train and test ``pooler``'s classifier on ``config.folds_run`` of ``config.folds`` stratified
    folds; return the metrics and, per fold, the validation accuracy after every epoch."""
    import torch
    from torch_geometric.loader import DataLoader

    dataset = heterophilic_dataset(config)
    labels = dataset.y.numpy()
    classes = int(labels.max()) + 1
    folds = stratified_folds(labels, config.folds, rng_for(seed, TASK_ID, "folds"))
    pooled_nodes = dense_clusters(config, np.diff(dataset.slices["x"].numpy()))
    accuracies, kept, parameters, curves = [], [], 0, []
    start = time.perf_counter()
    for fold in range(config.folds_run):
        test = folds[fold]
        rest = rng_for(seed, TASK_ID, "validation", str(fold)).permutation(
            np.setdiff1d(np.arange(len(labels)), test)
        )
        n_val = max(1, round(VALIDATION_SHARE * len(rest)))
        val, train = rest[:n_val], rest[n_val:]
        torch.manual_seed(int(pooler.rng.integers(2**31)))
        pool = pooler.build(config.hidden, config.pool_ratio, pooled_nodes)
        model = classifier(dataset.num_features, classes, config.hidden, pool, pooler.dense)
        parameters = sum(p.numel() for p in model.parameters())
        optimiser = torch.optim.Adam(model.parameters(), lr=config.lr)
        order = torch.Generator().manual_seed(int(pooler.rng.integers(2**31)))
        train_loader = DataLoader(
            dataset[torch.as_tensor(train)], batch_size=config.batch_size, shuffle=True, generator=order
        )
        val_loader = DataLoader(dataset[torch.as_tensor(val)], batch_size=config.batch_size)
        test_loader = DataLoader(dataset[torch.as_tensor(test)], batch_size=config.batch_size)
        best, best_state, since, curve = float("inf"), None, 0, []
        for _ in range(config.epochs):
            _epoch_loss(model, train_loader, True, optimiser)
            val_loss = _epoch_loss(model, val_loader, False)
            curve.append(_test(model, val_loader)[0])
            if val_loss < best:
                best, best_state, since = val_loss, copy.deepcopy(model.state_dict()), 0
            else:
                since += 1
                if since >= config.patience:
                    break
        if best_state is not None:
            model.load_state_dict(best_state)
        accuracy, kept_share = _test(model, test_loader)
        accuracies.append(accuracy)
        kept.append(kept_share)
        curves.append(curve)
    metrics = {
        "score": float(np.mean(accuracies)),
        "nodes_kept": float(np.mean(kept)),
        "parameters": float(parameters),
        "seconds": time.perf_counter() - start,
    }
    return metrics, curves
