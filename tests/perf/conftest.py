"""Perf benchmarks of torch workloads run on one torch thread, as the tasks do."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from iclrbench.models.torch_threads import one_torch_thread


@pytest.fixture
def single_thread() -> Iterator[None]:
    with one_torch_thread():
        yield
