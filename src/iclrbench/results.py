"""Stored runs as data: one flat record per run, as a pandas DataFrame or exported as CSV / Parquet / JSON.

Columns (the row schema is :mod:`iclrbench.core.result`):

- ``run_id``, ``task``, ``task_version``, ``config_hash``, ``algorithm``, ``role``, ``params_hash``,
  ``seed``, ``budget``, ``status``, ``error``, ``wall_s``, ``cpu_s``, ``peak_mem_mb``, ``created_at``;
- one column per metric, named as the metric (``regret``, ``d_sg``, ...); a metric whose name is taken by
  a column above is ``metric.NAME``; runs of tasks without that metric have NaN;
- ``config.KEY`` per config key, ``param.KEY`` per hyperparameter, ``provenance.KEY`` per provenance field.

Curves stay in the store (``bench show RUN_ID`` prints them).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from iclrbench.core.errors import UserError
from iclrbench.core.outputs import write_output
from iclrbench.core.result import RunResult

BASE_COLUMNS = (
    "run_id",
    "task",
    "task_version",
    "config_hash",
    "algorithm",
    "role",
    "params_hash",
    "seed",
    "budget",
    "status",
    "error",
    "wall_s",
    "cpu_s",
    "peak_mem_mb",
    "created_at",
)
EXPORT_FORMATS = ("csv", "parquet", "json")


def _scalar(value: Any) -> Any:
    return value if value is None or isinstance(value, (bool, int, float, str)) else json.dumps(value)


def flat_record(run: RunResult) -> dict[str, Any]:
    """One run as a flat dict of scalars (see the module docstring for the column names)."""
    record: dict[str, Any] = {c: getattr(run, c) for c in BASE_COLUMNS}
    for name, value in run.metrics.items():
        record[f"metric.{name}" if name in BASE_COLUMNS else name] = value
    for prefix, values in (("config", run.config), ("param", run.params), ("provenance", run.provenance)):
        for key, value in values.items():
            record[f"{prefix}.{key}"] = _scalar(value)
    return record


def results_frame(runs: Sequence[RunResult]) -> Any:
    """Runs -> a pandas DataFrame with the columns above, metric columns right after the base ones."""
    import pandas as pd

    records = [flat_record(r) for r in runs]
    frame = pd.DataFrame.from_records(records)
    if frame.empty:
        return pd.DataFrame(columns=list(BASE_COLUMNS))
    prefixed = tuple(f"{p}." for p in ("config", "param", "provenance"))
    metric_cols = [c for c in frame.columns if c not in BASE_COLUMNS and not c.startswith(prefixed)]
    rest = [c for c in frame.columns if c.startswith(prefixed)]
    return frame[[*BASE_COLUMNS, *metric_cols, *sorted(rest)]]


def load_results(
    db: str | os.PathLike[str] | None = None,
    task: str | None = None,
    *,
    status: str | None = None,
    newest_version_only: bool = False,
) -> Any:
    """Every stored run of the results file ``db`` (default ``$ICLRBENCH_DB`` or
    ``./.iclrbench/results.sqlite``) as a DataFrame, one row per run and one column per metric.

    >>> import iclrbench
    >>> frame = iclrbench.load_results(task="contextual-bilateral-trade")  # doctest: +SKIP
    >>> frame.groupby("algorithm")["regret"].mean()  # doctest: +SKIP
    """
    from iclrbench.core.store import ResultStore
    from iclrbench.leaderboard.aggregate import newest_versions

    with ResultStore(db, readonly=True) as store:
        runs = store.runs(task, status=status)
    return results_frame(newest_versions(runs) if newest_version_only else runs)


def export(runs: Sequence[RunResult], fmt: str, output: str | None) -> str | None:
    """Write the runs as ``fmt`` to ``output`` (a path), or return the text for stdout (CSV, JSON).

    JSON is strict (RFC 8259): a missing or non-finite number is ``null``, never ``NaN``. ``output`` is
    never an SQLite database (the CLI also refuses the results store under any name)."""
    if fmt not in EXPORT_FORMATS:
        raise UserError(f"unknown export format '{fmt}': expected one of {', '.join(EXPORT_FORMATS)}")
    frame = results_frame(runs)
    if fmt == "parquet":
        if output is None:
            raise UserError("--format parquet writes a binary file: give --output PATH")
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise UserError("--format parquet needs pyarrow: pip install 'iclrbench[cluster]'") from None
        write_output(output, lambda path: frame.to_parquet(path, index=False), "--output")
        return None
    # pandas writes NaN and +-inf as null in JSON (tested): strict JSON, unlike json.dumps' defaults
    text = frame.to_csv(index=False) if fmt == "csv" else frame.to_json(orient="records", indent=1)
    if output is None:
        return text
    write_output(output, lambda path: path.write_text(text, encoding="utf-8"), "--output")
    return None


def _number(value: Any) -> str:
    """A metric for people: 6 significant digits; whatever is not a number (null) as written."""
    return f"{value:.6g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def describe_run(run: RunResult) -> str:
    """``bench show``: every field of one stored run, human-readable."""
    lines = [
        f"run {run.run_id}: {run.task} v{run.task_version} / {run.algorithm} ({run.role}) seed={run.seed} "
        f"budget={run.budget}",
        f"  status: {run.status}" + (f"  error: {run.error}" if run.error else ""),
        f"  created: {run.created_at}  wall {run.wall_s:.3f} s  cpu {run.cpu_s:.3f} s  "
        f"peak memory {run.peak_mem_mb:.0f} MB",
        f"  config ({run.config_hash}): " + json.dumps(run.config, sort_keys=True),
        f"  params ({run.params_hash}): " + json.dumps(run.params, sort_keys=True),
        "  metrics:",
        *(f"    {k:<24} {_number(v)}" for k, v in run.metrics.items()),
    ]
    for name, curve in run.curves.items():
        ys = curve.get("y", [])
        lines.append(
            f"  curve {name}: {len(ys)} points, last {_number(ys[-1])}" if ys else f"  curve {name}: empty"
        )
    lines.append("  provenance:")
    lines += [f"    {k:<12} {v}" for k, v in run.provenance.items()]
    if run.notes:
        lines += ["  notes:", *("    " + line for line in run.notes.splitlines())]
    return "\n".join(lines)
