"""Every registered task keeps the task contract (:func:`iclrbench.testing.check_task` at ``smoke``): a new
task is checked the day its entry point lands, with no list here to edit."""

from __future__ import annotations

import time

import pytest

from iclrbench.core import catalog
from iclrbench.testing import check_task

#: a task whose contract check takes longer (its smoke budget's ``check_minutes``) is marked ``long``
CONTRACT_TEST_MINUTES = 1.0


def _tasks() -> list[object]:
    out: list[object] = []
    for cls in catalog.task_classes():
        minutes = cls.budgets["smoke"].check_minutes if "smoke" in cls.budgets else None
        long = minutes is not None and minutes > CONTRACT_TEST_MINUTES
        out.append(pytest.param(cls.id, marks=[pytest.mark.long] if long else []))
    return out


@pytest.mark.parametrize("task_id", _tasks())
def test_task_keeps_the_contract(task_id: str, record_property: pytest.RecordProperty) -> None:
    reason = next(cls for cls in catalog.task_classes() if cls.id == task_id).unavailable()
    if reason is not None:
        pytest.skip(reason)  # names the pip line that installs what is missing
    start = time.perf_counter()
    try:
        report = check_task(task_id)  # raises TaskContractError naming every failed check
    finally:
        record_property("check_task_seconds", round(time.perf_counter() - start, 2))
    print(f"\n{report}")
    assert report.ok and report.runs > 0
