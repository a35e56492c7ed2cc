"""From stored runs to leaderboard tables: one table per (task, task version, config), one row per
(algorithm, params), every metric summarised by n, mean with its 95% interval
(:data:`iclrbench.core.stats.MEAN_CI_METHOD`; none from one run), IQM with its bootstrap interval, and
ranked on the primary metric.

Ranks order the rows' means on the primary metric, as the table shows them; equal means share a rank.
A row whose mean is NaN (or which lacks the primary) is unranked (``rank == 0``) and listed last. The order
never depends on the order runs come in (ties are listed by algorithm, then params hash). A row that lacks
a seed some other ranked row of its table has is marked ``seeds_shared = False``: its rank compares means
over different seeds (the renderer says so), rather than silently ranking n = 3 against n = 5.

By default only each task's newest version is shown: rows of an older task version measured something
else and are never mixed in.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from iclrbench.core import catalog, stats
from iclrbench.core.errors import UserError
from iclrbench.core.jsonsafe import finite
from iclrbench.core.result import RunResult
from iclrbench.core.task import Metric


@dataclasses.dataclass
class MetricSummary:
    """One metric of one row. Intervals are ``None`` from fewer than 2 runs (one run has no spread)."""

    mean: float
    ci_low: float | None
    ci_high: float | None
    iqm: float
    std: float | None
    n: int = 0
    ci_method: str = stats.MEAN_CI_METHOD
    iqm_low: float | None = None
    iqm_high: float | None = None
    iqm_method: str = stats.IQM_CI_METHOD


@dataclasses.dataclass
class CurveSummary:
    """Mean curve over runs; ``low``/``high`` are the band that ``band`` names (pointwise)."""

    x: list[float]
    mean: list[float]
    low: list[float]
    high: list[float]
    x_label: str
    y_label: str
    band: str = stats.BAND_METHOD
    n: int = 0


@dataclasses.dataclass
class Row:
    algorithm: str
    role: str
    params: dict[str, Any]
    params_hash: str
    n: int
    failed: int
    seeds: list[int]
    metrics: dict[str, MetricSummary]
    curves: dict[str, CurveSummary]
    wall_s: float
    #: 1 = best; 0 = unranked (no finite mean of the primary metric); equal means share a rank
    rank: int = 0
    #: the primary metric of each successful run, for probabilities of improvement
    primary_values: list[float] = dataclasses.field(default_factory=list)
    #: params whose values differ between this table's rows of the same algorithm (dotted keys for nested)
    params_diff: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: False when another ranked row of the table has a seed this row lacks (its rank compares means over
    #: different seeds)
    seeds_shared: bool = True


@dataclasses.dataclass
class Table:
    task: str
    task_version: int
    config: dict[str, Any]
    config_hash: str
    budgets: list[str]
    metrics: list[Metric]
    rows: list[Row]
    provenance: dict[str, Any]

    @property
    def primary(self) -> Metric:
        return self.metrics[0]


def _task_metrics(task_id: str, runs: Sequence[RunResult]) -> list[Metric]:
    try:
        return list(catalog.get_task(task_id).metrics)
    except UserError:  # rows of a task no longer installed: keep them, orientation unknown
        names = dict.fromkeys(k for r in runs for k in r.metrics)
        return [Metric(n, True) for n in names]


def summarise(values: np.ndarray, *, iqm_interval: bool = True) -> MetricSummary:
    """n, mean, Student-t interval, std, IQM and (unless ``iqm_interval`` is False) its bootstrap
    interval of one metric's values."""
    x = np.asarray(values, dtype=float)
    ci = stats.mean_interval(x)
    iqm_ci = stats.iqm_interval(x) if iqm_interval and not np.isnan(x).any() else None
    return MetricSummary(
        mean=float(x.mean()),
        ci_low=finite(ci[0]) if ci else None,
        ci_high=finite(ci[1]) if ci else None,
        iqm=stats.iqm(x),
        std=finite(stats.sample_std(x)) if x.size > 1 else None,
        n=int(x.size),
        iqm_low=finite(iqm_ci[0]) if iqm_ci else None,
        iqm_high=finite(iqm_ci[1]) if iqm_ci else None,
    )


def _summarise_curves(runs: Sequence[RunResult]) -> dict[str, CurveSummary]:
    """Per curve name, the mean and pointwise band over the runs on the first run's x grid (runs come in
    seed order, so the grid does not depend on storage order); runs on another grid are left out."""
    out = {}
    names = sorted({k for r in runs for k in r.curves})
    for name in names:
        series = [r.curves[name] for r in runs if name in r.curves]
        x = series[0]["x"]
        aligned = [s["y"] for s in series if s["x"] == x]
        mean, low, high = stats.t_band(np.array(aligned, dtype=float))
        out[name] = CurveSummary(
            x=list(x),
            mean=mean.tolist(),
            low=low.tolist(),
            high=high.tolist(),
            x_label=series[0].get("x_label", "t"),
            y_label=series[0].get("y_label", name),
            n=len(aligned),
        )
    return out


