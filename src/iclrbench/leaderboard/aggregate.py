"""From stored runs to leaderboard tables: one table per (task, task version, config), one row per
(algorithm, params), every metric summarised by n, mean, 95% bootstrap CI and IQM, ranked on the primary.

By default only each task's newest version is shown: rows of an older task version measured something
else and are never mixed in.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from iclrbench.core import catalog, stats
from iclrbench.core.errors import UserError
from iclrbench.core.result import RunResult
from iclrbench.core.task import Metric


@dataclasses.dataclass
class MetricSummary:
    mean: float
    ci_low: float
    ci_high: float
    iqm: float
    std: float


@dataclasses.dataclass
class CurveSummary:
    x: list[float]
    mean: list[float]
    low: list[float]
    high: list[float]
    x_label: str
    y_label: str


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
    rank: int = 0
    #: the primary metric of each successful run, for probabilities of improvement
    primary_values: list[float] = dataclasses.field(default_factory=list)


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


def _summarise_curves(runs: Sequence[RunResult]) -> dict[str, CurveSummary]:
    out = {}
    names = dict.fromkeys(k for r in runs for k in r.curves)
    for name in names:
        series = [r.curves[name] for r in runs if name in r.curves]
        x = series[0]["x"]
        aligned = [s["y"] for s in series if s["x"] == x]
        mean, low, high = stats.bootstrap_band(np.array(aligned))
        out[name] = CurveSummary(
            x=list(x),
            mean=mean.tolist(),
            low=low.tolist(),
            high=high.tolist(),
            x_label=series[0].get("x_label", "t"),
            y_label=series[0].get("y_label", name),
        )
    return out


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
            ok = [r for r in algo_runs if r.status == "ok"]
            summaries = {}
            for m in metrics:
                values = np.array([r.metrics[m.name] for r in ok if m.name in r.metrics])
                if values.size == 0:
                    continue
                lo, hi = stats.stratified_bootstrap_ci(values)
                summaries[m.name] = MetricSummary(
                    mean=float(values.mean()),
                    ci_low=lo,
                    ci_high=hi,
                    iqm=float(stats.iqm(values)),
                    std=float(values.std(ddof=1)) if values.size > 1 else 0.0,
                )
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
                    wall_s=float(sum(r.wall_s for r in algo_runs)),
                    primary_values=[r.metrics[metrics[0].name] for r in ok if metrics[0].name in r.metrics],
                )
            )
        primary = metrics[0]
        scored = sorted(
            (r for r in rows if primary.name in r.metrics),
            key=lambda r: r.metrics[primary.name].mean * (-1 if primary.higher_is_better else 1),
        )
        for i, row in enumerate(scored, start=1):
            row.rank = i
        rows.sort(key=lambda r: (r.rank == 0, r.rank, r.algorithm))
        newest_run = max(runs, key=lambda r: r.created_at)
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
            }
            for name, s in row.metrics.items():
                rec[f"{name}_mean"] = s.mean
                rec[f"{name}_ci_low"] = s.ci_low
                rec[f"{name}_ci_high"] = s.ci_high
                rec[f"{name}_iqm"] = s.iqm
            records.append(rec)
    return records


def to_dataframe(tables: Sequence[Table]) -> Any:
    """The leaderboard as a pandas DataFrame (for notebooks)."""
    import pandas as pd

    return pd.DataFrame(to_records(tables))
