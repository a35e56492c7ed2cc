""":func:`check_task`: every check of the contract, static and run, on one registered task."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from iclrbench.core import catalog
from iclrbench.testing.report import CheckOutcome, CheckReport, Skip, TaskContractError
from iclrbench.testing.runs import (
    RunCache,
    check_batched,
    check_claims,
    check_determinism,
    check_gym_envs,
    check_runs,
)
from iclrbench.testing.static import (
    check_budgets_build,
    check_metadata,
    check_params_defaults,
    check_requirements,
)

#: the checks that import the task's algorithms or run its code: skipped, with the pip line that installs
#: what is missing, when the task is unavailable here
_RUNNING_CHECKS = (
    "check_budgets_build",
    "check_params_defaults",
    "check_claims",
    "check_gym_envs",
    "check_runs",
    "check_determinism",
    "check_batched",
)


def _timed(name: str, check: Callable[[], Any]) -> CheckOutcome:
    start = time.perf_counter()
    outcome = CheckOutcome(name, 0.0)
    try:
        notes = check()
        outcome.notes = list(notes or [])
    except Skip as skip:
        outcome.skipped = str(skip)
    except TaskContractError as exc:
        outcome.problems = [message for _, message in exc.problems]
    except Exception as exc:  # a check that crashes is a failure of the task, reported with the rest
        outcome.problems = [f"the check itself raised {type(exc).__name__}: {exc}"]
    outcome.seconds = time.perf_counter() - start
    return outcome


def check_task(task_id: str, budget: str = "smoke", *, seeds: Sequence[int] = (0, 1)) -> CheckReport:
    """Check a registered task against the contract; return the :class:`CheckReport` (per-check times),
    or raise :class:`TaskContractError` listing every failed check.

    Runs each supporting algorithm at ``budget``: where the task has a batched path, one batch over
    ``seeds`` and the last seed alone (determinism and batch equivalence in one comparison); else every
    seed once and the last one twice (determinism).
    """
    seeds = tuple(int(s) for s in seeds)
    if len(seeds) < 2 or len(set(seeds)) != len(seeds):
        raise ValueError(f"check_task needs at least two distinct seeds, not {seeds}")
    task = catalog.get_task(task_id)
    report = CheckReport(task.id, budget, seeds)
    runs = RunCache(task, budget)
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("check_metadata", lambda: check_metadata(task)),
        ("check_requirements", lambda: check_requirements(task)),
    ]
    report.checks += [_timed(name, step) for name, step in steps]
    if type(task).unavailable() is not None:  # nothing below can import the task's algorithms
        reason = type(task).unavailable() or ""
        report.checks += [CheckOutcome(name, 0.0, skipped=reason) for name in _RUNNING_CHECKS]
    else:
        steps = [
            ("check_budgets_build", lambda: check_budgets_build(task)),
            ("check_params_defaults", lambda: check_params_defaults(task)),
            ("check_claims", lambda: check_claims(task)),
            ("check_gym_envs", lambda: check_gym_envs(task)),
            ("check_runs", lambda: check_runs(task, budget, seeds, runs=runs)),
            ("check_determinism", lambda: check_determinism(task, budget, seeds[-1], runs=runs, seeds=seeds)),
            ("check_batched", lambda: check_batched(task, budget, seeds, runs=runs)),
        ]
        report.checks += [_timed(name, step) for name, step in steps]
    report.runs = runs.count
    if not report.ok:
        raise TaskContractError(report.problems, report)
    return report
