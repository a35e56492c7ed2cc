"""``bench``: list, inspect, run and compare the suite's tasks and algorithms.

Every command that prints results takes ``--format json``. Bad input prints one line on stderr and exits
with code 2; nothing stored is changed. Ctrl-C during a sweep keeps every finished run (exit code 130).
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import math
import re
import shlex
import shutil
import sys
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from iclrbench.core import catalog
from iclrbench.core import config as cfg
from iclrbench.core.errors import UserError
from iclrbench.core.interrupt import stop_on_sigint
from iclrbench.core.task import BUDGETS

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
#: the longest --timeout accepted (about 115 days): anything larger is a typo, not a wish
MAX_TIMEOUT_S = 1e7
MAX_RETRIES = 100
#: SQLite's INTEGER range: a run id outside it names no run
MAX_RUN_ID = 2**63 - 1

DESCRIPTION = (
    "bench: list, inspect, run and compare the suite's tasks and algorithms. Results go to one SQLite "
    "file (--db, $ICLRBENCH_DB, default ./.iclrbench/results.sqlite); a finished run is reused, never redone "
    "unless --force. Bad input prints one line on stderr and exits with code 2, changing nothing."
)
EPILOG = """examples:
  bench list
  bench info contextual-bilateral-trade
  bench run contextual-bilateral-trade ellipsoid-sbb --seeds 0-4 --budget small
  bench run contextual-bilateral-trade --all --budget smoke -j 2
  bench leaderboard --html site/index.html
  bench claims contextual-bilateral-trade

'bench COMMAND --help' describes each command."""


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are our one-line errors (exit 2) too."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UserError(message)


def _emit(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def _finite(obj: Any) -> Any:
    """``obj`` with every NaN and infinity replaced by None, recursively (strict JSON has neither)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _dumps(obj: Any, indent: int | None = None) -> str:
    """Strict JSON (RFC 8259): non-finite numbers become null, never ``NaN`` / ``Infinity``."""
    return json.dumps(_finite(obj), indent=indent, default=str, allow_nan=False)


def _json_line(obj: Any) -> None:
    _emit(_dumps(obj))


_ROLE = re.compile(r":[\w:.-]+:`([^`<]*?)\s*(?:<[^`>]*>)?`")
_LITERAL = re.compile(r"``(.+?)``")
_LINK = re.compile(r"`([^`<]+?)\s*(?:<[^`>]*>)?`_{1,2}")
_INTERPRETED = re.compile(r"`([^`]+)`")
_EMPHASIS = re.compile(r"(?<![\w*])\*{1,2}(?=\S)([^*]+?)(?<=\S)\*{1,2}(?![\w*])")
#: abbreviations after which a full stop does not end a sentence
_ABBREVIATIONS = (
    *("e.g.", "i.e.", "cf.", "vs.", "et al.", "etc."),
    *("Sec.", "Eq.", "Fig.", "Thm.", "Alg.", "App.", "Tab."),
)


def plain_text(text: str) -> str:
    """reST markup removed (``literal``, :role:`x`, `link <url>`_, *emphasis*), whitespace collapsed."""
    text = _ROLE.sub(r"\1", text)
    text = _LITERAL.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _INTERPRETED.sub(r"\1", text)
    text = _EMPHASIS.sub(r"\1", text)
    return " ".join(text.split())


def first_sentence(doc: str) -> str:
    """The first sentence of a docstring's first paragraph, as plain text, never cut mid-sentence."""
    paragraph = plain_text(doc.strip().split("\n\n")[0]) if doc.strip() else ""
    for match in re.finditer(r"[.!?](?=\s+[A-Z(])", paragraph):
        head = paragraph[: match.end()]
        if not head.endswith(_ABBREVIATIONS):
            return head
    return paragraph


def _wrapped(prefix: str, text: str) -> list[str]:
    """``prefix`` + ``text``; on a terminal wrapped to its width with continuation lines indented under
    the text, elsewhere one line (so that ``grep`` sees whole entries)."""
    if not sys.stdout.isatty():
        return [prefix + text]
    width = max(60, shutil.get_terminal_size((100, 24)).columns)
    return textwrap.wrap(text, width=width, initial_indent=prefix, subsequent_indent=" " * len(prefix)) or [
        prefix.rstrip()
    ]


