"""Check a task's claims from real runs: plan every run the claims need, reuse what is stored, run the
rest, judge, and store the verdicts (shown by ``bench claims`` and on the leaderboard page)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from iclrbench import runner
from iclrbench.core import catalog
from iclrbench.core import config as cfg
from iclrbench.core.artifact import ARTIFACTS_KEY, summarise
from iclrbench.core.result import RunResult
from iclrbench.core.store import ResultStore
from iclrbench.core.task import ClaimResult


def plan_claims(task_id: str, budget: str) -> list[tuple[str, list[list[runner.RunSpec]]]]:
    """Per claim of the task: its id and, per request, the run specs."""
    task = catalog.get_task(task_id)
    planned = []
    for claim in task.claims:
        groups = [
            runner.plan(task_id, [req.algorithm], req.seeds, budget, dict(req.overrides))
            for req in claim.requests(budget)
        ]
        planned.append((claim.id, groups))
    return planned


def check_claims(
    task_id: str,
    budget: str,
    store: ResultStore,
    *,
    force: bool = False,
    jobs: int = 1,
    on_result: Callable[[RunResult, bool], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
    **execution: Any,
) -> list[ClaimResult]:
    """Run (or reuse) every run the task's claims need at ``budget``, judge each claim, store verdicts.
    ``execution`` goes to :func:`runner.run_specs` (executor, scheduler, timeout, retries)."""
    task = catalog.get_task(task_id)
    planned = plan_claims(task_id, budget)
    all_specs = list({s.key: s for _, groups in planned for g in groups for s in g}.values())
    if on_plan is not None:
        on_plan(len(all_specs))
    report = runner.run_specs(all_specs, store, force=force, jobs=jobs, on_result=on_result, **execution)
    by_key = {r.key: r for r in report.results}
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    base_config_hash = cfg.stable_hash(cfg.as_dict(task.make_config(budget)))
    verdicts = []
    for claim_id, groups in planned:
        claim = task.claim(claim_id)
        runs = [[by_key[s.key] for s in g] for g in groups]
        verdict, measured = claim.judge(runs)
        artifacts = summarise([r.provenance for g in runs for r in g if r.status == "ok"])
        if artifacts:  # what the verdict was measured on, beside it
            measured = {**measured, ARTIFACTS_KEY: artifacts}
        result = ClaimResult(
            task=task.id,
            id=claim.id,
            statement=claim.statement,
            verdict=verdict,
            measured=measured,
            budget=budget,
            task_version=task.version,
            config_hash=base_config_hash,
            claim_version=claim.stored_version,
        )
        store.put_claim(result, now)
        verdicts.append(result)
    return verdicts
