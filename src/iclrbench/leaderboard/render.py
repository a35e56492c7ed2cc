"""Text renderings of the leaderboard: a terminal table, CSV, JSON and Markdown.

The helpers here (how a number, an interval, a row's name and its seed count read) are shared with the
HTML page, so every rendering says the same thing: "1 seed" where one run gives no interval, the
interval's method by name, "—" for an unranked row, the parameters that tell two rows of one algorithm
apart, and a mark on rows measured on fewer seeds than the others.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from typing import Any

from iclrbench.core.jsonsafe import dumps, finite
from iclrbench.leaderboard.aggregate import MetricSummary, Row, Table, to_records

#: labels for summaries that do not name their method (rows built by older code)
DEFAULT_CI_METHOD = "95%"
DEFAULT_BAND = "pointwise 95%"
UNRANKED = "—"
FEWER_SEEDS_MARK = "*"


def fmt(value: float | None) -> str:
    """Four significant digits, without scientific notation for ordinary magnitudes; "—" for None."""
    if value is None:
        return UNRANKED
    if value != value:  # NaN
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == 0 or 1e-3 <= abs(value) < 1e6:
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"
    return f"{value:.3e}"


def config_label(config: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items())


def ci_method(summary: MetricSummary) -> str:
    """The name of the summary's interval method (e.g. "Student-t 95%")."""
    return str(getattr(summary, "ci_method", "") or DEFAULT_CI_METHOD)


def table_ci_methods(table: Table) -> list[str]:
    """The interval methods used in a table's primary column, in order of first use."""
    name = table.primary.name
    return list(dict.fromkeys(ci_method(r.metrics[name]) for r in table.rows if name in r.metrics))


def summary_n(summary: MetricSummary, row: Row) -> int:
    return int(getattr(summary, "n", row.n))


def interval_text(summary: MetricSummary, row: Row) -> str:
    """ "[low, high]", or "1 seed" where a single run gives no interval (never a zero-width one)."""
    n = summary_n(summary, row)
    if summary.ci_low is None or summary.ci_high is None or n <= 1:
        return f"{n} seed" if n == 1 else "no interval"
    return f"[{fmt(summary.ci_low)}, {fmt(summary.ci_high)}]"


def iqm_interval_text(summary: MetricSummary) -> str:
    """The IQM's interval, "" where there is none (one run, or a summary without it)."""
    low, high = getattr(summary, "iqm_low", None), getattr(summary, "iqm_high", None)
    return "" if low is None or high is None else f"[{fmt(low)}, {fmt(high)}]"


def iqm_method(table: Table) -> str:
    """The IQM interval's method in a table's primary column ("" where none is given)."""
    name = table.primary.name
    methods = {getattr(r.metrics[name], "iqm_method", "") for r in table.rows if name in r.metrics}
    return " / ".join(sorted(m for m in methods if m))


def rank_text(row: Row) -> str:
    return str(row.rank) if row.rank else UNRANKED


def params_diff(row: Row) -> dict[str, Any]:
    """The parameters that tell this row from the table's other rows (empty when nothing differs)."""
    return dict(getattr(row, "params_diff", None) or {})


def params_text(row: Row) -> str:
    return ", ".join(f"{k}={v}" for k, v in params_diff(row).items())


def display_name(row: Row) -> str:
    """The algorithm with the parameters that differ, e.g. ``ellipsoid-sbb (d=8)``."""
    diff = params_text(row)
    return f"{row.algorithm} ({diff})" if diff else row.algorithm


def fewer_seeds(row: Row, table: Table) -> bool:
    """True when the row was measured on fewer seeds than another row of its table, or on seeds the
    others do not share: its mean and rank are not compared like for like."""
    if getattr(row, "seeds_shared", True) is False:
        return True
    most = max((len(r.seeds) for r in table.rows), default=0)
    return len(row.seeds) < most


def n_text(row: Row, table: Table) -> str:
    mark = FEWER_SEEDS_MARK if fewer_seeds(row, table) else ""
    return f"{row.n}{mark}" + (f" ({row.failed} failed)" if row.failed else "")