@contextlib.contextmanager
def _progress(total: int, description: str, enabled: bool) -> Iterator[Any]:
    """A rich progress bar on stderr (counts, failures, ETA); a no-op when disabled."""
    if not enabled or total == 0:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("[red]{task.fields[failed]} failed"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    ) as progress:
        yield (progress, progress.add_task(description, total=total, failed=0))


def _advance(bar: Any, failed: bool) -> None:
    if bar is None:
        return
    progress, task_id = bar
    fields = progress.tasks[task_id].fields
    progress.update(task_id, advance=1, failed=fields["failed"] + int(failed))


# ---------------------------------------------------------------------------------------------- list
def _algorithm_summary(cls: Any) -> str:
    return first_sentence(inspect.getdoc(cls) or "")


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
        _emit(_dumps(rows, indent=2))
        return 0
    lines = ["tasks:"]
    for r in rows:
        mark = "" if r["available"] else "  [unavailable]"
        lines += _wrapped(f"  {r['id']:<34} v{r['version']}  ", f"{r['title']}{mark}")
    for r in rows:
        lines.append(f"\nalgorithms of {r['id']}:")
        if not r["available"]:
            lines += _wrapped("  unavailable: ", r["unavailable"])
        for a in r["algorithms"]:
            lines += _wrapped(f"  {a['name']:<22} {a['role']:<10} ", a["summary"])
    _emit("\n".join(lines))
    return 0


