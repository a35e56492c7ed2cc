"""Every registered task keeps the task contract (:func:`iclrbench.testing.check_task` at ``smoke``): a new
task is checked the day its entry point lands, with no list here to edit."""

from __future__ import annotations

import time

import pytest

from iclrbench.core import catalog
from iclrbench.testing import check_task


@pytest.mark.parametrize("task_id", catalog.task_ids())
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
