"""The leaderboard as one self-contained HTML file: no network, no CDN, every text escaped.

Python computes what the page shows (numbers, labels, chart coordinates: :mod:`.svg`); the jinja2
templates in ``leaderboard/templates`` lay it out, with autoescaping on and nothing marked safe.

An overview first: per task its leader, claims reproduced, runs and seconds; the cross-task view
(performance profiles of the reference / baseline families, algorithms shared between tasks, ranks).
Then per task: per config a sortable table (click a header) that scrolls inside its box when wide, the
curves with their (pointwise) bands as inline SVG, probabilities of improvement between its algorithms,
the claims panel, provenance, and CSV/JSON downloads (data: URIs). The navigation shows one view at a
time (``#overview``, ``#TASK``); without JavaScript every view is shown, one after the other.

A claim's verdict is shown only when it was judged at the budget the claim is defined at
(``Claim.budget``); a verdict from another budget (the demo's smoke runs) is shown as "not checked at
this budget" with the command that checks it, and the overview counts claims by the same rule.
"""

from __future__ import annotations

import dataclasses
import functools
import urllib.parse
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import jinja2
import numpy as np

from iclrbench.core.jsonsafe import finite
from iclrbench.core.task import ClaimResult
from iclrbench.leaderboard import crosstask, svg
from iclrbench.leaderboard.aggregate import Table, by_task
from iclrbench.leaderboard.claims_panel import ClaimView, claim_views
from iclrbench.leaderboard.render import (
    DEFAULT_BAND,
    DEFAULT_CI_METHOD,
    FEWER_SEEDS_MARK,
    UNRANKED,
    config_label,
    display_name,
    fewer_seeds,
    fmt,
    interval_text,
    iqm_interval_text,
    iqm_method,
    n_text,
    params_text,
    rank_text,
    render_csv,
    render_json,
    table_ci_methods,
)


@dataclasses.dataclass(frozen=True)
class Span:
    """A small piece of text after a cell's main text (a role, an interval, parameters)."""

    text: str
    cls: str
    br: bool = False
    title: str = ""


@dataclasses.dataclass(frozen=True)
class Cell:
    """A table cell: its text, the value it sorts by, and optional decorations."""

    text: str
    value: str = ""
    cls: str = ""
    spans: tuple[Span, ...] = ()
    href: str = ""
    title: str = ""
    style: str = ""


@dataclasses.dataclass(frozen=True)
class Grid:
    """A table: header cells, rows of cells, its class (``board`` tables sort) and a note under it."""

    headers: tuple[Cell, ...]
    rows: tuple[tuple[Cell, ...], ...]
    cls: str = "board"
    id: str = ""
    note: str = ""


@dataclasses.dataclass(frozen=True)
class Download:
    label: str
    filename: str
    uri: str


@dataclasses.dataclass(frozen=True)
class ConfigView:
    task_version: int
    label: str
    budgets: str
    primary: str
    table: Grid
    poi: Grid | None
    plots: tuple[svg.Plot, ...]
    default_band: str
    downloads: tuple[Download, ...]
    provenance: Grid


def _num(value: float | None) -> str:
    """A number for ``data-value`` (sorting): repr of a finite float, else empty (sorts as text)."""
    v = finite(value)
    return "" if v is None else repr(v)


def _data_uri(mime: str, text: str) -> str:
    return f"data:{mime};charset=utf-8," + urllib.parse.quote(text)


def _downloads(stem: str, tables: Sequence[Table]) -> tuple[Download, ...]:
    return (
        Download("CSV", f"{stem}.csv", _data_uri("text/csv", render_csv(tables))),
        Download("JSON", f"{stem}.json", _data_uri("application/json", render_json(tables))),
    )


def _name_cell(row: Any) -> Cell:
    spans = [Span(row.role, "role")]
    if params := params_text(row):
        spans.insert(0, Span(params, "params", title="parameters that differ between rows of this table"))
    return Cell(row.algorithm, value=row.algorithm, cls="name", spans=tuple(spans))


