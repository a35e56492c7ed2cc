"""conformal-fairness's instances: a data set, a base classifier fitted once per (data set, split seed),
and the held-out pool its probabilities are scored on, resplit into calibration and test sets
(Vadlamani et al., ICLR 2025, section 5: stratified by group and label, train/valid 50%, then calibration
and test halves of the rest, resplit ``resplits`` times per fitted model).

Base models: scikit-learn's histogram gradient boosting for the tabular sets; a two-layer GCN
(torch-geometric's ``GCNConv``, Kipf & Welling 2017) trained transductively on the SBM graph's training
nodes, with the epoch of best validation accuracy kept. Their held-out probabilities are cached as ``.npz``
(no pickle) under the task cache, keyed by everything that determines them.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from pathlib import Path

import numpy as np

from iclrbench.core.cache import build_once, cache_root
from iclrbench.core.config import param
from iclrbench.core.seeding import rng_for
from iclrbench.envs.conformal_fairness.data import SENSITIVE, Dataset, load_tabular, sbm_graph

TASK_ID = "conformal-fairness"
DATASETS = tuple(SENSITIVE)

#: The fairness notions of the paper's Table 1, by the calibration points each one's coverage is taken over
#: for label ``y`` in group ``g`` (``Y`` the true label):
#: demographic parity and disparate impact: every point of ``g`` (P[y in C | G=g]);
#: equal opportunity: ``Y = y`` (true-positive rate); predictive equality: ``Y != y`` (false-positive
#: rate); equalized odds: both of those; overall accuracy equality: every point of ``g``, at its true label
#: (group coverage, one threshold for all labels); predictive parity: as the paper's code, ``PPV - prior``
#: per group (``PPV = P[Y = y | y in C]`` by Bayes from the true-positive rate, ``P[y in C]`` and the prior
#: ``P[Y = y]``), so groups are compared on how far their sets lift the share of ``y`` above its base rate.
FILTERS = (
    "demographic_parity",
    "equal_opportunity",
    "predictive_equality",
    "equalized_odds",
    "overall_accuracy_equality",
    "predictive_parity",
    "disparate_impact",
)


def positive_labels(metric: str, n_classes: int) -> list[int]:
    """Labels a metric is enforced on: every label but 0 (for binary data, the favourable outcome 1);
    overall accuracy equality is label-free (one pass, label 0 standing for all)."""
    return [0] if metric == "overall_accuracy_equality" else list(range(1, n_classes))


@dataclasses.dataclass(frozen=True)
class ConformalFairnessConfig:
    """One evaluation: data set and group, the fairness notion and its target, the conformal score."""

    dataset: str = param("synthetic", "adult, compas, german, synthetic or sbm (graph)", choices=DATASETS)
    sensitive: str = param(
        "", "sensitive attribute (adult: sex | race; compas: race | sex; german: age | sex); '' = first"
    )
    metric: str = param("demographic_parity", "fairness notion enforced and measured", choices=FILTERS)
    score: str = param("aps", "non-conformity score: aps (randomised) or tps", choices=("aps", "tps"))
    alpha: float = param(0.1, "miscoverage level, in (0, 1) (paper: 0.1)")
    c: float = param(
        0.1, "largest allowed coverage gap between groups, in (0, 1); disparate impact: the ratio floor 0.8"
    )
    resplits: int = param(20, "calibration / test resplits of one fitted model (>= 20)", low=20, high=10_000)
    calibration_fraction: float = param(0.5, "share of the held-out pool used for calibration")
    train_fraction: float = param(0.5, "share of the data the base model is fitted on")
    graph_nodes: int = param(
        20_000,
        "sbm: nodes of the graph (the paper's Pokec and Credit graphs have 30-67k; at 2,000 a test half's "
        "minority cells hold ~25 nodes, and a rate's sampling noise, ~0.04, is near c)",
        low=200,
        high=1_000_000,
    )

    def __post_init__(self) -> None:
        for name in ("alpha", "c", "calibration_fraction", "train_fraction"):
            value = getattr(self, name)
            if not 0.0 < value < 1.0:
                raise ValueError(f"{name}: {value} is outside (0, 1)")
        if self.metric == "disparate_impact" and self.c < 0.5:
            raise ValueError(
                f"c: {self.c} is disparate impact's floor on the ratio of group rates; the four-fifths rule "
                "is --set c=0.8"
            )
        if self.sensitive and self.sensitive not in SENSITIVE[self.dataset]:
            raise ValueError(
                f"sensitive: {self.dataset} has no attribute {self.sensitive!r}; choose one of "
                f"{', '.join(SENSITIVE[self.dataset])}"
            )

    @property
    def attribute(self) -> str:
        return self.sensitive or SENSITIVE[self.dataset][0]


@dataclasses.dataclass(frozen=True)
class Pool:
    """The base model's held-out points: class probabilities, labels, groups (never seen in fitting)."""

    probs: np.ndarray
    labels: np.ndarray
    groups: np.ndarray
    group_names: tuple[str, ...]
    base_accuracy: float

    @property
    def n_classes(self) -> int:
        return self.probs.shape[1]

    @property
    def n_groups(self) -> int:
        return len(self.group_names)


