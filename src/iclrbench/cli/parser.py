"""``bench``'s command line: the argument parser, its help text, and the checks on option values that
argparse runs (each failure one line and exit code 2, as every usage error)."""

from __future__ import annotations

import argparse
import math
import re
import textwrap
from collections.abc import Sequence
from typing import Any

from iclrbench.cli.read import cmd_export, cmd_info, cmd_leaderboard, cmd_list, cmd_show
from iclrbench.cli.run import cmd_claims, cmd_demo, cmd_run, cmd_sweep
from iclrbench.core.errors import UserError
from iclrbench.core.task import BUDGETS

#: the longest --timeout accepted (about 115 days): anything larger is a typo, not a wish
MAX_TIMEOUT_S = 1e7
MAX_RETRIES = 100

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


class Parser(argparse.ArgumentParser):
    """argparse, but usage errors are our one-line errors (exit 2) too."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UserError(message)


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
    parser = Parser(prog="bench", description=_fill(DESCRIPTION), epilog=EPILOG, formatter_class=formatter)
    parser.add_argument("--version", action="version", version=f"bench (iclrbench) {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser, metavar="COMMAND")

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


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
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
