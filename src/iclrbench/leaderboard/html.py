"""The leaderboard as one self-contained HTML file: no network, no CDN, every text escaped.

An overview first: per task its leader, claims reproduced, runs and seconds; the cross-task view
(performance profiles of the reference / baseline families, algorithms shared between tasks, ranks).
Then per task: per config a sortable table (click a header), the curves with 95% bootstrap bands as
inline SVG, probabilities of improvement between its algorithms, the claims panel with the measured
figures, provenance, and CSV/JSON downloads (data: URIs). The navigation shows one view at a time
(``#overview``, ``#TASK``); without JavaScript every view is shown, one after the other.
"""

from __future__ import annotations

import html
import json
import math
import urllib.parse
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from iclrbench.core.task import ClaimResult
from iclrbench.leaderboard import crosstask
from iclrbench.leaderboard.aggregate import CurveSummary, Table, by_task
from iclrbench.leaderboard.render import config_label, fmt, render_csv, render_json

PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#7f7f7f",
    "#bcbd22",
)

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#c8cdd6}nav{padding:8px 24px;background:#e9ecf1}nav a{margin-right:14px}
main{padding:8px 24px 40px}section.task{background:#fff;border:1px solid #dde1e7;border-radius:8px;
padding:6px 18px 16px;margin:18px 0}h2{margin:10px 0 2px}h3{margin:18px 0 6px;font-size:15px}
.paper{color:#55607a;margin:0 0 8px}
table{border-collapse:collapse;margin:6px 0;font-variant-numeric:tabular-nums}
th,td{border-bottom:1px solid #e3e6eb;padding:4px 10px;text-align:right;white-space:nowrap}
th{cursor:pointer;background:#f0f2f5;user-select:none}th:hover{background:#e2e6ec}
td.name,th.name{text-align:left}
th.sorted-asc::after{content:" \\25B2"}th.sorted-desc::after{content:" \\25BC"}
.role{font-size:12px;color:#667}.ci{color:#778;font-size:12px}
.claims li{margin:6px 0}.verdict{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;
font-weight:600;margin-right:6px}.reproduced{background:#d5f2dc;color:#145c26}
.not_reproduced{background:#fbd9d6;color:#8a1c12}.inconclusive{background:#f3ecc8;color:#6b5a0f}
.measured{font:12px ui-monospace,monospace;color:#445;margin:2px 0 0 4px}
nav a.current{font-weight:700;text-decoration:none;color:#1d2330}
table.poi td{min-width:52px}td.wrap{white-space:normal;min-width:220px}.poi .self{background:#f0f2f5}
details{margin:8px 0}.downloads a{margin-right:12px}svg text{font-size:11px;fill:#334}
.legend span{display:inline-block;margin-right:14px;font-size:12px}.legend i{display:inline-block;
width:12px;height:3px;margin-right:4px;vertical-align:middle}
"""

NAV_JS = """
function showView(){
  var id = decodeURIComponent(location.hash.slice(1)) || 'overview';
  var views = document.querySelectorAll('section.view');
  var found = false;
  views.forEach(function(v){ if (v.id === id) { found = true; } });
  if (!found) { id = 'overview'; }
  views.forEach(function(v){ v.hidden = v.id !== id; });
  document.querySelectorAll('nav a').forEach(function(a){
    a.classList.toggle('current', a.getAttribute('data-view') === id);
  });
}
window.addEventListener('hashchange', showView);
showView();
"""

SORT_JS = """
document.querySelectorAll('table.board').forEach(function(table){
  table.querySelectorAll('th').forEach(function(th, col){
    th.addEventListener('click', function(){
      var body = table.tBodies[0];
      var asc = !th.classList.contains('sorted-asc');
      table.querySelectorAll('th').forEach(function(h){h.classList.remove('sorted-asc','sorted-desc');});
      th.classList.add(asc ? 'sorted-asc' : 'sorted-desc');
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function(a, b){
        var x = a.cells[col].getAttribute('data-value'), y = b.cells[col].getAttribute('data-value');
        var nx = parseFloat(x), ny = parseFloat(y);
        var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : String(x).localeCompare(String(y));
        return asc ? c : -c;
      });
      rows.forEach(function(r){ body.appendChild(r); });
    });
  });
});
"""


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _data_uri(mime: str, text: str) -> str:
    return f"data:{mime};charset=utf-8," + urllib.parse.quote(text)


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    return [lo + (hi - lo) * i / (n - 1) for i in range(n)]


def svg_curves(curves: dict[str, CurveSummary], title: str, width: int = 640, height: int = 300) -> str:
    """Mean curves with shaded 95% CI bands, one colour per algorithm, as an inline SVG.

    When the final values of non-negative curves span more than 20x, the y axis is log(1 + y) so that
    a good algorithm is not flattened against the axis by a bad one; the axis label says so.
    """
    if not curves:
        return ""
    left, right, top, bottom = 64, 16, 22, 40
    xs = [x for c in curves.values() for x in c.x]
    ys = [y for c in curves.values() for y in (*c.low, *c.high, *c.mean)]
    finals = [c.mean[-1] for c in curves.values()]
    log_scale = min(ys) >= 0 and max(finals) > 20 * max(min(finals), 1e-9) and max(ys) > 10

    def ty(y: float) -> float:
        return math.log10(1 + y) if log_scale else y

    x0, x1 = min(xs), max(xs)
    y0, y1 = min(0.0, min(ys)), max(ys) if max(ys) > min(0.0, min(ys)) else 1.0
    y0, y1 = ty(y0), ty(y1)
    pw, ph = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + (x - x0) / ((x1 - x0) or 1) * pw

    def py(y: float) -> float:
        return top + ph - (ty(y) - y0) / ((y1 - y0) or 1) * ph

    first = next(iter(curves.values()))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="{esc(title)}"><title>{esc(title)}</title>',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fbfcfd" stroke="#ccd"/>',
    ]
    if log_scale:
        y_ticks = [0.0] + [10.0**k for k in range(1, int(math.log10(max(ys))) + 1)]
    else:
        y_ticks = _ticks(y0, y1)
    for t in y_ticks:
        parts.append(
            f'<line x1="{left}" x2="{left + pw}" y1="{py(t):.1f}" y2="{py(t):.1f}" stroke="#e6e8ec"/>'
            f'<text x="{left - 6}" y="{py(t) + 4:.1f}" text-anchor="end">{esc(fmt(t))}</text>'
        )
    for t in _ticks(x0, x1):
        parts.append(f'<text x="{px(t):.1f}" y="{top + ph + 16}" text-anchor="middle">{esc(fmt(t))}</text>')
    parts.append(
        f'<text x="{left + pw / 2}" y="{height - 6}" text-anchor="middle">{esc(first.x_label)}</text>'
        f'<text x="14" y="{top + ph / 2}" transform="rotate(-90 14 {top + ph / 2})" '
        f'text-anchor="middle">{esc(first.y_label)}{" (log scale)" if log_scale else ""}</text>'
    )
    for i, (name, c) in enumerate(curves.items()):
        colour = PALETTE[i % len(PALETTE)]
        band = [f"{px(x):.1f},{py(y):.1f}" for x, y in zip(c.x, c.high, strict=True)]
        band += [f"{px(x):.1f},{py(y):.1f}" for x, y in zip(reversed(c.x), reversed(c.low), strict=True)]
        line = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(c.x, c.mean, strict=True))
        parts.append(
            f'<g><title>{esc(name)}</title><polygon points="{" ".join(band)}" fill="{colour}" '
            f'fill-opacity="0.18" stroke="none"/><polyline points="{line}" fill="none" '
            f'stroke="{colour}" stroke-width="1.8"/></g>'
        )
    return _figure(parts, list(curves))


def _figure(svg_parts: list[str], names: Sequence[str]) -> str:
    """Close the SVG and add its legend: one colour of PALETTE per name, in order."""
    legend = "".join(
        f'<span><i style="background:{PALETTE[i % len(PALETTE)]}"></i>{esc(name)}</span>'
        for i, name in enumerate(names)
    )
    return f'<div class="plot">{"".join(svg_parts)}</svg><div class="legend">{legend}</div></div>'


def _table_html(table: Table) -> str:
    head = ['<th class="name">algorithm</th>', "<th>rank</th>", "<th>n</th>"]
    for i, m in enumerate(table.metrics):
        arrow = "&#8593;" if m.higher_is_better else "&#8595;"
        unit = f" ({esc(m.unit)})" if m.unit else ""
        head.append(f'<th title="{esc(m.description)}">{esc(m.name)}{unit} {arrow}</th>')
        if i == 0:
            head.append(f"<th>{esc(m.name)} IQM</th>")
    body = []
    for row in table.rows:
        cells = [
            f'<td class="name" data-value="{esc(row.algorithm)}">{esc(row.algorithm)} '
            f'<span class="role">{esc(row.role)}</span></td>',
            f'<td data-value="{row.rank or 1e9}">{row.rank or "-"}</td>',
            f'<td data-value="{row.n}">{row.n}{f" ({row.failed} failed)" if row.failed else ""}</td>',
        ]
        for i, m in enumerate(table.metrics):
            s = row.metrics.get(m.name)
            if s is None:
                cells.append('<td data-value="">-</td>' + ('<td data-value="">-</td>' if i == 0 else ""))
                continue
            ci = f'<br><span class="ci">[{esc(fmt(s.ci_low))}, {esc(fmt(s.ci_high))}]</span>'
            cells.append(f'<td data-value="{s.mean!r}">{esc(fmt(s.mean))}{ci}</td>')
            if i == 0:
                cells.append(f'<td data-value="{s.iqm!r}">{esc(fmt(s.iqm))}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<table class="board"><thead><tr>{"".join(head)}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    )


def _claims_html(claims: Sequence[ClaimResult]) -> str:
    if not claims:
        return '<p class="claims">No claims checked yet: run <code>bench claims TASK</code>.</p>'
    items = []
    for c in claims:
        measured = ", ".join(f"{esc(k)} = {esc(json.dumps(v))}" for k, v in c.measured.items())
        items.append(
            f'<li><span class="verdict {esc(c.verdict)}">{esc(c.verdict.replace("_", " "))}</span>'
            f"<b>{esc(c.id)}</b> ({esc(c.budget)}): {esc(c.statement)}"
            f'<div class="measured">{measured}</div></li>'
        )
    return f'<ul class="claims">{"".join(items)}</ul>'


def _provenance_html(prov: dict[str, Any]) -> str:
    rows = "".join(
        f'<tr><td class="name">{esc(k)}</td><td class="name">{esc(v)}</td></tr>' for k, v in prov.items()
    )
    return f"<details><summary>Provenance</summary><table>{rows}</table></details>"


def _config_html(tid: str, t: Table) -> str:
    """One task config: heading, sortable table, curves, downloads, provenance."""
    parts = [
        f"<h3>v{t.task_version} &middot; {esc(config_label(t.config))} "
        f'<span class="role">budget {esc(", ".join(t.budgets))}</span></h3>',
        _table_html(t),
        _poi_html(t),
    ]
    for name in dict.fromkeys(n for row in t.rows for n in row.curves):
        curves = {row.algorithm: row.curves[name] for row in t.rows if name in row.curves}
        parts.append(svg_curves(curves, f"{tid}: {name}"))
    parts.append(
        f'<p class="downloads"><a download="{esc(tid)}-{esc(t.config_hash)}.csv" '
        f'href="{esc(_data_uri("text/csv", render_csv([t])))}">CSV</a>'
        f'<a download="{esc(tid)}-{esc(t.config_hash)}.json" '
        f'href="{esc(_data_uri("application/json", render_json([t])))}">JSON</a></p>'
    )
    parts.append(_provenance_html(t.provenance))
    return "".join(parts)


def _poi_html(table: Table) -> str:
    """P(row improves on column) on the primary metric, as a heat-coloured matrix."""
    names, matrix = crosstask.improvement_matrix(table)
    if len(names) < 2:
        return ""
    head = "".join(f'<th title="{esc(n)}">{esc(n)}</th>' for n in names)
    body = []
    for i, name in enumerate(names):
        cells = []
        for j in range(len(names)):
            p = matrix[i, j]
            if i == j:
                cells.append('<td class="self">&ndash;</td>')
                continue
            shade = (
                f"rgba(31,119,180,{abs(p - 0.5) * 1.6:.2f})"
                if p >= 0.5
                else f"rgba(214,39,40,{abs(p - 0.5) * 1.6:.2f})"
            )
            cells.append(f'<td style="background:{shade}">{p:.2f}</td>')
        body.append(f'<tr><td class="name">{esc(name)}</td>{"".join(cells)}</tr>')
    return (
        f"<details><summary>Probability of improvement on {esc(table.primary.name)}: P(row better than "
        "column) over pairs of runs</summary>"
        f'<table class="poi"><thead><tr><th class="name"></th>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></details>"
    )


def svg_profiles(profiles: dict[str, list[float]], width: int = 420, height: int = 240) -> str:
    """Performance profiles: fraction of problems within tau of the best, one step line per family."""
    if not profiles:
        return ""
    left, right, top, bottom = 48, 12, 14, 36
    pw, ph = width - left - right, height - top - bottom
    taus = crosstask.TAUS

    def px(t: float) -> float:
        return left + t * pw

    def py(f: float) -> float:
        return top + ph - f * ph

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        'aria-label="performance profiles"><title>performance profiles</title>',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fbfcfd" stroke="#ccd"/>',
    ]
    for v in (0.0, 0.5, 1.0):
        parts.append(
            f'<text x="{left - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{v:g}</text>'
            f'<text x="{px(v):.1f}" y="{top + ph + 14}" text-anchor="middle">{v:g}</text>'
        )
    parts.append(
        f'<text x="{left + pw / 2}" y="{height - 4}" text-anchor="middle">tau: shortfall from the best '
        "(normalised)</text>"
    )
    for i, (family, fractions) in enumerate(profiles.items()):
        points = []
        for k, (tau, f) in enumerate(zip(taus, fractions, strict=True)):
            if k:
                points.append(f"{px(tau):.1f},{py(fractions[k - 1]):.1f}")
            points.append(f"{px(tau):.1f},{py(f):.1f}")
        parts.append(
            f'<g><title>{esc(family)}</title><polyline points="{" ".join(points)}" fill="none" '
            f'stroke="{PALETTE[i % len(PALETTE)]}" stroke-width="2"/></g>'
        )
    return _figure(parts, list(profiles))


def _overview_html(
    tables: Sequence[Table], claims: Sequence[ClaimResult], papers: dict[str, dict[str, str]]
) -> str:
    summaries = crosstask.task_summaries(tables, claims)
    if not summaries:
        return "<p>No stored runs yet: try <code>bench run TASK --all</code>.</p>"
    rows = []
    for t in summaries:
        title = papers.get(t.task, {}).get("title", "")
        arrow = "&#8593;" if t.higher_is_better else "&#8595;"
        rows.append(
            f'<tr><td class="name wrap" data-value="{esc(t.task)}"><a href="#{esc(t.task)}">{esc(t.task)}</a>'
            f'<br><span class="role">{esc(title)}</span></td>'
            f'<td class="name" data-value="{esc(t.leader)}">{esc(t.leader) or "-"}</td>'
            f'<td data-value="{t.leader_value!r}">{esc(t.primary)} {arrow} {esc(fmt(t.leader_value))}</td>'
            f'<td data-value="{t.claims_reproduced}">{t.claims_reproduced} / {t.claims_checked}</td>'
            f'<td data-value="{t.configs}">{t.configs}</td>'
            f'<td data-value="{t.runs}">{t.runs}{f" ({t.failed} failed)" if t.failed else ""}</td>'
            f'<td data-value="{t.seconds!r}">{esc(fmt(t.seconds))}</td></tr>'
        )
    parts = [
        "<h2>Overview</h2>",
        '<table class="board" id="tasks"><thead><tr><th class="name">task</th><th class="name">leader</th>'
        "<th>leader's mean (main table)</th><th>claims reproduced</th><th>configs</th><th>runs</th>"
        f"<th>seconds</th></tr></thead><tbody>{''.join(rows)}</tbody></table>",
    ]
    families = crosstask.family_scores(tables)
    if families:
        profiles = {f: crosstask.performance_profile(v) for f, v in families.items()}
        counts = ", ".join(f"{esc(f)}: {len(v)} problems" for f, v in families.items())
        mean_rows = "".join(
            f'<tr><td class="name">{esc(f)}</td><td data-value="{np.mean(v)!r}">{np.mean(v):.3f}</td>'
            f'<td data-value="{len(v)}">{len(v)}</td></tr>'
            for f, v in families.items()
        )
        parts += [
            "<h3>Across tasks, by family</h3>",
            "<p>Each leaderboard table comparing two or more algorithms is a problem; scores are normalised "
            "per problem on its primary metric (1 = best mean, 0 = worst) and a family counts its best "
            f"member. Performance profile: fraction of problems within tau of the best ({counts}).</p>",
            '<table class="board"><thead><tr><th class="name">family</th><th>mean normalised score</th>'
            f"<th>problems</th></tr></thead><tbody>{mean_rows}</tbody></table>",
            svg_profiles(profiles),
        ]
    shared = crosstask.shared_algorithms(tables)
    ranks = crosstask.ranks(tables)
    if shared:
        tasks = sorted({t for s in shared.values() for t in s})
        head = "".join(f"<th>{esc(t)}</th>" for t in tasks)
        body = "".join(
            f'<tr><td class="name">{esc(a)}</td>'
            + "".join(
                f'<td data-value="{s[t]!r}">{s[t]:.3f}</td>' if t in s else '<td data-value="">-</td>'
                for t in tasks
            )
            + "</tr>"
            for a, s in shared.items()
        )
        parts.append(
            "<h3>Algorithms shared between tasks: normalised score per task</h3>"
            f'<table class="board"><thead><tr><th class="name">algorithm</th>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table>"
        )
    else:
        parts.append(
            "<h3>Ranks per task</h3><p>No algorithm runs on more than one task, so only ranks compare.</p>"
        )
    if ranks:
        body = "".join(
            f'<tr><td class="name"><a href="#{esc(task)}">{esc(task)}</a></td><td class="name wrap">'
            + ", ".join(f"{r}. {esc(a)}" for a, r in sorted(by_algo.items(), key=lambda x: x[1]))
            + "</td></tr>"
            for task, by_algo in ranks.items()
        )
        parts.append(
            f'<table><thead><tr><th class="name">task</th><th class="name">ranking (main table)</th></tr>'
            f"</thead><tbody>{body}</tbody></table>"
        )
    return "".join(parts)


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
    nav = '<a href="#overview" data-view="overview">Overview</a>' + "".join(
        f'<a href="#{esc(tid)}" data-view="{esc(tid)}">{esc(tid)}</a>' for tid in task_ids
    )
    sections = []
    for tid in task_ids:
        paper = papers.get(tid, {})
        parts = [f'<section class="task view" id="{esc(tid)}"><h2>{esc(tid)}</h2>']
        if paper:
            parts.append(
                f'<p class="paper">{esc(paper.get("title", ""))} &mdash; {esc(paper.get("authors", ""))}'
                f" (arXiv:{esc(paper.get('arxiv', ''))})</p>"
            )
        parts.append("<h3>Claims</h3>" + _claims_html(claims_by_task.get(tid, [])))
        here = tables_by_task.get(tid, [])
        # tables comparing algorithms first; single-algorithm ones (the claims' sweeps) folded away
        main = [t for t in here if len(t.rows) > 1] or here[:1]
        rest = [t for t in here if t not in main]
        parts += [_config_html(tid, t) for t in main]
        if rest:
            parts.append(
                f"<details><summary>{len(rest)} more configurations with a single algorithm "
                f"(e.g. the claims' sweeps over T)</summary>{''.join(_config_html(tid, t) for t in rest)}"
                "</details>"
            )
        parts.append("</section>")
        sections.append("".join(parts))
    overview = f'<section class="task view" id="overview">{_overview_html(tables, claims, papers)}</section>'
    all_csv, all_json = render_csv(tables), render_json(tables)
    downloads = (
        f'<p class="downloads">All results: <a download="leaderboard.csv" '
        f'href="{esc(_data_uri("text/csv", all_csv))}">CSV</a><a download="leaderboard.json" '
        f'href="{esc(_data_uri("application/json", all_json))}">JSON</a></p>'
    )
    body = overview + "".join(sections)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>iclrbench leaderboard</title><style>{CSS}</style></head><body>"
        "<header><h1>iclrbench leaderboard</h1><p>Means with 95% stratified-bootstrap CIs and IQM over "
        "seeds; click a column to sort.</p></header>"
        f"<nav>{nav}</nav><main>{downloads}{body}</main><script>{SORT_JS}{NAV_JS}</script></body></html>"
    )
