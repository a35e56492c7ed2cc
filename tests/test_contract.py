"""Every registered task keeps the task contract (:func:`iclrbench.testing.check_task` at ``smoke``): a new
task is checked the day its entry point lands, with no list here to edit."""

from __future__ import annotations

import time

import pytest

from iclrbench.core import catalog
from iclrbench.testing import check_task

#: tasks whose check_task takes over ~60 s on 2 cores (measured), run with the slow tests. Measured on
#: 2026-12-03: bilateral 0.8 s, dp-audit 20 s, protein 22 s, crystals 33 s, graph pooling 147 s (24 runs)
SLOW: frozenset[str] = frozenset({"heterophilic-graph-pooling"})


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
    start = time.perf_counter()
    try:
        report = check_task(task_id)  # raises TaskContractError naming every failed check
    finally:
        record_property("check_task_seconds", round(time.perf_counter() - start, 2))
    print(f"\n{report}")
    assert report.ok and report.runs > 0
