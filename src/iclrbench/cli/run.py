"""The commands that compute and write the store: ``run`` (algorithms of one task over seeds),
``sweep`` (a grid from a YAML file), ``claims`` (the papers' claims judged from runs) and ``demo``
(every task, then the page). Each reuses stored runs unless ``--force``; only this process writes."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iclrbench.cli.output import advance, emit, json_line, progress, result_line, run_record
from iclrbench.cli.stores import guard_output, open_store, read_store
from iclrbench.core import catalog
from iclrbench.core.errors import UserError
from iclrbench.core.jsonsafe import dumps

# the runner, executors, claims and sweep modules are imported inside the commands: bench list and
# bench info do not pay for them


def _require_available(task_id: str) -> None:
    """One line and exit 2 for a task whose packages are missing, before any store is opened."""
    reason = type(catalog.get_task(task_id)).unavailable()
    if reason is not None:
        raise UserError(reason)


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


def _check_execution(args: argparse.Namespace) -> None:
    """Refuse ``-j``, ``--executor`` and ``--scheduler`` that cannot work: called before the store is
    opened, so a refused command creates no file."""
    from iclrbench.executors import check_jobs

    check_jobs(args.jobs, args.scheduler, args.executor)


def _execution(args: argparse.Namespace) -> dict[str, Any]:
    """Where and how runs execute: jobs, executor, scheduler, timeout, retries; what is said meanwhile."""
    _check_execution(args)
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


def _sweep(
    specs: Sequence[Any], args: argparse.Namespace, store: Any, primary: str | None, label: str
) -> Any:
    """Run ``specs`` with a progress bar; ``primary`` None: each run's own task's primary metric."""
    from iclrbench import runner

    quiet = args.quiet or args.format == "json"

    def show(result: Any, reused: bool) -> None:
        if args.format == "json":
            json_line(run_record(result, reused))
        elif not args.quiet:
            metric = primary or catalog.get_task(result.task).primary_metric.name
            (bar[0].console.print if bar else emit)(result_line(result, reused, metric))
        advance(bar, result.status != "ok")

    with progress(len(specs), label, enabled=not quiet and sys.stderr.isatty()) as bar:
        return runner.run_specs(specs, store, force=args.force, on_result=show, **_execution(args))


def _summary(report: Any, store: Any) -> str:
    return (
        f"{len(report.results)} runs: {report.ran} ran, {report.reused} reused from {store.path}, "
        f"{report.failed} failed"
    )


# ----------------------------------------------------------------------------------------------- run
def cmd_run(args: argparse.Namespace) -> int:
    """Algorithms of one task (named, or ``--all`` that apply) over seeds at a budget; exit 1 if a run
    failed."""
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
    _check_execution(args)
    store = open_store(args.db)
    report = _sweep(specs, args, store, task.primary_metric.name, f"{args.task}")
    if args.format != "json" and not args.quiet:
        emit(_summary(report, store))
    return 1 if report.failed else 0


# --------------------------------------------------------------------------------------------- sweep
def _dry_run(specs: Sequence[Any], args: argparse.Namespace, total: int) -> int:
    """List ``specs`` with what is stored of each; reads only, so a read-only store works and an absent
    one is not created."""
    from iclrbench.core.store import resolve_path

    where = resolve_path(args.db)
    reader = read_store(args.db) if where.exists() else None
    stored = {s.key: reader.get(s.key) if reader is not None else None for s in specs}
    status = {k: (r.status if r is not None else "todo") for k, r in stored.items()}
    if args.format == "json":
        for s in specs:
            record = {"task": s.task, "algorithm": s.algorithm, "seed": s.seed, "budget": s.budget}
            json_line({**record, "config": s.config, "params": s.params, "stored": status[s.key]})
    else:
        for s in specs:
            emit(f"{status[s.key]:<7} {s.task:<30} {s.algorithm:<20} seed={s.seed:<3} config={s.config_hash}")
    done = sum(v == "ok" for v in status.values())
    print(
        f"{len(specs)} runs{f' (shard {args.shard} of {total})' if args.shard else ''}: {done} already "
        f"stored in {where}, {len(specs) - done} to run",
        file=sys.stderr,
    )
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    """Every point of a sweep file (or of its ``--shard``); ``--dry-run`` lists them and runs none."""
    from iclrbench import sweep

    specs = sweep.plan_sweep(sweep.load_sweep(args.file))
    total = len(specs)
    if args.shard:
        index, count = sweep.parse_shard(args.shard)
        specs = sweep.shard(specs, index, count)
    if args.dry_run:
        return _dry_run(specs, args, total)
    _check_execution(args)
    store = open_store(args.db)
    report = _sweep(specs, args, store, None, f"sweep {Path(args.file).name}")
    if args.format != "json" and not args.quiet:
        emit(_summary(report, store))
    return 1 if report.failed else 0


# -------------------------------------------------------------------------------------------- claims
def _claims_for(task_ids: Sequence[str], args: argparse.Namespace, store: Any) -> list[Any]:
    from iclrbench.claims import check_claims, plan_claims

    bar_enabled = not args.quiet and args.format != "json" and sys.stderr.isatty()
    results = []
    for tid in task_ids:
        primary = catalog.get_task(tid).primary_metric.name
        total = len({s.key for _, groups in plan_claims(tid, args.budget) for g in groups for s in g})
        with progress(total, f"claims {tid}", enabled=bar_enabled) as bar:

            def show(result: Any, reused: bool, bar: Any = bar, primary: str = primary) -> None:
                if bar is None and not args.quiet and args.format != "json":
                    print(result_line(result, reused, primary), file=sys.stderr)
                advance(bar, result.status != "ok")

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


def cmd_claims(args: argparse.Namespace) -> int:
    """Judge the claims from (reused or new) runs at ``--budget``; ``--all-versions`` also prints the
    verdicts stored for older task versions, claim rules or base configs."""
    if args.task:
        _require_available(args.task)  # an unknown or unavailable task: before the store is touched
        task_ids = [args.task]
    else:  # every task that can run here; the others are named, not fatal
        task_ids = _available_tasks(args.quiet, "skipped")
    _check_execution(args)
    store = open_store(args.db)
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
        emit(dumps(records, indent=2))
        return 0
    for r in records:
        origin = (
            ""
            if r["current"]
            else f", stored: task v{r['task_version']}, claim rule v{r['claim_version']}, "
            f"config {r['config_hash'] or '?'}"
        )
        emit(
            f"[{r['verdict'].upper().replace('_', ' ')}] {r['task']} / {r['id']} ({r['budget']}{origin})\n  "
            f"{r['statement']}\n  " + "\n  ".join(f"{k}: {dumps(v)}" for k, v in r["measured"].items())
        )
    return 0


# ---------------------------------------------------------------------------------------------- demo
def cmd_demo(args: argparse.Namespace) -> int:
    """Every available task, all its algorithms, each demo setting, at ``--budget`` (smoke), 3 seeds;
    then the page. Claims are not judged here: a claim is defined at its own budget (``Claim.budget``,
    ``small`` by default) and smoke runs would misjudge it, so the page shows such claims as not checked
    and the demo ends with the ``bench claims`` command that checks each task's."""
    from iclrbench import runner
    from iclrbench.leaderboard.page import write_leaderboard_html

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
    _check_execution(args)
    store = open_store(args.db)
    guard_output(args.html, store.path, "--html")  # before the runs, not after them
    if not args.quiet:
        print(
            f"demo: {len(plans)} runs over {len(task_ids)} task(s) at budget '{args.budget}'; "
            f"results in {store.path}",
            file=sys.stderr,
        )
    enabled = not args.quiet and sys.stderr.isatty()
    with progress(len(plans), "demo", enabled=enabled) as bar:

        def show(result: Any, reused: bool) -> None:
            advance(bar, result.status != "ok")
            if bar is None and not args.quiet:
                primary = catalog.get_task(result.task).primary_metric.name
                print(result_line(result, reused, primary), file=sys.stderr)

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
