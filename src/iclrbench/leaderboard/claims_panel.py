"""The claims panel: which verdict of each claim the page shows.

A claim is defined at one budget (``Claim.budget``, "small" unless the task says otherwise); smoke
runs are too small to decide most claims, so a verdict judged at another budget (the demo's smoke runs)
is not shown as if it answered the claim: the claim reads "not checked at this budget", with the
command that checks it. The overview's "claims reproduced" counts claims by the same rule.
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from iclrbench.core import catalog
from iclrbench.core.artifact import ARTIFACTS_KEY
from iclrbench.core.errors import UserError
from iclrbench.core.jsonsafe import finite
from iclrbench.core.task import Claim, ClaimResult

#: where a claim is judged when its definition cannot be read (its task is no longer installed)
DEFAULT_CLAIM_BUDGET: str = Claim.__dataclass_fields__["budget"].default


@dataclasses.dataclass(frozen=True)
class ClaimView:
    """One claim as the panel shows it: ``status`` is a verdict, or ``not_checked`` at its budget."""

    id: str
    statement: str
    budget: str
    status: str
    label: str
    measured: str = ""
    #: (artifact, its quality) for each trained model the verdict rests on, shown beside the verdict
    artifacts: tuple[tuple[str, str], ...] = ()
    detail: str = ""
    note: str = ""
    command: str = ""


def _declared_claims(task_id: str) -> dict[str, Claim]:
    """The task's claims by id; none for a task no longer installed (its verdicts are still shown)."""
    try:
        return {c.id: c for c in catalog.get_task(task_id).claims}
    except UserError:
        return {}


def _measured(figures: dict[str, Any]) -> str:
    return ", ".join(
        f"{k} = {json.dumps(finite(v), allow_nan=False, default=str)}" for k, v in figures.items()
    )


def claim_views(task_id: str, results: Sequence[ClaimResult]) -> list[ClaimView]:
    """Every claim of the task (declared, then any other stored), each with the verdict judged at the
    budget it is defined at, or "not checked at this budget" and the command that checks it."""
    declared = _declared_claims(task_id)
    stored: dict[str, list[ClaimResult]] = defaultdict(list)
    for r in results:
        stored[r.id].append(r)
    out = []
    for cid in dict.fromkeys([*declared, *stored]):
        claim = declared.get(cid)
        budget = claim.budget if claim else DEFAULT_CLAIM_BUDGET
        statement = claim.statement if claim else stored[cid][-1].statement
        at_budget = [r for r in stored.get(cid, []) if r.budget == budget]
        if at_budget:
            r = at_budget[-1]
            detail = []
            if getattr(r, "task_version", 0):
                detail.append(f"task v{r.task_version}")
            stored_version = getattr(r, "claim_version", 1)  # 1000 * (decision rule - 1) + claim version
            detail.append(f"rule v{stored_version % 1000}, decision rule v{stored_version // 1000 + 1}")
            if getattr(r, "config_hash", ""):
                detail.append(f"config {r.config_hash}")
            figures = dict(r.measured)
            artifacts = figures.pop(ARTIFACTS_KEY, None)
            out.append(
                ClaimView(
                    cid,
                    statement,
                    budget,
                    r.verdict,
                    r.verdict.replace("_", " "),
                    _measured(figures),
                    artifacts=tuple((str(k), str(v)) for k, v in artifacts.items())
                    if isinstance(artifacts, dict)
                    else (),
                    detail=" · ".join(detail),
                )
            )
            continue
        others = sorted({r.budget for r in stored.get(cid, [])})
        note = f"Defined at the {budget} budget; " + (
            f"the stored verdict is from {', '.join(others)} runs, which do not decide it."
            if others
            else "no verdict stored at that budget."
        )
        out.append(
            ClaimView(
                cid,
                statement,
                budget,
                "not_checked",
                "not checked at this budget",
                note=note,
                command=f"bench claims {task_id} --budget {budget}",
            )
        )
    return out
