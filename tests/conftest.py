"""Shared fixtures: a throwaway results database, the ``bench`` CLI called in-process (and held to the
bad-input contract by ``refused``), and a third-party plugin (tests/plugin: a dist-info with real entry
points) installed for one test."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from iclrbench.cli import main
from iclrbench.core import catalog
from iclrbench.core.result import RunResult
from iclrbench.testing import fake_run

# no per-example deadline: tests never assert a wall time, and on 2 loaded cores a 200 ms deadline failed
# examples that were right (a GDP inversion took 277 ms beside other work)
settings.register_profile("iclrbench", deadline=None)
settings.load_profile("iclrbench")

PLUGIN_DIR = Path(__file__).parent / "plugin"
PLUGIN_MODULE = "iclrbench_testplugin"

TASK = "contextual-bilateral-trade"

#: set to 1 to run the tests marked ``long`` (CI does; ``make test`` alone leaves them out)
LONG_TESTS = "ICLRBENCH_LONG_TESTS"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the ``long`` tests (a minute or more each) unless asked for: a long *timing* (under
    ``tests/perf``) runs when benchmarks do (``make perf``); any other long test under
    ``ICLRBENCH_LONG_TESTS=1`` (CI) or when ``-m`` names it. Together they would double ``make test``'s
    time on 2 cores."""
    named = "long" in (config.getoption("-m") or "")
    benchmarking = bool(config.getoption("benchmark_enable", False)) or not config.getoption(
        "benchmark_disable", False
    )
    long_tests = os.environ.get(LONG_TESTS) == "1" or named
    perf = Path(__file__).parent / "perf"
    timing = pytest.mark.skip(reason="a long timing: make perf runs it (pytest-benchmark enabled)")
    skip = pytest.mark.skip(reason=f"long (a minute or more): {LONG_TESTS}=1 runs it, as CI does")
    for item in items:
        if item.get_closest_marker("long") is None:
            continue
        if perf in Path(str(item.path)).parents:
            if not (benchmarking or named):
                item.add_marker(timing)
        elif not long_tests:
            item.add_marker(skip)


def worker_group(nodeid: str, task_ids: frozenset[str]) -> str:
    """Which tests share a pytest-xdist worker (``make test`` runs two): all of one task's tests (its folder,
    its perf module, and the shared checks parametrized by its id), so that the task's cached artifacts are
    built once and its runs (Flower's Ray runtime, llama.cpp's timings) never overlap one another; any other
    test with the rest of its module, whose fixtures are built once per module."""
    path, _, name = nodeid.partition("::")
    parts = path.split("/")
    if len(parts) > 2 and parts[0] == "tests" and parts[1].replace("_", "-") in task_ids:
        return parts[1].replace("_", "-")
    stem = parts[-1].removeprefix("test_").removesuffix(".py").removesuffix("_perf").replace("_", "-")
    if stem in task_ids:
        return stem
    named = [t for t in task_ids if t in name.partition("[")[2]]
    return max(named, key=len) if named else path


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: no error where it is not installed
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadscope`` with the scope of :func:`worker_group`. (pytest-xdist's ``loadgroup`` marks
    do not take under pytest 9.2: it renames the test ids, which that pytest no longer reads back.)"""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    task_ids = frozenset(catalog.task_ids())

    class TaskScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid, task_ids)

    return TaskScheduling(config, log)


BenchRunner = Callable[..., tuple[int, str, str]]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "results.sqlite"


@pytest.fixture
def bench(capsys: pytest.CaptureFixture[str]) -> BenchRunner:
    """``bench(*args) -> (exit code, stdout, stderr)``."""

    def run(*args: object) -> tuple[int, str, str]:
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


Refused = Callable[..., str]


@pytest.fixture
def refused(bench: BenchRunner, db: Path) -> Refused:
    """``refused(*args) -> the error line``: runs ``bench *args --db DB`` and holds it to the contract for
    bad input (exit code 2, one ``bench: error:`` line on stderr, no traceback, no run stored), so that a
    task's tests state only what its own refusals say."""

    def run(*args: object) -> str:
        code, out, err = bench(*args, "--db", db)
        assert code == 2, (out, err)
        assert err.count("\n") == 1 and err.startswith("bench: error:"), err
        assert "Traceback" not in err
        if db.exists():  # a refusal after the store was opened leaves it without runs
            with contextlib.closing(sqlite3.connect(db)) as conn:
                assert conn.execute("SELECT count(*) FROM runs").fetchone() == (0,)
        return err.strip()

    return run


def plugin_env(**extra: str) -> dict[str, str]:
    """The environment of a subprocess that sees the test plugin (PYTHONPATH) and no terminal."""
    path = os.pathsep.join(p for p in (str(PLUGIN_DIR), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The ``noop`` task and its algorithms, found through the entry points as a pip-installed plugin
    would be; gone again after the test (registries restored, module unloaded)."""
    # the built-in state, every algorithm module imported, before the plugin is on the path: a module
    # first imported during the test would be unregistered by the restore below, yet stay imported
    for task_cls in catalog.task_classes():
        if task_cls.unavailable() is None:
            catalog.algorithms(task_cls.id)
    monkeypatch.syspath_prepend(str(PLUGIN_DIR))
    monkeypatch.setenv("PYTHONPATH", plugin_env()["PYTHONPATH"])  # spawned workers (dask) too
    saved_tasks = dict(catalog._tasks._items)
    saved_algorithms = {k: dict(v._items) for k, v in catalog._algorithms.items()}
    sys.modules.pop(PLUGIN_MODULE, None)
    catalog.refresh()
    yield PLUGIN_DIR
    sys.modules.pop(PLUGIN_MODULE, None)
    catalog._tasks._items.clear()
    catalog._tasks._items.update(saved_tasks)
    for name in list(catalog._algorithms):
        if name not in saved_algorithms:
            del catalog._algorithms[name]
        else:
            catalog._algorithms[name]._items.clear()
            catalog._algorithms[name]._items.update(saved_algorithms[name])


@pytest.fixture
def make_run() -> Callable[..., RunResult]:
    """The shared fake-run builder, :func:`iclrbench.testing.fake_run` (``make_run(task, algorithm, seed,
    metrics, role=..., config=...)``); :func:`iclrbench.testing.fake_runs` makes one per seed."""
    return fake_run