def _flatten(params: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in params.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _mark_params_diff(rows: list[Row]) -> None:
    """Rows of one algorithm that differ only in params look identical by name: name what differs."""
    by_algorithm: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_algorithm[row.algorithm].append(row)
    for same in by_algorithm.values():
        if len(same) < 2:
            continue
        flat = [_flatten(r.params) for r in same]
        keys = sorted({k for f in flat for k in f})
        missing = object()
        differing = [k for k in keys if len({repr(f.get(k, missing)) for f in flat}) > 1]
        for row, f in zip(same, flat, strict=True):
            row.params_diff = {k: f.get(k) for k in differing}


def rank_rows(rows: list[Row], primary: Metric) -> list[Row]:
    """Rank on the primary metric's mean (competition ranking: equal means share the better rank), NaN
    and missing means unranked (0) and last; mark rows lacking a seed of another ranked row; return the
    rows in display order, which depends only on the rows' contents."""
    sign = -1.0 if primary.higher_is_better else 1.0
    ranked = [r for r in rows if primary.name in r.metrics and not math.isnan(r.metrics[primary.name].mean)]
    keys = {id(r): sign * r.metrics[primary.name].mean for r in ranked}
    ordered = sorted(ranked, key=lambda r: (keys[id(r)], r.algorithm, r.params_hash))
    for i, row in enumerate(ordered):
        tied = i and keys[id(ordered[i - 1])] == keys[id(row)]
        row.rank = ordered[i - 1].rank if tied else i + 1
    all_seeds = {s for r in ranked for s in r.seeds}
    for row in rows:
        if id(row) not in keys:
            row.rank = 0
        row.seeds_shared = set(row.seeds) >= all_seeds
    unranked = sorted((r for r in rows if r.rank == 0), key=lambda r: (r.algorithm, r.params_hash))
    return ordered + unranked


def newest_versions(results: Sequence[RunResult]) -> list[RunResult]:
    """Only the runs of each task's newest stored version."""
    newest: dict[str, int] = {}
    for r in results:
        newest[r.task] = max(newest.get(r.task, r.task_version), r.task_version)
    return [r for r in results if r.task_version == newest[r.task]]


def aggregate(results: Sequence[RunResult], *, all_versions: bool = False) -> list[Table]:
    """Group, summarise and rank. Failed runs are counted per row, never averaged in."""
    if not all_versions:
        results = newest_versions(results)
    groups: dict[tuple[str, int, str], list[RunResult]] = defaultdict(list)
    for r in results:
        groups[(r.task, r.task_version, r.config_hash)].append(r)
    tables = []
    for (task, version, config_hash), runs in groups.items():
        metrics = _task_metrics(task, runs)
        by_algo: dict[tuple[str, str], list[RunResult]] = defaultdict(list)
        for r in runs:
            by_algo[(r.algorithm, r.params_hash)].append(r)
        rows = []
        for (algo, params_hash), algo_runs in by_algo.items():
            ok = sorted((r for r in algo_runs if r.status == "ok"), key=lambda r: (r.seed, r.created_at))
            summaries = {}
            for m in metrics:
                values = np.array([r.metrics[m.name] for r in ok if m.name in r.metrics], dtype=float)
                if values.size:
                    # the IQM's 5,000-resample bootstrap for the primary metric only, the one ranked on:
                    # for every metric it made the page over 10,000 runs 7 s of bootstraps
                    summaries[m.name] = summarise(values, iqm_interval=m.name == metrics[0].name)
            rows.append(
                Row(
                    algorithm=algo,
                    role=algo_runs[0].role,
                    params=algo_runs[0].params,
                    params_hash=params_hash,
                    n=len(ok),
                    failed=len(algo_runs) - len(ok),
                    seeds=sorted({r.seed for r in ok}),
                    metrics=summaries,
                    curves=_summarise_curves(ok),
                    wall_s=math.fsum(r.wall_s for r in algo_runs),
                    primary_values=[r.metrics[metrics[0].name] for r in ok if metrics[0].name in r.metrics],
                )
            )
        _mark_params_diff(rows)
        rows = rank_rows(rows, metrics[0])
        newest_run = max(runs, key=lambda r: (r.created_at, r.algorithm, r.params_hash, r.seed))
        tables.append(
            Table(
                task=task,
                task_version=version,
                config=runs[0].config,
                config_hash=config_hash,
                budgets=sorted({r.budget for r in runs}),
                metrics=metrics,
                rows=rows,
                provenance=newest_run.provenance,
            )
        )
    tables.sort(key=lambda t: (t.task, -sum(r.n for r in t.rows), t.config_hash))
    return tables


def by_task(tables: Sequence[Table]) -> dict[str, list[Table]]:
    """Tables grouped by task id, in order."""
    out: dict[str, list[Table]] = defaultdict(list)
    for t in tables:
        out[t.task].append(t)
    return dict(out)


def to_records(tables: Sequence[Table]) -> list[dict[str, Any]]:
    """Flat records, one per (table, row): the CSV/JSON/DataFrame form of the leaderboard."""
    records = []
    for t in tables:
        for row in t.rows:
            rec: dict[str, Any] = {
                "task": t.task,
                "task_version": t.task_version,
                "config_hash": t.config_hash,
                "config": t.config,
                "algorithm": row.algorithm,
                "role": row.role,
                "params": row.params,
                "rank": row.rank,
                "n": row.n,
                "failed": row.failed,
                "params_diff": row.params_diff,
                "seeds_shared": row.seeds_shared,
            }
            for name, s in row.metrics.items():
                rec[f"{name}_mean"] = s.mean
                rec[f"{name}_ci_low"] = s.ci_low
                rec[f"{name}_ci_high"] = s.ci_high
                rec[f"{name}_ci_method"] = s.ci_method if s.ci_low is not None else None
                rec[f"{name}_iqm"] = s.iqm
                rec[f"{name}_iqm_low"] = s.iqm_low
                rec[f"{name}_iqm_high"] = s.iqm_high
            records.append(rec)
    return records


def to_dataframe(tables: Sequence[Table]) -> Any:
    """The leaderboard as a pandas DataFrame (for notebooks)."""
    import pandas as pd

    return pd.DataFrame(to_records(tables))
