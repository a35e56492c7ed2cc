"""Test helpers for tasks and plugins: the task contract checker, a one-run helper for task tests, and
fake run results.

:func:`check_task` is to a task what gymnasium's ``utils.env_checker.check_env`` is to an environment: it
runs every check of the contract (docs/architecture.md, "The contract") on one registered task and raises
:class:`TaskContractError` listing every check that failed. A plugin author calls it in their own tests::

    from iclrbench.testing import check_task

    def test_my_task_keeps_the_contract() -> None:
        check_task("my-task")

Each check is also a function of its own taking the task instance, so a failing one can be rerun alone:
the static ones (:mod:`iclrbench.testing.static`: ``check_metadata``, ``check_requirements``,
``check_budgets_build``, ``check_params_defaults``) read what the task declares; the run ones
(:mod:`iclrbench.testing.runs`: ``check_claims``, ``check_gym_envs``, ``check_runs``,
``check_determinism``, ``check_batched``) run its code.

:func:`evaluate_once` is one run through the runner's planning, for a task's own tests.
:func:`fake_run` / :func:`fake_runs` (:mod:`iclrbench.testing.fakes`) build :class:`RunResult` s without
running anything.
"""

from __future__ import annotations

from iclrbench.testing.contract import check_task
from iclrbench.testing.fakes import fake_run, fake_runs
from iclrbench.testing.report import CheckOutcome, CheckReport, TaskContractError
from iclrbench.testing.runs import (
    CLAIM_BUDGETS,
    SAME_RTOL,
    RunCache,
    RunFailed,
    check_batched,
    check_claims,
    check_determinism,
    check_gym_envs,
    check_runs,
    evaluate_once,
    has_batched_path,
)
from iclrbench.testing.static import (
    KEBAB,
    check_budgets_build,
    check_metadata,
    check_params_defaults,
    check_requirements,
)

__all__ = [
    "CLAIM_BUDGETS",
    "KEBAB",
    "SAME_RTOL",
    "CheckOutcome",
    "CheckReport",
    "RunCache",
    "RunFailed",
    "TaskContractError",
    "check_batched",
    "check_budgets_build",
    "check_claims",
    "check_determinism",
    "check_gym_envs",
    "check_metadata",
    "check_params_defaults",
    "check_requirements",
    "check_runs",
    "check_task",
    "evaluate_once",
    "fake_run",
    "fake_runs",
    "has_batched_path",
]
