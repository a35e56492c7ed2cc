"""Every registered task keeps the task contract (:func:`iclrbench.testing.check_task` at ``smoke``): a new
task is checked the day its entry point lands, with no list here to edit."""

from __future__ import annotations

import time

import pytest

from iclrbench.core import catalog
from iclrbench.testing import TaskContractError, check_task

#: tasks whose check_task takes over ~60 s on 2 cores (measured), run with the slow tests. Measured on
#: 2026-12-03: bilateral 0.8 s, dp-audit 20 s, protein 22 s, crystals 33 s, graph pooling 147 s (24 runs)
SLOW: frozenset[str] = frozenset({"heterophilic-graph-pooling"})

#: built-in tasks that break the contract today -> (the check that fails, why). Only that check failing
#: counts as the known breach; once the task is fixed the test fails until its entry is removed here.
KNOWN_BREACHES: dict[str, tuple[str, str]] = {
    "symmetric-crystal-generation": (
        "check_runs",
        "at smoke (coverage_samples=0) every generator omits the declared metrics coverage_recall, "
        "coverage_precision, unique_templates and novel_templates",
    ),
}


def _params() -> list[object]:
    return [
        pytest.param(task_id, marks=[pytest.mark.slow] if task_id in SLOW else [], id=task_id)
        for task_id in catalog.task_ids()
    ]


@pytest.mark.parametrize("task_id", _params())
def test_task_keeps_the_contract(task_id: str, record_property: pytest.RecordProperty) -> None:
    reason = next(cls for cls in catalog.task_classes() if cls.id == task_id).unavailable()
    if reason is not None:
        pytest.skip(reason)  # names the pip line that installs what is missing
    known = KNOWN_BREACHES.get(task_id)
    start = time.perf_counter()
    try:
        report = check_task(task_id)
    except TaskContractError as exc:
        failed = {name for name, _ in exc.problems}
        if known is not None and failed == {known[0]}:
            pytest.xfail(f"{known[0]}: {known[1]}")
        raise
    finally:
        record_property("check_task_seconds", round(time.perf_counter() - start, 2))
    print(f"\n{report}")
    assert known is None, f"{task_id} now passes {known[0]}: remove it from KNOWN_BREACHES"
