"""The papers' claims at the budget they are defined at (``small``), from real runs: each claim's verdict
must be the one the task declares it measured (``Claim.expected``), reproduced or not. The tasks and claims
come from the catalog; a claim without ``expected`` is left to ``bench claims`` (its runs are too long for
the test suite: symmetric-crystal-generation's take about 20 CPU-minutes).

Slow (minutes on 2 cores); runs in CI too. Every run is seeded, so these are exact reproductions of
``bench claims TASK`` on this kind of machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from iclrbench.claims import check_claims
from iclrbench.core import catalog
from iclrbench.core.store import ResultStore


def _tasks_with_expected_verdicts() -> list[str]:
    return [
        cls.id
        for cls in catalog.task_classes()
        if cls.unavailable() is None and any(c.expected is not None for c in cls.claims)
    ]


@pytest.mark.slow
@pytest.mark.parametrize("task", _tasks_with_expected_verdicts())
def test_claims_give_their_measured_verdicts_at_small(task: str, tmp_path: Path) -> None:
    claims = {c.id: c for c in catalog.get_task(task).claims}
    with ResultStore(tmp_path / "r.sqlite") as store:
        verdicts = check_claims(task, "small", store, jobs=2)
    assert {v.id for v in verdicts} == set(claims)
    for v in verdicts:
        if claims[v.id].expected is not None:
            assert v.verdict == claims[v.id].expected, (v.id, v.verdict, v.measured)
