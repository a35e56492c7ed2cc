"""Runner and leaderboard speed (issue 6 targets): overhead per run on a no-op task (< 5 ms), ``-j 2``
throughput over serial on a CPU-bound task (>= 1.7x on 2 cores), the HTML page over 10,000 stored runs
(< 3 s). Figures land in the benchmark's extra_info; nothing here asserts a wall time."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from iclrbench import runner
from iclrbench.core.result import RunResult, provenance
from iclrbench.core.store import ResultStore
from iclrbench.leaderboard.page import write_leaderboard_html
from iclrbench.testing import fake_run

pytestmark = pytest.mark.usefixtures("plugin")

#: pure-Python iterations per CPU-bound run: about 0.7 s here
WORK = 16_000_000


def test_runner_overhead_per_noop_run(benchmark: pytest.FixtureRequest, tmp_path: Path) -> None:
    n = 200
    specs = runner.plan("noop", ["constant"], list(range(n)), "smoke", {})
    counter = iter(range(10_000))

    def fresh() -> tuple[tuple[list[runner.RunSpec], ResultStore], dict]:
        return (specs, ResultStore(tmp_path / f"r{next(counter)}.sqlite")), {}

    def sweep(specs: list[runner.RunSpec], store: ResultStore) -> runner.SweepReport:
        return runner.run_specs(specs, store)

    start = time.perf_counter()
    report = benchmark.pedantic(sweep, setup=fresh, rounds=5, iterations=1)
    assert report.ran == n and report.failed == 0
    # with --benchmark-disable (make test) pedantic runs once and keeps no stats
    seconds = benchmark.stats.stats.mean if benchmark.stats else time.perf_counter() - start
    per_run_ms = seconds / n * 1000
    benchmark.extra_info["ms_per_run"] = round(per_run_ms, 3)
    print(f"\nrunner overhead: {per_run_ms:.3f} ms per no-op run (store lookup, execute, commit)")


def _cpu_bound(tmp_path: Path, jobs: int, tag: str) -> float:
    specs = runner.plan("noop", ["constant"], list(range(8)), "smoke", {"work": str(WORK)})
    store = ResultStore(tmp_path / f"{tag}.sqlite")
    start = time.perf_counter()
    report = runner.run_specs(specs, store, jobs=jobs)
    assert report.ran == 8 and report.failed == 0
    return time.perf_counter() - start


def test_process_pool_throughput_over_serial(benchmark: pytest.FixtureRequest, tmp_path: Path) -> None:
    serial = min(_cpu_bound(tmp_path, 1, f"s{i}") for i in range(3))
    counter = iter(range(100))
    parallel = benchmark.pedantic(
        lambda: _cpu_bound(tmp_path, 2, f"p{next(counter)}"), rounds=2, iterations=1
    )
    speedup = serial / (benchmark.stats.stats.min if benchmark.stats else parallel)
    benchmark.extra_info.update(serial_s=round(serial, 3), speedup=round(speedup, 2))
    print(
        f"\n-j 2 over serial: 8 CPU-bound runs {serial:.2f} s serial, {parallel:.2f} s -j 2: {speedup:.2f}x"
    )


def _synthetic_runs(n: int) -> list[RunResult]:
    """n runs over 4 tasks x 5 configs x 10 algorithms x seeds, a third with 100-point curves."""
    rng = np.random.default_rng(0)
    prov = dict(provenance())
    runs = []
    for i in range(n):
        task, config, algo, seed = i % 4, (i // 4) % 5, (i // 20) % 10, i // 200
        curves = {}
        if algo % 3 == 0:
            y = np.cumsum(rng.random(100)).tolist()
            curves = {"regret": {"x": list(range(100)), "y": y, "x_label": "t", "y_label": "regret"}}
        runs.append(
            fake_run(
                f"synthetic-{task}",
                f"algo-{algo}",
                seed,
                {"score": float(rng.normal(algo, 1)), "seconds": float(rng.random())},
                role="reference" if algo == 0 else "baseline",
                config={"size": config},
                budget="small",
                curves=curves,
                wall_s=1.0,
                provenance=prov,
                created_at="2026-12-02T00:00:00+00:00",
            )
        )
    return runs


def test_leaderboard_html_over_10000_runs(benchmark: pytest.FixtureRequest, tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "big.sqlite")
    store.put_many(_synthetic_runs(10_000))
    assert store.count() == 10_000
    target = tmp_path / "page.html"
    start = time.perf_counter()
    benchmark.pedantic(write_leaderboard_html, args=(store, target), rounds=3, iterations=1)
    seconds = benchmark.stats.stats.mean if benchmark.stats else time.perf_counter() - start
    size_mb = target.stat().st_size / 1e6
    benchmark.extra_info.update(page_mb=round(size_mb, 2))
    print(f"\nleaderboard --html over 10,000 runs: {seconds:.2f} s, {size_mb:.1f} MB page")
