"""The commands that only read: ``list`` and ``info`` (the catalogue), ``show``, ``leaderboard`` and
``export`` (the store, opened read-only: nothing stored is changed)."""

from __future__ import annotations

import argparse
import inspect
import sys
from typing import Any

from iclrbench.cli.output import emit, first_sentence, plain_text, wrapped
from iclrbench.cli.stores import guard_output, read_store
from iclrbench.core import catalog
from iclrbench.core import config as cfg
from iclrbench.core.errors import UserError
from iclrbench.core.jsonsafe import dumps

#: SQLite's INTEGER range: a run id outside it names no run
MAX_RUN_ID = 2**63 - 1


def _algorithm_summary(cls: Any) -> str:
    return first_sentence(inspect.getdoc(cls) or "")


# ---------------------------------------------------------------------------------------------- list
def cmd_list(args: argparse.Namespace) -> int:
    """Tasks, then each task's algorithms; a task whose packages are missing shows its pip line instead
    (found without importing its algorithm modules or making the task)."""
    rows = []
    for cls in catalog.task_classes():
        reason = cls.unavailable()
        row: dict[str, Any] = {
            "id": cls.id,
            "version": cls.version,
            "title": cls.paper.title,
            "summary": plain_text(cls.summary),
            "available": reason is None,
            "unavailable": reason,
            "algorithms": [],
        }
        if reason is None:
            row["algorithms"] = [
                {"name": n, "role": a.role, "summary": _algorithm_summary(a)}
                for n, a in catalog.algorithms(cls.id).items()
            ]
        rows.append(row)
    if args.format == "json":
        emit(dumps(rows, indent=2))
        return 0
    lines = ["tasks:"]
    for r in rows:
        mark = "" if r["available"] else "  [unavailable]"
        lines += wrapped(f"  {r['id']:<34} v{r['version']}  ", f"{r['title']}{mark}")
    for r in rows:
        lines.append(f"\nalgorithms of {r['id']}:")
        if not r["available"]:
            lines += wrapped("  unavailable: ", r["unavailable"])
        for a in r["algorithms"]:
            lines += wrapped(f"  {a['name']:<22} {a['role']:<10} ", a["summary"])
    emit("\n".join(lines))
    return 0


# ---------------------------------------------------------------------------------------------- info
def _info_data(task_id: str) -> dict[str, Any]:
    task = catalog.get_task(task_id)
    default = task.make_config("small")
    return {
        "id": task.id,
        "version": task.version,
        "summary": plain_text(task.summary),
        "docs": task.docs_page(),
        "paper": {
            "title": task.paper.title,
            "authors": task.paper.authors,
            "arxiv": task.paper.arxiv,
            "venue": task.paper.venue,
        },
        "config": cfg.describe(task.Config),
        "budgets": {b.name: {"overrides": dict(b.overrides), "cost": b.cost} for b in task.budgets.values()},
        "metrics": [
            {
                "name": m.name,
                "higher_is_better": m.higher_is_better,
                "unit": m.unit,
                "description": m.description,
            }
            for m in task.metrics
        ],
        "protocol": task.protocol,
        "algorithms": [
            {
                "name": n,
                "role": a.role,
                "summary": _algorithm_summary(a),
                "params": cfg.describe(a.Params),
                "runs_on_small_default": a.supports(default) is None,
                "unsupported_reason": a.supports(default),
            }
            for n, a in catalog.algorithms(task_id).items()
        ],
        "claims": [
            {"id": c.id, "statement": c.statement, "budget": c.budget, "measured_here": c.expected}
            for c in task.claims
        ],
    }


def _param_line(p: dict[str, Any]) -> str:
    extra = f" one of {', '.join(map(str, p['choices']))}" if p["choices"] else ""
    if p["low"] is not None or p["high"] is not None:
        low = "-inf" if p["low"] is None else p["low"]
        high = "inf" if p["high"] is None else p["high"]
        extra += f" in [{low}, {high}]"
    return f"    {p['name']:<16} {p['type']:<6} default {p['default']!s:<10} {p['help']}{extra}"


def cfg_label(overrides: dict[str, Any]) -> str:
    """A budget's overrides as ``key=value`` pairs, or ``(defaults)`` when it has none."""
    return " ".join(f"{k}={v}" for k, v in overrides.items()) or "(defaults)"


