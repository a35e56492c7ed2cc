"""``bench list`` cold (a fresh interpreter, every extra installed): the target is under 1 s on 2 cores.
The figure lands in extra_info; nothing asserts a wall time."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest


def _bench_list() -> str:
    out = subprocess.run(
        [sys.executable, "-m", "iclrbench.cli", "list"], capture_output=True, text=True, check=True
    )
    return out.stdout


def test_bench_list_cold(benchmark: pytest.FixtureRequest) -> None:
    start = time.perf_counter()
    listing = benchmark.pedantic(_bench_list, rounds=5, iterations=1)
    assert "contextual-bilateral-trade" in listing
    seconds = benchmark.stats.stats.min if benchmark.stats else time.perf_counter() - start
    benchmark.extra_info["seconds_cold"] = round(seconds, 3)
