"""``bench list`` cold (a fresh interpreter, every extra installed): the target is under 0.5 s on 2 cores.

The peer is a bare interpreter start (``python -c pass``), the floor every command pays; the figures and
their ratio land in extra_info, and nothing asserts a wall time."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest


def _run(*args: str) -> str:
    out = subprocess.run([sys.executable, *args], capture_output=True, text=True, check=True)
    return out.stdout


def _cold_seconds(*args: str, rounds: int = 5) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        _run(*args)
        best = min(best, time.perf_counter() - start)
    return best


def test_bench_list_cold(benchmark: pytest.FixtureRequest) -> None:
    start = time.perf_counter()
    listing = benchmark.pedantic(_run, args=("-m", "iclrbench.cli", "list"), rounds=5, iterations=1)
    assert "contextual-bilateral-trade" in listing
    seconds = benchmark.stats.stats.min if benchmark.stats else time.perf_counter() - start
    bare = _cold_seconds("-c", "pass")
    benchmark.extra_info["seconds_cold"] = round(seconds, 3)
    benchmark.extra_info["seconds_bare_interpreter"] = round(bare, 3)
    benchmark.extra_info["ratio_to_bare_interpreter"] = round(seconds / bare, 1)