def _board(table: Table) -> Grid:
    """The sortable table of one config: rank, algorithm (+ differing params), n, every metric."""
    headers = [Cell("algorithm", cls="name"), Cell("rank"), Cell("n", title="successful runs (seeds)")]
    methods = table_ci_methods(table) or [DEFAULT_CI_METHOD]
    for i, m in enumerate(table.metrics):
        arrow = "↑" if m.higher_is_better else "↓"
        unit = f" ({m.unit})" if m.unit else ""
        headers.append(Cell(f"{m.name}{unit} {arrow}", title=m.description))
        if i == 0:
            headers.append(Cell(f"{m.name} IQM"))
    rows = []
    for row in table.rows:
        fewer = fewer_seeds(row, table)
        cells = [
            _name_cell(row),
            Cell(rank_text(row), value=str(row.rank or 1e9)),
            Cell(
                n_text(row, table),
                value=str(row.n),
                cls="fewer" if fewer else "",
                title="fewer seeds than other rows of this table" if fewer else "",
            ),
        ]
        for i, m in enumerate(table.metrics):
            s = row.metrics.get(m.name)
            if s is None:
                cells.append(Cell(UNRANKED))
                if i == 0:
                    cells.append(Cell(UNRANKED))
                continue
            cells.append(
                Cell(fmt(s.mean), value=_num(s.mean), spans=(Span(interval_text(s, row), "ci", br=True),))
            )
            if i == 0:
                iqm_ci = iqm_interval_text(s)
                cells.append(
                    Cell(fmt(s.iqm), _num(s.iqm), spans=(Span(iqm_ci, "ci", br=True),) if iqm_ci else ())
                )
        rows.append(tuple(cells))
    note = f"Under each mean: its {' / '.join(methods)} interval over seeds."
    if iqm_ci := iqm_method(table):
        note += f" Under the IQM of {table.primary.name}: its {iqm_ci} interval."
    if any(fewer_seeds(r, table) for r in table.rows):
        note += f" {FEWER_SEEDS_MARK} fewer seeds than other rows: not compared like for like."
    if any(not r.rank for r in table.rows):
        note += f" Rank {UNRANKED}: no finite mean to rank."
    return Grid(tuple(headers), tuple(rows), note=note)


def _poi(table: Table) -> Grid | None:
    """P(row improves on column) on the primary metric, as a heat-coloured matrix."""
    names, matrix = crosstask.improvement_matrix(table)
    shown = [display_name(r) for r in table.rows if r.primary_values]  # the matrix's rows, in its order
    names = shown if len(shown) == len(names) else names
    if len(names) < 2:
        return None
    rows = []
    for i, name in enumerate(names):
        cells = [Cell(name, value=name, cls="name")]
        for j in range(len(names)):
            p = float(matrix[i, j])
            if i == j:
                cells.append(Cell("–", cls="self"))
            elif not np.isfinite(p):
                cells.append(Cell(UNRANKED, title="undefined: a run's value is missing"))
            else:
                rgb = "31,119,180" if p >= 0.5 else "214,39,40"
                cells.append(
                    Cell(f"{p:.2f}", value=repr(p), style=f"background:rgba({rgb},{abs(p - 0.5) * 1.6:.2f})")
                )
        rows.append(tuple(cells))
    headers = (Cell("", cls="name"), *(Cell(n, title=n) for n in names))
    return Grid(headers, tuple(rows), cls="poi")


def _config(tid: str, t: Table) -> ConfigView:
    """One task config: heading, sortable table, improvement matrix, curves, downloads, provenance."""
    plots = []
    for name in dict.fromkeys(n for row in t.rows for n in row.curves):
        # keyed by the displayed name: two rows of one algorithm (other params) are two curves
        curves = {display_name(row): row.curves[name] for row in t.rows if name in row.curves}
        plot = svg.curves_plot(curves, f"{tid}: {name}", fmt)
        if plot is not None:
            plots.append(plot)
    provenance = Grid(
        (Cell("field", cls="name"), Cell("value", cls="name")),
        tuple((Cell(str(k), cls="name"), Cell(str(v), cls="name")) for k, v in t.provenance.items()),
        cls="",
    )
    return ConfigView(
        task_version=t.task_version,
        label=config_label(t.config),
        budgets=", ".join(t.budgets),
        primary=t.primary.name,
        table=_board(t),
        poi=_poi(t),
        plots=tuple(plots),
        default_band=DEFAULT_BAND,
        downloads=_downloads(f"{tid}-{t.config_hash}", [t]),
        provenance=provenance,
    )


def _task_grid(summaries: Sequence[Any], views: dict[str, list[ClaimView]], papers: dict[str, Any]) -> Grid:
    """The overview's table: per task its leader, claims reproduced (at their budget), runs, seconds."""
    headers = (
        Cell("task", cls="name"),
        Cell("leader", cls="name"),
        Cell("leader's mean (main table)"),
        Cell("claims reproduced", title="verdicts judged at the budget each claim is defined at"),
        Cell("configs"),
        Cell("runs"),
        Cell("seconds"),
    )
    rows = []
    for s in summaries:
        claims = views.get(s.task, [])
        reproduced = sum(c.status == "reproduced" for c in claims)
        unchecked = sum(c.status == "not_checked" for c in claims)
        title = papers.get(s.task, {}).get("title", "")
        arrow = "↑" if s.higher_is_better else "↓"
        not_checked = (
            (Span(f"{unchecked} not checked at their budget", "role", br=True),) if unchecked else ()
        )
        failed = f" ({s.failed} failed)" if s.failed else ""
        rows.append(
            (
                Cell(s.task, s.task, "name wrap", (Span(title, "role", br=True),), href=f"#{s.task}"),
                Cell(s.leader or "-", s.leader, "name"),
                Cell(f"{s.primary} {arrow} {fmt(s.leader_value)}", _num(s.leader_value)),
                Cell(f"{reproduced} / {len(claims)}", str(reproduced), spans=not_checked),
                Cell(str(s.configs), str(s.configs)),
                Cell(f"{s.runs}{failed}", str(s.runs)),
                Cell(fmt(s.seconds), _num(s.seconds)),
            )
        )
    return Grid(headers, tuple(rows), id="tasks")