def stratified_split(
    labels: np.ndarray, groups: np.ndarray, fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Indices (first, rest): ``fraction`` of every (group, label) stratum goes to ``first``."""
    first = []
    strata = groups * (int(labels.max()) + 1) + labels
    for s in np.unique(strata):
        members = rng.permutation(np.flatnonzero(strata == s))
        first.append(members[: round(fraction * len(members))])
    chosen = np.zeros(len(labels), bool)
    chosen[np.concatenate(first)] = True
    return np.flatnonzero(chosen), np.flatnonzero(~chosen)


def _fit_boosting(data: Dataset, train: np.ndarray, seed: int) -> object:
    from sklearn.ensemble import HistGradientBoostingClassifier

    model = HistGradientBoostingClassifier(random_state=seed)
    model.fit(data.x[train], data.y[train])
    return model


def _tabular_pool(config: ConformalFairnessConfig, seed: int) -> Pool:
    data = load_tabular(config.dataset, config.attribute, rng_for(seed, TASK_ID, "synthetic-data"))
    train, held = stratified_split(data.y, data.groups, config.train_fraction, rng_for(seed, TASK_ID, "fit"))
    model = _fit_boosting(data, train, seed)
    probs = model.predict_proba(data.x[held])  # type: ignore[attr-defined]
    accuracy = float((probs.argmax(1) == data.y[held]).mean())
    return Pool(probs, data.y[held], data.groups[held], data.group_names, accuracy)


def _graph_pool(config: ConformalFairnessConfig, seed: int) -> Pool:
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import GCNConv

    from iclrbench.models.torch_threads import one_torch_thread

    graph = sbm_graph(rng_for(seed, TASK_ID, "sbm"), nodes=config.graph_nodes)
    data = graph.data
    rng = rng_for(seed, TASK_ID, "fit")
    fit, held = stratified_split(data.y, data.groups, config.train_fraction, rng)
    # the fitted share splits 60/40 into training and validation nodes (the paper's 30% / 20%)
    train_idx = rng.permutation(fit)
    cut = int(0.6 * len(train_idx))
    train, valid = torch.as_tensor(train_idx[:cut]), torch.as_tensor(train_idx[cut:])

    class GCN(torch.nn.Module):
        def __init__(self, features: int, hidden: int, classes: int) -> None:
            super().__init__()
            self.conv1, self.conv2 = GCNConv(features, hidden), GCNConv(hidden, classes)

        def forward(self, x: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
            h = F.dropout(F.relu(self.conv1(x, edges)), p=0.5, training=self.training)
            return self.conv2(h, edges)

    with one_torch_thread():
        torch.manual_seed(seed)
        x, edges, y = torch.as_tensor(data.x), torch.as_tensor(graph.edges), torch.as_tensor(data.y)
        model = GCN(x.shape[1], 32, data.n_classes)
        opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
        best, best_state = -1.0, None
        for _ in range(200):
            model.train()
            opt.zero_grad()
            F.cross_entropy(model(x, edges)[train], y[train]).backward()
            opt.step()
            model.eval()
            with torch.no_grad():
                accuracy = float((model(x, edges)[valid].argmax(1) == y[valid]).float().mean())
            if accuracy > best:
                best, best_state = accuracy, {k: v.clone() for k, v in model.state_dict().items()}
        assert best_state is not None
        model.load_state_dict(best_state)
        model.eval()
        with torch.no_grad():
            probs = torch.softmax(model(x, edges), dim=1).double().numpy()
    held_probs = probs[held]
    accuracy = float((held_probs.argmax(1) == data.y[held]).mean())
    return Pool(held_probs, data.y[held], data.groups[held], data.group_names, accuracy)


def pool_key(config: ConformalFairnessConfig, seed: int) -> str:
    """What determines a fitted model's held-out probabilities."""
    key = {"v": 1, "dataset": config.dataset, "attribute": config.attribute, "seed": seed,
           "train_fraction": config.train_fraction}  # fmt: skip
    if config.dataset == "sbm":
        key.update(v=2, nodes=config.graph_nodes)  # v2: edges drawn per block, group 1's noise 8x
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def _load_pool(path: Path) -> Pool:
    with np.load(path, allow_pickle=False) as saved:
        names = tuple(str(n) for n in saved["group_names"])
        return Pool(saved["probs"], saved["labels"], saved["groups"], names, float(saved["accuracy"]))


def held_out_pool(config: ConformalFairnessConfig, seed: int) -> Pool:
    """The base model's held-out pool for (data set, attribute, split seed): fitted once, then cached.
    Parallel runs of one seed (every predictor of a claim) wait on a file lock for the first one's fit
    instead of each fitting it again."""
    path = cache_root() / TASK_ID / f"pool-{config.dataset}-{pool_key(config, seed)}.npz"
    fitted: list[Pool] = []  # the pool this process fitted, if it was the one to fit it

    def fit(tmp: Path) -> None:
        pool = _graph_pool(config, seed) if config.dataset == "sbm" else _tabular_pool(config, seed)
        fitted.append(pool)
        np.savez(tmp, probs=pool.probs, labels=pool.labels, groups=pool.groups,
                 group_names=np.array(pool.group_names), accuracy=pool.base_accuracy)  # fmt: skip

    build_once(path, fit)
    return fitted[0] if fitted else _load_pool(path)


@functools.cache
def _strata(dataset: str, attribute: str, graph_nodes: int = 20_000) -> np.ndarray:
    """(groups, labels) counts of a data set (the generated ones at seed 0), to vet a config cheaply."""
    if dataset == "sbm":
        data = sbm_graph(rng_for(0, TASK_ID, "sbm"), nodes=graph_nodes).data
    else:
        data = load_tabular(dataset, attribute, rng_for(0, TASK_ID, "synthetic-data"))
    counts = np.zeros((data.n_groups, data.n_classes), dtype=np.int64)
    np.add.at(counts, (data.groups, data.y), 1)
    return counts


def unsupported(config: ConformalFairnessConfig) -> str | None:
    """Why ``config`` cannot be calibrated (a group with no calibration point, or none the fairness
    filter selects for some positive label), or None. Counts follow :func:`stratified_split`'s rounding."""
    counts = _strata(config.dataset, config.attribute, config.graph_nodes)
    held = counts - np.round(config.train_fraction * counts).astype(np.int64)
    cal = np.round(config.calibration_fraction * held).astype(np.int64)
    for g, (row, rest) in enumerate(zip(cal, held - cal, strict=True)):
        if row.sum() == 0:
            return f"group {g} of {config.dataset}/{config.attribute} would have no calibration point"
        if rest.sum() == 0:
            return f"group {g} of {config.dataset}/{config.attribute} would have no test point"
        for y in positive_labels(config.metric, counts.shape[1]):
            if config.metric in ("equal_opportunity", "equalized_odds", "predictive_parity") and row[y] == 0:
                return (
                    f"{config.metric} is not defined on {config.dataset}/{config.attribute}: group {g} has "
                    f"no calibration point of label {y}"
                )
            if config.metric in ("predictive_equality", "equalized_odds") and row.sum() == row[y]:
                return (
                    f"{config.metric} is not defined on {config.dataset}/{config.attribute}: group {g} has "
                    f"no calibration point of a label other than {y}"
                )
    return None