# ---------------------------------------------------------------------------------------------- info
def _info_data(task_id: str) -> dict[str, Any]:
    task = catalog.get_task(task_id)
    default = task.make_config("small")
    return {
        "id": task.id,
        "version": task.version,
        "summary": plain_text(task.summary),
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


def cmd_info(args: argparse.Namespace) -> int:
    data = _info_data(args.task)
    if args.format == "json":
        _emit(_dumps(data, indent=2))
        return 0
    p = data["paper"]
    out = [
        f"{data['id']} (v{data['version']})",
        f"  {data['summary']}",
        f"  paper: {p['title']}",
        f"         {p['authors']} ({p['venue']}, arXiv:{p['arxiv']})",
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
    _emit("\n".join(out))
    return 0


def cfg_label(overrides: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in overrides.items()) or "(defaults)"


# ----------------------------------------------------------------------------------------------- run
def _open_store(db: str | None) -> Any:
    """The store for a command that writes: created if absent, and refused (one line, exit 2) before
    anything is computed when it cannot be written."""
    from iclrbench.core.store import ResultStore

    return _opened(ResultStore(db))


def _read_store(db: str | None) -> Any:
    """The store for a command that only reads: opened read-only, so a read-only file still works."""
    from iclrbench.core.store import ResultStore

    return _opened(ResultStore(db, readonly=True))


_OPEN_STORES: list[Any] = []


def _opened(store: Any) -> Any:
    """Remember ``store`` so that :func:`main` closes it when the command ends, however it ends."""
    _OPEN_STORES.append(store)
    return store


def _guard_output(target: str | Path, store_path: Any, option: str) -> None:
    """Refuse an output path that is the results store, or any SQLite file (one line, exit 2)."""
    from iclrbench.core.store import refuse_overwrite

    refuse_overwrite(target, store_path, option)


def _require_available(task_id: str) -> None:
    """One line and exit 2 for a task whose packages are missing, before any store is opened."""
    reason = type(catalog.get_task(task_id)).unavailable()
    if reason is not None:
        raise UserError(reason)


def _run_record(r: Any, reused: bool) -> dict[str, Any]:
    return {
        "task": r.task,
        "algorithm": r.algorithm,
        "seed": r.seed,
        "config": r.config,
        "params": r.params,
        "budget": r.budget,
        "metrics": r.metrics,
        "status": r.status,
        "error": r.error,
        "wall_s": round(r.wall_s, 6),
        "reused": reused,
        "run_id": r.run_id,
    }


def _result_line(r: Any, reused: bool, primary: str) -> str:
    if r.status != "ok":
        return f"FAILED  {r.algorithm:<20} seed={r.seed:<3} {r.error}"
    tag = "stored" if reused else "ok"
    value = r.metrics.get(primary, float("nan"))
    return f"{tag:<7} {r.algorithm:<20} seed={r.seed:<3} {primary}={value:.6g}  ({r.wall_s:.2f} s)"


def _sweep(
    specs: Sequence[Any], args: argparse.Namespace, store: Any, primary: str | None, label: str
) -> Any:
    """Run ``specs`` with a progress bar; ``primary`` None: each run's own task's primary metric."""
    from iclrbench import runner

    quiet = args.quiet or args.format == "json"

    def show(result: Any, reused: bool) -> None:
        if args.format == "json":
            _json_line(_run_record(result, reused))
        elif not args.quiet:
            metric = primary or catalog.get_task(result.task).primary_metric.name
            (bar[0].console.print if bar else _emit)(_result_line(result, reused, metric))
        _advance(bar, result.status != "ok")

    with _progress(len(specs), label, enabled=not quiet and sys.stderr.isatty()) as bar:
        return runner.run_specs(specs, store, force=args.force, on_result=show, **_execution(args))


def _execution(args: argparse.Namespace) -> dict[str, Any]:
    """Where and how runs execute: jobs, executor, scheduler, timeout, retries; what is said meanwhile."""
    from iclrbench.executors import check_jobs

    check_jobs(args.jobs, args.scheduler)  # before anything runs or is reused: one line, exit 2
    quiet = args.quiet or getattr(args, "format", "table") == "json"

    def announce(task_id: str) -> None:
        print(f"preparing {task_id}: its shared data (built once, then cached)", file=sys.stderr)

    return {
        "jobs": args.jobs,
        "executor": args.executor,
        "scheduler": args.scheduler,
        "timeout": args.timeout,
        "retries": args.retries,
        "on_prepare": None if quiet else announce,
    }


def cmd_run(args: argparse.Namespace) -> int:
    from iclrbench import runner

    task = catalog.get_task(args.task)
    _require_available(args.task)
    known = catalog.algorithms(args.task)
    if args.all and args.algorithms:
        raise UserError("give algorithm names or --all, not both")
    if not args.all and not args.algorithms:
        raise UserError(
            f"name at least one algorithm of {args.task} or pass --all; algorithms: {', '.join(known)}"
        )
    names = list(known) if args.all else args.algorithms
    seeds = runner.parse_seeds(args.seeds)
    skipped: list[str] = []
    specs = runner.plan(
        args.task,
        names,
        seeds,
        args.budget,
        runner.parse_sets(args.set),
        skip_unsupported=args.all,
        on_skip=lambda n, why: skipped.append(f"{n} ({why})"),
    )
    if skipped and not args.quiet and args.format != "json":
        print(f"skipped, not applicable to this config: {', '.join(skipped)}", file=sys.stderr)
    store = _open_store(args.db)
    report = _sweep(specs, args, store, task.primary_metric.name, f"{args.task}")
    if args.format != "json" and not args.quiet:
        _emit(
            f"{len(report.results)} runs: {report.ran} ran, {report.reused} reused from {store.path}, "
            f"{report.failed} failed"
        )
    return 1 if report.failed else 0


# --------------------------------------------------------------------------------------- leaderboard
def _papers() -> dict[str, dict[str, str]]:
    out = {}
    for tid in catalog.task_ids():
        p = catalog.get_task(tid).paper
        out[tid] = {"title": p.title, "authors": p.authors, "arxiv": p.arxiv}
    return out


def write_leaderboard_html(store: Any, path: str | Path, task: str | None = None) -> Path:
    """Write the self-contained page to ``path``; never over the store or any SQLite file."""
    from iclrbench.leaderboard.aggregate import aggregate
    from iclrbench.leaderboard.html import render_html

    _guard_output(path, store.path, "--html")
    tables = aggregate(store.runs(task))
    page = render_html(tables, store.claims(task), _papers())
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"--html {path}: cannot write ({exc.strerror})") from None
    return target


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from iclrbench.leaderboard.aggregate import aggregate
    from iclrbench.leaderboard.render import RENDERERS

    if args.task:
        catalog.get_task(args.task)
    store = _read_store(args.db)
    if args.html:
        target = write_leaderboard_html(store, args.html, args.task)
        print(f"wrote {target}", file=sys.stderr)
        if args.format == "table":
            return 0
    tables = aggregate(store.runs(args.task), all_versions=args.all_versions)
    _emit(RENDERERS[args.format](tables))
    return 0


# -------------------------------------------------------------------------------------------- claims
def _claims_for(task_ids: Sequence[str], args: argparse.Namespace, store: Any) -> list[Any]:
    from iclrbench.claims import check_claims, plan_claims

    bar_enabled = not args.quiet and args.format != "json" and sys.stderr.isatty()
    results = []
    for tid in task_ids:
        primary = catalog.get_task(tid).primary_metric.name
        total = len({s.key for _, groups in plan_claims(tid, args.budget) for g in groups for s in g})
        with _progress(total, f"claims {tid}", enabled=bar_enabled) as bar:

            def show(result: Any, reused: bool, bar: Any = bar, primary: str = primary) -> None:
                if bar is None and not args.quiet and args.format != "json":
                    print(_result_line(result, reused, primary), file=sys.stderr)
                _advance(bar, result.status != "ok")

            results += check_claims(
                tid, args.budget, store, force=args.force, on_result=show, **_execution(args)
            )
    return results


def _claim_record(c: Any, current: bool) -> dict[str, Any]:
    return {
        "task": c.task,
        "id": c.id,
        "statement": c.statement,
        "verdict": c.verdict,
        "measured": c.measured,
        "budget": c.budget,
        "task_version": c.task_version,
        "config_hash": c.config_hash,
        "claim_version": c.claim_version,
        "current": current,
    }


def _available_tasks(quiet: bool, skipped: str) -> list[str]:
    """Every registered task that can run here; each one whose packages are missing is named on stderr
    (``skipped`` starts the line) with its pip line, not fatal."""
    task_ids = []
    for cls in catalog.task_classes():
        reason = cls.unavailable()
        if reason is None:
            task_ids.append(cls.id)
        elif not quiet:
            print(f"{skipped} {reason}", file=sys.stderr)
    return task_ids


def cmd_claims(args: argparse.Namespace) -> int:
    """Judge the claims from (reused or new) runs at ``--budget``; ``--all-versions`` also prints the
    verdicts stored for older task versions, claim rules or base configs."""
    if args.task:
        _require_available(args.task)  # an unknown or unavailable task: before the store is touched
        task_ids = [args.task]
    else:  # every task that can run here; the others are named, not fatal
        task_ids = _available_tasks(args.quiet, "skipped")
    store = _open_store(args.db)
    results = _claims_for(task_ids, args, store)
    records = [_claim_record(c, True) for c in results]
    if args.all_versions:
        judged = {(c.task, c.id, c.budget, c.task_version, c.config_hash) for c in results}
        for tid in task_ids:
            records += [
                _claim_record(c, False)
                for c in store.claims(tid, all_versions=True)
                if (c.task, c.id, c.budget, c.task_version, c.config_hash) not in judged
            ]
    if args.format == "json":
        _emit(_dumps(records, indent=2))
        return 0
    for r in records:
        origin = (
            ""
            if r["current"]
            else f", stored: task v{r['task_version']}, claim rule v{r['claim_version']}, "
            f"config {r['config_hash'] or '?'}"
        )
        _emit(
            f"[{r['verdict'].upper().replace('_', ' ')}] {r['task']} / {r['id']} ({r['budget']}{origin})\n  "
            f"{r['statement']}\n  " + "\n  ".join(f"{k}: {_dumps(v)}" for k, v in r["measured"].items())
        )
    return 0


# --------------------------------------------------------------------------------------------- sweep
def cmd_sweep(args: argparse.Namespace) -> int:
    from iclrbench import sweep

    specs = sweep.plan_sweep(sweep.load_sweep(args.file))
    total = len(specs)
    if args.shard:
        index, count = sweep.parse_shard(args.shard)
        specs = sweep.shard(specs, index, count)
    if args.dry_run:  # reads only: a read-only store works, and an absent one is not created
        from iclrbench.core.store import resolve_path

        where = resolve_path(args.db)
        reader = _read_store(args.db) if where.exists() else None
        stored = {s.key: reader.get(s.key) if reader is not None else None for s in specs}
        status = {k: (r.status if r is not None else "todo") for k, r in stored.items()}
        if args.format == "json":
            for s in specs:
                record = {"task": s.task, "algorithm": s.algorithm, "seed": s.seed, "budget": s.budget}
                _json_line({**record, "config": s.config, "params": s.params, "stored": status[s.key]})
        else:
            for s in specs:
                _emit(
                    f"{status[s.key]:<7} {s.task:<30} {s.algorithm:<20} seed={s.seed:<3} "
                    f"config={s.config_hash}"
                )
        done = sum(v == "ok" for v in status.values())
        print(
            f"{len(specs)} runs{f' (shard {args.shard} of {total})' if args.shard else ''}: {done} already "
            f"stored in {where}, {len(specs) - done} to run",
            file=sys.stderr,
        )
        return 0
    store = _open_store(args.db)
    report = _sweep(specs, args, store, None, f"sweep {Path(args.file).name}")
    if args.format != "json" and not args.quiet:
        _emit(
            f"{len(report.results)} runs: {report.ran} ran, {report.reused} reused from {store.path}, "
            f"{report.failed} failed"
        )
    return 1 if report.failed else 0


# ------------------------------------------------------------------------------------- show / export
def cmd_show(args: argparse.Namespace) -> int:
    from iclrbench.results import describe_run

    try:
        run_id = int(args.run_id)
    except ValueError:
        raise UserError(
            f"run id '{args.run_id}': expected an integer (see --format json of bench run)"
        ) from None
    store = _read_store(args.db)
    # outside SQLite's integer range no run can have the id (and sqlite3 would raise OverflowError)
    run = store.by_id(run_id) if 1 <= run_id <= MAX_RUN_ID else None
    if run is None:
        raise UserError(f"no run with id {run_id} in {store.path}")
    _emit(_dumps(run.to_json(), indent=2) if args.format == "json" else describe_run(run))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from iclrbench.leaderboard.aggregate import newest_versions
    from iclrbench.results import export

    if args.task:
        catalog.get_task(args.task)
    store = _read_store(args.db)
    if args.output:
        _guard_output(args.output, store.path, "--output")
    runs = store.runs(args.task, status=args.status)
    if not args.all_versions:
        runs = newest_versions(runs)
    text = export(runs, args.format, args.output)
    if text is not None:
        _emit(text)
    else:
        print(f"wrote {len(runs)} runs to {args.output}", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------------------------- demo
def cmd_demo(args: argparse.Namespace) -> int:
    """Every available task, all its algorithms, each demo setting, at ``--budget`` (smoke), 3 seeds;
    then the page. Claims are not judged here: a claim is defined at its own budget (``Claim.budget``,
    ``small`` by default) and smoke runs would misjudge it, so the page shows such claims as not checked
    and the demo ends with the ``bench claims`` command that checks each task's."""
    from iclrbench import runner

    task_ids = _available_tasks(args.quiet, "demo: skipped")
    seeds = runner.parse_seeds(args.seeds)
    plans: list[Any] = []
    for tid in task_ids:
        task = catalog.get_task(tid)
        names = list(catalog.algorithms(tid))
        for setting in task.demo_settings:
            plans += runner.plan(
                tid, names, seeds, args.budget, {k: str(v) for k, v in setting.items()}, skip_unsupported=True
            )
    store = _open_store(args.db)
    _guard_output(args.html, store.path, "--html")  # before the runs, not after them
    if not args.quiet:
        print(
            f"demo: {len(plans)} runs over {len(task_ids)} task(s) at budget '{args.budget}'; "
            f"results in {store.path}",
            file=sys.stderr,
        )
    enabled = not args.quiet and sys.stderr.isatty()
    with _progress(len(plans), "demo", enabled=enabled) as bar:

        def show(result: Any, reused: bool) -> None:
            _advance(bar, result.status != "ok")
            if bar is None and not args.quiet:
                primary = catalog.get_task(result.task).primary_metric.name
                print(_result_line(result, reused, primary), file=sys.stderr)

        report = runner.run_specs(plans, store, force=args.force, on_result=show, **_execution(args))
    target = write_leaderboard_html(store, args.html)
    print(f"demo: wrote {target.resolve()} ({report.failed} failed runs)", file=sys.stderr)
    if not args.quiet:
        db = f" --db {shlex.quote(args.db)}" if args.db else ""
        print("check the papers' claims at the budget each is defined at:", file=sys.stderr)
        for tid in task_ids:
            for budget in dict.fromkeys(c.budget for c in catalog.get_task(tid).claims):
                flag = "" if budget == "small" else f" --budget {budget}"  # small: bench claims' default
                print(f"  bench claims {tid}{flag}{db}", file=sys.stderr)
    return 1 if report.failed else 0


# ---------------------------------------------------------------------------------------------- main
def _seconds(text: str) -> float:
    """``--timeout``: a finite, positive number of seconds, at most :data:`MAX_TIMEOUT_S`."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}': expected a number of seconds, e.g. 600") from None
    if not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(
            f"'{text}': expected a positive number of seconds up to {MAX_TIMEOUT_S:.0f} (about 115 days)"
        )
    return value


def _bounded_int(low: int, high: int) -> Any:
    """An argparse type: an integer in [low, high]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}': expected an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"'{text}': expected an integer from {low} to {high}")
        return value

    return parse


_ADDRESS = re.compile(r"(tcp|tls)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?):(\d{1,5})")


def _scheduler(text: str) -> str:
    """``--scheduler``: a dask scheduler address, ``tcp://HOST:PORT`` (or ``tls://``), checked up front so
    a typo fails at once instead of after dask's connection timeout."""
    match = _ADDRESS.fullmatch(text.strip())
    if match is None or not 1 <= int(match[4]) <= 65535:
        raise argparse.ArgumentTypeError(
            f"'{text}': expected a scheduler address tcp://HOST:PORT, e.g. tcp://node1:8786"
        )
    return text.strip()


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("iclrbench")
    except metadata.PackageNotFoundError:  # a source tree on sys.path, not installed
        from iclrbench import __version__

        return __version__


def _fill(text: str, width: int = 88) -> str:
    """Prose paragraphs wrapped to ``width``; a paragraph of indented lines (examples) kept as written."""
    paragraphs = text.split("\n\n")
    return "\n\n".join(
        p if "\n  " in p else textwrap.fill(p, width=width, break_on_hyphens=False) for p in paragraphs
    )


FORMAT_HELP = "table for people (default), json for machines"
JSONL_HELP = "table for people (default); json: one JSON object per run and line (JSON Lines), as it finishes"


def build_parser() -> argparse.ArgumentParser:
    """The ``bench`` argument parser (every usage error is one line and exit code 2)."""
    formatter = argparse.RawDescriptionHelpFormatter  # keeps the examples' lines; prose wrapped here
    parser = _Parser(prog="bench", description=_fill(DESCRIPTION), epilog=EPILOG, formatter_class=formatter)
    parser.add_argument("--version", action="version", version=f"bench (iclrbench) {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")

    def command(name: str, summary: str, description: str = "") -> argparse.ArgumentParser:
        return sub.add_parser(
            name, help=summary, description=_fill(description or summary), formatter_class=formatter
        )

    def db_opt(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--db",
            metavar="PATH",
            help="results file (default: $ICLRBENCH_DB, else ./.iclrbench/results.sqlite)",
        )

    def task_arg(p: argparse.ArgumentParser, **kwargs: Any) -> None:
        p.add_argument("task", metavar="TASK", help="a task id, as 'bench list' prints it", **kwargs)

    p = command("list", "tasks, then the algorithms of each task with their roles")
    p.add_argument("--format", choices=("table", "json"), default="table", help=FORMAT_HELP)
    p.set_defaults(func=cmd_list)

    p = command("info", "a task's paper, config, budgets, metrics, algorithms and claims")
    task_arg(p)
    p.add_argument("--format", choices=("table", "json"), default="table", help=FORMAT_HELP)
    p.set_defaults(func=cmd_info)

    def exec_opts(p: argparse.ArgumentParser) -> None:
        p.add_argument("--force", action="store_true", help="redo runs that are already stored")
        p.add_argument(
            "-j",
            "--jobs",
            type=_bounded_int(1, 1_000_000),
            default=1,
            metavar="N",
            help="run N at once (default: 1, serial)",
        )
        p.add_argument(
            "--executor",
            choices=("serial", "process", "dask"),
            help="where runs execute (default: serial for -j 1, a process pool for more)",
        )
        p.add_argument(
            "--scheduler",
            type=_scheduler,
            metavar="ADDRESS",
            help="a running dask scheduler, tcp://HOST:PORT (e.g. tcp://node1:8786)",
        )
        p.add_argument(
            "--timeout",
            type=_seconds,
            metavar="SECONDS",
            help=f"stop and fail a run that takes longer (0 < SECONDS <= {MAX_TIMEOUT_S:.0f}; default: none)",
        )
        p.add_argument(
            "--retries",
            type=_bounded_int(0, MAX_RETRIES),
            default=0,
            metavar="N",
            help=f"retry a failed run up to N times (0-{MAX_RETRIES}; default: 0)",
        )
        p.add_argument("--quiet", action="store_true", help="print nothing but errors and results")
        db_opt(p)

    def budget_opt(p: argparse.ArgumentParser, default_budget: str) -> None:
        p.add_argument(
            "--budget",
            choices=BUDGETS,
            default=default_budget,
            help="smoke: seconds; small: minutes on 2 cores; paper: the paper's scale "
            f"(default: {default_budget})",
        )

    p = command(
        "run",
        "run algorithms of a task over seeds; results go to the store",
        "Run algorithms of a task over seeds at a budget and store every result. A run already stored is "
        "reused (--force redoes it); a failed run is stored with its error and retried next time; Ctrl-C "
        "keeps every finished run.\n\n"
        "examples:\n"
        "  bench run contextual-bilateral-trade ellipsoid-sbb --seeds 0-4\n"
        "  bench run contextual-bilateral-trade --all --budget smoke -j 2\n"
        "  bench run contextual-bilateral-trade --all --set d=8 --set ellipsoid-sbb.epsilon_scale=0.5",
    )
    task_arg(p)
    p.add_argument(
        "algorithms",
        nargs="*",
        metavar="ALGO",
        help="algorithms of the task to run, as 'bench info TASK' lists them (or --all)",
    )
    p.add_argument(
        "--all", action="store_true", help="every algorithm of the task that applies to the config"
    )
    p.add_argument("--seeds", default="0-4", help="e.g. 0-4, 0,3,7 or 0-2,9 (default: 0-4)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config key or algorithm parameter (ALGO.KEY=VALUE for one algorithm); repeatable",
    )
    p.add_argument("--format", choices=("table", "json"), default="table", help=JSONL_HELP)
    budget_opt(p, "small")
    exec_opts(p)
    p.set_defaults(func=cmd_run)

    p = command(
        "sweep",
        "run a grid from a YAML file (tasks x algorithms x config x seeds)",
        "Run every point of a sweep file (its format: the docstring of iclrbench.sweep, and "
        "sweeps/example.yaml), reusing stored runs.",
    )
    p.add_argument("file", metavar="FILE", help="the sweep file (YAML, UTF-8)")
    p.add_argument("--dry-run", action="store_true", help="list the runs and how many are stored; run none")
    p.add_argument("--shard", metavar="I/N", help="run only slice I of N (0-based), e.g. for job arrays")
    p.add_argument("--format", choices=("table", "json"), default="table", help=JSONL_HELP)
    exec_opts(p)
    p.set_defaults(func=cmd_sweep)

    p = command("show", "every field of one stored run")
    p.add_argument("run_id", metavar="RUN_ID", help="the run's id (run_id in --format json of bench run)")
    p.add_argument("--format", choices=("table", "json"), default="table", help=FORMAT_HELP)
    db_opt(p)
    p.set_defaults(func=cmd_show)

    p = command("export", "stored runs as CSV, Parquet or JSON, one column per metric")
    p.add_argument("--task", metavar="TASK", help="only this task's runs")
    p.add_argument(
        "--format", choices=("csv", "parquet", "json"), default="csv", help="file format (default: csv)"
    )
    p.add_argument("--output", "-o", metavar="PATH", help="file to write (default: stdout; parquet needs it)")
    p.add_argument("--status", choices=("ok", "failed"), help="only runs with this status")
    p.add_argument("--all-versions", action="store_true", help="include runs of older task versions")
    db_opt(p)
    p.set_defaults(func=cmd_export)

    p = command(
        "leaderboard",
        "aggregate stored runs: mean, 95%% CI, IQM, rank",
        "Aggregate stored runs per task, config and algorithm: n, mean with a 95% confidence interval, "
        "IQM, rank on the primary metric; optionally the self-contained HTML page.",
    )
    p.add_argument("--task", metavar="TASK", help="only this task")
    p.add_argument("--html", metavar="PATH", help="also write the self-contained HTML page")
    p.add_argument(
        "--format",
        choices=("table", "csv", "json", "markdown"),
        default="table",
        help="output format (default: table)",
    )
    p.add_argument("--all-versions", action="store_true", help="include rows of older task versions")
    db_opt(p)
    p.set_defaults(func=cmd_leaderboard)

    p = command(
        "claims",
        "check the papers' claims from real runs (reusing stored ones)",
        "Judge each claim of a task (of every task without TASK) from runs at --budget, running the "
        "ones not stored yet, and store the verdicts.",
    )
    task_arg(p, nargs="?")
    p.add_argument("--format", choices=("table", "json"), default="table", help=FORMAT_HELP)
    p.add_argument(
        "--all-versions",
        action="store_true",
        help="also print verdicts stored for older task versions, claim rules or configs",
    )
    budget_opt(p, "small")
    exec_opts(p)
    p.set_defaults(func=cmd_claims)

    p = command(
        "demo",
        "every task and algorithm at the smoke budget, then leaderboard.html",
        "Run every available task with all its algorithms at --budget, write the page, and print the "
        "'bench claims' command of each task (claims are judged at their own budget, not here).",
    )
    p.add_argument("--seeds", default="0-2", help="(default: 0-2)")
    p.add_argument("--html", metavar="PATH", default="leaderboard.html", help="(default: leaderboard.html)")
    budget_opt(p, "smoke")
    exec_opts(p)
    p.set_defaults(func=cmd_demo)
    return parser


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse, letting ``bench run``'s algorithm names come after options (``TASK --all ALGO`` then gets
    the clear "names or --all" error instead of "unrecognized arguments")."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command == "run" and not any(e.startswith("-") for e in extra):
        args.algorithms = [*args.algorithms, *extra]
        extra = []
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parse(argv)
        with stop_on_sigint():
            return int(args.func(args))
    except UserError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help, --version: argparse exits; a return code keeps main() callable
        return exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        print("bench: interrupted; every finished run is stored", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 0
    finally:
        while _OPEN_STORES:
            _OPEN_STORES.pop().close()


if __name__ == "__main__":
    sys.exit(main())
