"""Text renderings of the leaderboard: a terminal table, CSV, JSON and Markdown."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

from iclrbench.leaderboard.aggregate import Table, to_records


def fmt(value: float) -> str:
    """Four significant digits, without scientific notation for ordinary magnitudes."""
    if value != value:  # NaN
        return "nan"
    if value == 0 or 1e-3 <= abs(value) < 1e6:
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"
    return f"{value:.3e}"


def config_label(config: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items())


def _cells(table: Table) -> tuple[list[str], list[list[str]]]:
    header = ["rank", "algorithm", "role", "n"]
    for i, m in enumerate(table.metrics):
        arrow = "^" if m.higher_is_better else "v"
        header.append(f"{m.name} {arrow}" + (" [95% CI]" if i == 0 else ""))
        if i == 0:
            header.append(f"{m.name} IQM")
    rows = []
    for row in table.rows:
        cells = [
            str(row.rank or "-"),
            row.algorithm,
            row.role,
            f"{row.n}" + (f" ({row.failed} failed)" if row.failed else ""),
        ]
        for i, m in enumerate(table.metrics):
            s = row.metrics.get(m.name)
            if s is None:
                cells.append("-")
                if i == 0:
                    cells.append("-")
                continue
            cells.append(f"{fmt(s.mean)} [{fmt(s.ci_low)}, {fmt(s.ci_high)}]" if i == 0 else fmt(s.mean))
            if i == 0:
                cells.append(fmt(s.iqm))
        rows.append(cells)
    return header, rows


def _title(table: Table) -> str:
    return f"{table.task} v{table.task_version}  {config_label(table.config)}"


def render_table(tables: Sequence[Table]) -> str:
    """Terminal tables (rich), one per task/config."""
    from rich.console import Console
    from rich.table import Table as RichTable

    console = Console(file=io.StringIO(), width=160, force_terminal=False, color_system=None)
    for t in tables:
        header, rows = _cells(t)
        rt = RichTable(title=_title(t), title_justify="left")
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
        parts.append("")
    return "\n".join(parts) + "\n" if parts else "no stored runs\n"


def render_csv(tables: Sequence[Table]) -> str:
    records = to_records(tables)
    if not records:
        return ""
    columns = list(dict.fromkeys(k for r in records for k in r))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for r in records:
        writer.writerow(
            {k: json.dumps(v, sort_keys=True) if isinstance(v, dict) else v for k, v in r.items()}
        )
    return buf.getvalue()


def render_json(tables: Sequence[Table]) -> str:
    return json.dumps(to_records(tables), indent=2, sort_keys=False, default=str) + "\n"


RENDERERS = {"table": render_table, "csv": render_csv, "json": render_json, "markdown": render_markdown}
