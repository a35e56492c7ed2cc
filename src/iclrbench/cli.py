"""``bench``: list, inspect, run and compare the suite's tasks and algorithms.

Every command that prints results takes ``--format json``. Bad input prints one line on stderr and exits
with code 2; nothing stored is changed. Ctrl-C during a sweep keeps every finished run (exit code 130).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
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


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are our one-line errors (exit 2) too."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UserError(message)


def _emit(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def _json_line(obj: Any) -> None:
    _emit(json.dumps(obj, default=str))


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
def cmd_list(args: argparse.Namespace) -> int:
    rows = []
    for tid in catalog.task_ids():
        task = catalog.get_task(tid)
        algos = [
            {"name": n, "role": a.role, "summary": a.summary()} for n, a in catalog.algorithms(tid).items()
        ]
        rows.append(
            {
                "id": tid,
                "version": task.version,
                "title": task.paper.title,
                "summary": task.summary,
                "algorithms": algos,
            }
        )
    if args.format == "json":
        _emit(json.dumps(rows, indent=2))
        return 0
    lines = ["tasks:"]
    lines += [f"  {r['id']:<34} v{r['version']}  {r['title']}" for r in rows]
    for r in rows:
        lines.append(f"\nalgorithms of {r['id']}:")
        lines += [f"  {a['name']:<22} {a['role']:<10} {a['summary']}" for a in r["algorithms"]]
    _emit("\n".join(lines))
    return 0


# ---------------------------------------------------------------------------------------------- info
def _info_data(task_id: str) -> dict[str, Any]:
    task = catalog.get_task(task_id)
    default = task.make_config("small")
    return {
        "id": task.id,
        "version": task.version,
        "summary": task.summary,
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
                "summary": a.summary(),
                "params": cfg.describe(a.Params),
                "runs_on_small_default": a.supports(default) is None,
                "unsupported_reason": a.supports(default),
            }
            for n, a in catalog.algorithms(task_id).items()
        ],
        "claims": [{"id": c.id, "statement": c.statement} for c in task.claims],
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
        _emit(json.dumps(data, indent=2, default=str))
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
    out += [f"    {c['id']}: {c['statement']}" for c in data["claims"]]
    _emit("\n".join(out))
    return 0


def cfg_label(overrides: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in overrides.items()) or "(defaults)"


# ----------------------------------------------------------------------------------------------- run
def _open_store(db: str | None) -> Any:
    from iclrbench.core.store import ResultStore

    return ResultStore(db)


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
    from iclrbench.leaderboard.aggregate import aggregate
    from iclrbench.leaderboard.html import render_html

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
    from iclrbench.core.store import ResultStore
    from iclrbench.leaderboard.aggregate import aggregate
    from iclrbench.leaderboard.render import RENDERERS

    if args.task:
        catalog.get_task(args.task)
    store = ResultStore(args.db, create=False)
    if args.html:
        target = write_leaderboard_html(store, args.html, args.task)
        print(f"wrote {target}", file=sys.stderr)
        if args.format == "table":
            return 0
    tables = aggregate(store.runs(args.task), all_versions=args.all_versions)
    _emit(RENDERERS[args.format](tables))
    return 0


# -------------------------------------------------------------------------------------------- claims
def _claims_for(task_ids: Sequence[str], args: argparse.Namespace) -> list[Any]:
    from iclrbench.claims import check_claims, plan_claims

    store = _open_store(args.db)
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


def cmd_claims(args: argparse.Namespace) -> int:
    task_ids = [args.task] if args.task else catalog.task_ids()
    for tid in task_ids:
        catalog.get_task(tid)
    results = _claims_for(task_ids, args)
    records = [
        {
            "task": c.task,
            "id": c.id,
            "statement": c.statement,
            "verdict": c.verdict,
            "measured": c.measured,
            "budget": c.budget,
        }
        for c in results
    ]
    if args.format == "json":
        _emit(json.dumps(records, indent=2))
        return 0
    for c in results:
        _emit(
            f"[{c.verdict.upper().replace('_', ' ')}] {c.task} / {c.id} ({c.budget})\n  {c.statement}\n  "
            + "\n  ".join(f"{k}: {json.dumps(v)}" for k, v in c.measured.items())
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
    store = _open_store(args.db)
    if args.dry_run:
        stored = {s.key: store.get(s.key) for s in specs}
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
            f"stored in {store.path}, {len(specs) - done} to run",
            file=sys.stderr,
        )
        return 0
    report = _sweep(specs, args, store, None, f"sweep {Path(args.file).name}")
    if args.format != "json" and not args.quiet:
        _emit(
            f"{len(report.results)} runs: {report.ran} ran, {report.reused} reused from {store.path}, "
            f"{report.failed} failed"
        )
    return 1 if report.failed else 0


# ------------------------------------------------------------------------------------- show / export
def cmd_show(args: argparse.Namespace) -> int:
    from iclrbench.core.store import ResultStore
    from iclrbench.results import describe_run

    try:
        run_id = int(args.run_id)
    except ValueError:
        raise UserError(
            f"run id '{args.run_id}': expected an integer (see --format json of bench run)"
        ) from None
    run = ResultStore(args.db, create=False).by_id(run_id)
    if run is None:
        raise UserError(f"no run with id {run_id} in {args.db or 'the results file'}")
    _emit(json.dumps(run.to_json(), indent=2, default=str) if args.format == "json" else describe_run(run))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from iclrbench.core.store import ResultStore
    from iclrbench.leaderboard.aggregate import newest_versions
    from iclrbench.results import export

    if args.task:
        catalog.get_task(args.task)
    runs = ResultStore(args.db, create=False).runs(args.task, status=args.status)
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
    """Every task, all its algorithms, each demo setting, smoke budget, 3 seeds; claims; the page."""
    from iclrbench import runner
    from iclrbench.claims import check_claims, plan_claims

    store = _open_store(args.db)
    seeds = runner.parse_seeds(args.seeds)
    plans: list[Any] = []
    for tid in catalog.task_ids():
        task = catalog.get_task(tid)
        names = list(catalog.algorithms(tid))
        for setting in task.demo_settings:
            plans += runner.plan(
                tid, names, seeds, args.budget, {k: str(v) for k, v in setting.items()}, skip_unsupported=True
            )
    claim_total = sum(
        len({s.key for _, gs in plan_claims(t, args.budget) for g in gs for s in g})
        for t in catalog.task_ids()
    )
    print(
        f"demo: {len(plans)} runs over {len(catalog.task_ids())} task(s) at budget '{args.budget}', "
        f"then the claims ({claim_total} runs); results in {store.path}",
        file=sys.stderr,
    )
    enabled = not args.quiet and sys.stderr.isatty()
    failed = 0
    with _progress(len(plans) + claim_total, "demo", enabled=enabled) as bar:

        def show(result: Any, reused: bool) -> None:
            _advance(bar, result.status != "ok")
            if bar is None and not args.quiet:
                print(
                    _result_line(
                        result,
                        reused,
                        "regret" if "regret" in result.metrics else next(iter(result.metrics), ""),
                    ),
                    file=sys.stderr,
                )

        report = runner.run_specs(plans, store, force=args.force, on_result=show, **_execution(args))
        failed += report.failed
        claims = []
        for tid in catalog.task_ids():
            claims += check_claims(tid, args.budget, store, on_result=show, **_execution(args))
    for c in claims:
        print(f"claim {c.task}/{c.id}: {c.verdict}", file=sys.stderr)
    target = write_leaderboard_html(store, args.html)
    print(f"demo: wrote {target.resolve()} ({failed} failed runs)", file=sys.stderr)
    return 1 if failed else 0


# ---------------------------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="bench", description=__doc__.splitlines()[0] if __doc__ else "")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def db_opt(p: argparse.ArgumentParser) -> None:
        p.add_argument("--db", help="results file (default $ICLRBENCH_DB or ./.iclrbench/results.sqlite)")

    p = sub.add_parser("list", help="tasks, then the algorithms of each task with their roles")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("info", help="a task's paper, config, budgets, metrics, algorithms and claims")
    p.add_argument("task")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(func=cmd_info)

    def exec_opts(p: argparse.ArgumentParser) -> None:
        p.add_argument("--force", action="store_true", help="redo runs that are already stored")
        p.add_argument("-j", "--jobs", type=int, default=1, help="workers (default 1: serial)")
        p.add_argument(
            "--executor",
            choices=("serial", "process", "dask"),
            help="where runs execute (default: serial for -j 1, a process pool for more)",
        )
        p.add_argument(
            "--scheduler", metavar="ADDRESS", help="a running dask scheduler, e.g. tcp://HOST:8786"
        )
        p.add_argument(
            "--timeout", type=float, metavar="SECONDS", help="a run longer than this is stopped and failed"
        )
        p.add_argument("--retries", type=int, default=0, help="retry a failed run up to N times")
        p.add_argument("--quiet", action="store_true", help="print nothing but errors and results")
        db_opt(p)

    def sweep_opts(p: argparse.ArgumentParser, default_budget: str) -> None:
        p.add_argument("--budget", choices=BUDGETS, default=default_budget)
        exec_opts(p)

    p = sub.add_parser("run", help="run algorithms of a task over seeds; results go to the store")
    p.add_argument("task")
    p.add_argument("algorithms", nargs="*", metavar="ALGO")
    p.add_argument("--all", action="store_true", help="every algorithm that applies to the config")
    p.add_argument("--seeds", default="0-4", help="e.g. 0-4 or 0,3,7 (default 0-4)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config key or algorithm parameter (ALGO.KEY=VALUE for one algorithm)",
    )
    p.add_argument("--format", choices=("table", "json"), default="table")
    sweep_opts(p, "small")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("sweep", help="run a grid from a YAML file (tasks x algorithms x config x seeds)")
    p.add_argument("file", help="sweep file; see iclrbench.sweep for the format")
    p.add_argument("--dry-run", action="store_true", help="list the runs and how many are stored; run none")
    p.add_argument("--shard", metavar="I/N", help="run only slice I of N (0-based), e.g. for job arrays")
    p.add_argument("--format", choices=("table", "json"), default="table")
    exec_opts(p)
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("show", help="every field of one stored run")
    p.add_argument("run_id")
    p.add_argument("--format", choices=("table", "json"), default="table")
    db_opt(p)
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("export", help="stored runs as CSV, Parquet or JSON, one column per metric")
    p.add_argument("--task")
    p.add_argument("--format", choices=("csv", "parquet", "json"), default="csv")
    p.add_argument("--output", "-o", metavar="PATH", help="file to write (default stdout; parquet needs it)")
    p.add_argument("--status", choices=("ok", "failed"), help="only runs with this status")
    p.add_argument("--all-versions", action="store_true", help="include runs of older task versions")
    db_opt(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("leaderboard", help="aggregate stored runs: mean, 95%% CI, IQM, rank")
    p.add_argument("--task")
    p.add_argument("--html", metavar="PATH", help="also write the self-contained HTML page")
    p.add_argument("--format", choices=("table", "csv", "json", "markdown"), default="table")
    p.add_argument("--all-versions", action="store_true", help="include rows of older task versions")
    db_opt(p)
    p.set_defaults(func=cmd_leaderboard)

    p = sub.add_parser("claims", help="check the papers' claims from real runs (reusing stored ones)")
    p.add_argument("task", nargs="?")
    p.add_argument("--format", choices=("table", "json"), default="table")
    sweep_opts(p, "small")
    p.set_defaults(func=cmd_claims)

    p = sub.add_parser("demo", help="every task and algorithm at the smoke budget, claims, leaderboard.html")
    p.add_argument("--seeds", default="0-2")
    p.add_argument("--html", default="leaderboard.html")
    sweep_opts(p, "smoke")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if getattr(args, "jobs", 1) < 1:
            raise UserError("--jobs must be at least 1")
        with stop_on_sigint():
            return int(args.func(args))
    except UserError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("bench: interrupted; every finished run is stored", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