def _number_cell(value: float) -> Cell:
    return Cell(fmt(value), _num(value))


def _overview(
    tables: Sequence[Table],
    claims: Sequence[ClaimResult],
    views: dict[str, list[ClaimView]],
    papers: dict[str, dict[str, str]],
) -> dict[str, Any]:
    """The overview's parts; None for a part with nothing to show."""
    summaries = crosstask.task_summaries(tables, claims)
    out: dict[str, Any] = dict.fromkeys(("tasks", "families", "profiles", "shared", "ranks"))
    out["family_counts"] = ""
    if not summaries:
        return out
    out["tasks"] = _task_grid(summaries, views, papers)
    if families := crosstask.family_scores(tables):
        out["family_counts"] = ", ".join(f"{f}: {len(v)} problems" for f, v in families.items())
        out["families"] = Grid(
            (Cell("family", cls="name"), Cell("mean normalised score"), Cell("problems")),
            tuple(
                (Cell(f, f, "name"), _number_cell(float(np.mean(v))), Cell(str(len(v)), str(len(v))))
                for f, v in families.items()
            ),
        )
        # over runs, each family's members weighing equally within a problem: a family's size does not
        # help it (issue 21), unlike a profile of each family's best member
        profiles = {f: p.fraction for f, p in crosstask.profiles(tables, by="role").items()}
        out["profiles"] = svg.profiles_plot(profiles, crosstask.TAUS)
    if shared := crosstask.shared_algorithms(tables):
        tasks = sorted({t for s in shared.values() for t in s})
        out["shared"] = Grid(
            (Cell("algorithm", cls="name"), *(Cell(t) for t in tasks)),
            tuple(
                (Cell(a, a, "name"), *(_number_cell(s[t]) if t in s else Cell("-") for t in tasks))
                for a, s in shared.items()
            ),
        )
    if ranks := crosstask.ranks(tables):
        out["ranks"] = Grid(
            (Cell("task", cls="name"), Cell("ranking (main table)", cls="name")),
            tuple(
                (
                    Cell(task, cls="name", href=f"#{task}"),
                    Cell(
                        ", ".join(f"{r}. {a}" for a, r in sorted(by.items(), key=lambda x: x[1])),
                        cls="name wrap",
                    ),
                )
                for task, by in ranks.items()
            ),
            cls="",
        )
    return out


@functools.cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("iclrbench", "leaderboard/templates"),
        autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )


def render_html(
    tables: Sequence[Table], claims: Sequence[ClaimResult], papers: dict[str, dict[str, str]] | None = None
) -> str:
    """The whole page. ``papers`` maps task id -> {title, authors, arxiv} for the section headers."""
    papers = papers or {}
    tables_by_task = by_task(tables)
    claims_by_task: dict[str, list[ClaimResult]] = defaultdict(list)
    for c in claims:
        claims_by_task[c.task].append(c)
    task_ids = list(dict.fromkeys([*tables_by_task, *claims_by_task]))
    views = {tid: claim_views(tid, claims_by_task.get(tid, [])) for tid in task_ids}
    tasks = []
    for tid in task_ids:
        here = tables_by_task.get(tid, [])
        # tables comparing algorithms first; single-algorithm ones (the claims' sweeps) folded away
        main = [t for t in here if len(t.rows) > 1] or here[:1]
        rest = [t for t in here if t not in main]
        tasks.append(
            {
                "id": tid,
                "paper": papers.get(tid),
                "claims": views[tid],
                "main": [_config(tid, t) for t in main],
                "rest": [_config(tid, t) for t in rest],
            }
        )
    methods = list(dict.fromkeys(m for t in tables for m in table_ci_methods(t))) or [DEFAULT_CI_METHOD]
    return (
        _environment()
        .get_template("page.html.j2")
        .render(
            tasks=tasks,
            overview=_overview(tables, claims, views, papers),
            downloads=_downloads("leaderboard", tables),
            intervals=" / ".join(methods),
        )
    )