def cmd_info(args: argparse.Namespace) -> int:
    """A task's paper, config, budgets, metrics, protocol, algorithms (with parameters) and claims."""
    data = _info_data(args.task)
    if args.format == "json":
        emit(dumps(data, indent=2))
        return 0
    p = data["paper"]
    out = [
        f"{data['id']} (v{data['version']})",
        f"  {data['summary']}",
        f"  paper: {p['title']}",
        f"         {p['authors']} ({p['venue']}, arXiv:{p['arxiv']})",
        *([f"  docs: {data['docs']}"] if data["docs"] else []),
        "  config (--set KEY=VALUE):",
    ]
    out += [_param_line(c) for c in data["config"]]
    out.append("  budgets (--budget):")
    for name, b in data["budgets"].items():
        out.append(f"    {name:<6} {cfg_label(b['overrides'])}  [{b['cost']}]")
    out.append("  metrics (first is primary):")
    out += [
        f"    {m['name']:<16} {'higher' if m['higher_is_better'] else 'lower'} is better  {m['description']}"
        for m in data["metrics"]
    ]
    out.append(f"  protocol: {data['protocol']}")
    out.append("  algorithms:")
    for a in data["algorithms"]:
        note = (
            "" if a["runs_on_small_default"] else f"  (not on the default config: {a['unsupported_reason']})"
        )
        out.append(f"    {a['name']:<20} {a['role']:<10} {a['summary']}{note}")
        out += ["  " + _param_line(q) for q in a["params"]]
    out.append("  claims (bench claims):")
    for c in data["claims"]:
        verdict = (c["measured_here"] or "").replace("_", " ")
        seen = f" [at {c['budget']} here: {verdict}]" if verdict else ""
        out.append(f"    {c['id']}: {c['statement']}{seen}")
    emit("\n".join(out))
    return 0


# --------------------------------------------------------------------------------------- leaderboard
def cmd_leaderboard(args: argparse.Namespace) -> int:
    """Stored runs aggregated per task, config and algorithm, in ``--format``; ``--html`` also writes
    the page (and, with the table format, prints nothing else)."""
    # pandas, jinja2 and the aggregation only for this command: bench list stays fast
    from iclrbench.leaderboard.aggregate import aggregate
    from iclrbench.leaderboard.page import write_leaderboard_html
    from iclrbench.leaderboard.render import RENDERERS

    if args.task:
        catalog.get_task(args.task)
    store = read_store(args.db)
    if args.html:
        target = write_leaderboard_html(store, args.html, args.task)
        print(f"wrote {target}", file=sys.stderr)
        if args.format == "table":
            return 0
    tables = aggregate(store.runs(args.task), all_versions=args.all_versions)
    emit(RENDERERS[args.format](tables))
    return 0


# ------------------------------------------------------------------------------------- show / export
def cmd_show(args: argparse.Namespace) -> int:
    """Every field of one stored run, by its id."""
    from iclrbench.results import describe_run

    try:
        run_id = int(args.run_id)
    except ValueError:
        raise UserError(
            f"run id '{args.run_id}': expected an integer (see --format json of bench run)"
        ) from None
    store = read_store(args.db)
    # outside SQLite's integer range no run can have the id (and sqlite3 would raise OverflowError)
    run = store.by_id(run_id) if 1 <= run_id <= MAX_RUN_ID else None
    if run is None:
        raise UserError(f"no run with id {run_id} in {store.path}")
    emit(dumps(run.to_json(), indent=2) if args.format == "json" else describe_run(run))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Stored runs (of the newest task versions unless ``--all-versions``) as CSV, Parquet or JSON, to
    stdout or ``--output``."""
    from iclrbench.leaderboard.aggregate import newest_versions
    from iclrbench.results import export

    if args.task:
        catalog.get_task(args.task)
    store = read_store(args.db)
    if args.output:
        guard_output(args.output, store.path, "--output")
    runs = store.runs(args.task, status=args.status)
    if not args.all_versions:
        runs = newest_versions(runs)
    text = export(runs, args.format, args.output)
    if text is not None:
        emit(text)
    else:
        print(f"wrote {len(runs)} runs to {args.output}", file=sys.stderr)
    return 0