def _cells(table: Table) -> tuple[list[str], list[list[str]]]:
    header = ["rank", "algorithm", "role", "n"]
    methods = " / ".join(table_ci_methods(table)) or DEFAULT_CI_METHOD
    for i, m in enumerate(table.metrics):
        arrow = "^" if m.higher_is_better else "v"
        header.append(f"{m.name} {arrow}" + (f" [{methods}]" if i == 0 else ""))
        if i == 0:
            header.append(f"{m.name} IQM")
    rows = []
    for row in table.rows:
        cells = [rank_text(row), display_name(row), row.role, n_text(row, table)]
        for i, m in enumerate(table.metrics):
            s = row.metrics.get(m.name)
            if s is None:
                cells.append("-")
                if i == 0:
                    cells.append("-")
                continue
            cells.append(f"{fmt(s.mean)} {interval_text(s, row)}" if i == 0 else fmt(s.mean))
            if i == 0:
                cells.append(fmt(s.iqm))
        rows.append(cells)
    return header, rows


def _title(table: Table) -> str:
    return f"{table.task} v{table.task_version}  {config_label(table.config)}"


def _footnote(table: Table) -> str:
    if not any(fewer_seeds(r, table) for r in table.rows):
        return ""
    return f"{FEWER_SEEDS_MARK} fewer seeds than other rows: not compared like for like"


def render_table(tables: Sequence[Table]) -> str:
    """Terminal tables (rich), one per task/config."""
    from rich.console import Console
    from rich.table import Table as RichTable

    console = Console(file=io.StringIO(), width=160, force_terminal=False, color_system=None)
    for t in tables:
        header, rows = _cells(t)
        rt = RichTable(title=_title(t), title_justify="left", caption=_footnote(t) or None)
        for h in header:
            rt.add_column(h, overflow="fold")
        for r in rows:
            rt.add_row(*r)
        console.print(rt)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    return out if tables else "no stored runs\n"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def render_markdown(tables: Sequence[Table]) -> str:
    parts = []
    for t in tables:
        header, rows = _cells(t)
        parts.append(f"### {_md_escape(_title(t))}\n")
        parts.append("| " + " | ".join(_md_escape(h) for h in header) + " |")
        parts.append("|" + "---|" * len(header))
        parts.extend("| " + " | ".join(_md_escape(c) for c in r) + " |" for r in rows)
        if note := _footnote(t):
            parts.append(f"\n{_md_escape(note)}")
        parts.append("")
    return "\n".join(parts) + "\n" if parts else "no stored runs\n"


def records(tables: Sequence[Table]) -> list[dict[str, Any]]:
    """The flat records of :func:`to_records`, with what a reader needs to read them: the interval
    method of each metric, the parameters that tell rows apart, the seed mark; rank None when
    unranked; no non-finite number (None instead)."""
    out = to_records(tables)
    rows = [(t, row) for t in tables for row in t.rows]
    for rec, (table, row) in zip(out, rows, strict=True):
        rec["rank"] = row.rank or None
        rec.setdefault("params_diff", params_diff(row))
        rec["fewer_seeds"] = fewer_seeds(row, table)
        for name, s in row.metrics.items():
            rec.setdefault(f"{name}_n", summary_n(s, row))
            rec.setdefault(f"{name}_ci_method", ci_method(s))
            if getattr(s, "iqm_low", None) is not None:
                rec.setdefault(f"{name}_iqm_method", getattr(s, "iqm_method", ""))
    return [finite(r) for r in out]


def render_csv(tables: Sequence[Table]) -> str:
    recs = records(tables)
    if not recs:
        return ""
    columns = list(dict.fromkeys(k for r in recs for k in r))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for r in recs:
        writer.writerow(
            {k: json.dumps(v, sort_keys=True) if isinstance(v, dict) else v for k, v in r.items()}
        )
    return buf.getvalue()


def render_json(tables: Sequence[Table]) -> str:
    """Strict JSON (RFC 8259): NaN and infinities are written as null, never as ``NaN``/``Infinity``."""
    return dumps(records(tables), indent=2) + "\n"


RENDERERS = {"table": render_table, "csv": render_csv, "json": render_json, "markdown": render_markdown}
