"""Declared resources and the processes the runner starts: ``-j`` counts process slots, workers and
``--timeout`` children never outlive their driver, Ctrl-C stops a parallel sweep within seconds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iclrbench import executors, runner
from iclrbench.core import catalog
from iclrbench.core.errors import UserError
from iclrbench.core.result import accelerator, run_provenance
from iclrbench.core.store import ResultStore
from iclrbench.core.task import Requirement, Resources
from iclrbench.executors import ProcessExecutor, make_executor, max_jobs
from tests.conftest import BenchRunner, plugin_env

pytestmark = pytest.mark.usefixtures("plugin")


def _timed_sleep(chunk: tuple[int, float]) -> tuple[int, float, float]:
    """A chunk's (id, start, end) in wall time, after sleeping its given seconds."""
    start = time.time()
    time.sleep(chunk[1])
    return chunk[0], start, time.time()


def _overlaps(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_process_slots_never_exceed_jobs_and_a_heavy_chunk_runs_alone() -> None:
    chunks = [(0, 1.0), (1, 0.5), (2, 0.5), (3, 1.0), (4, 0.5)]
    weights = [2, 1, 1, 2, 1]
    with ProcessExecutor(2) as pool:
        # both workers started first: the pool starts a worker on demand, and on loaded cores a start took
        # longer than a light chunk, which then ran on the other worker, after its neighbour (CI, stop 55)
        list(pool.map(_timed_sleep, [(-1, 0.3), (-2, 0.3)]))
        spans = {i: (s, e) for _, (i, s, e) in pool.map(_timed_sleep, chunks, weights)}
    assert sorted(spans) == [0, 1, 2, 3, 4]
    for heavy in (0, 3):
        others = [i for i in spans if i != heavy]
        assert not any(_overlaps(spans[heavy], spans[i]) for i in others), spans
    # the light chunks do share the two slots: the pool is not serial
    assert _overlaps(spans[1], spans[2]) or _overlaps(spans[2], spans[4]) or _overlaps(spans[1], spans[4])


def test_a_chunk_heavier_than_the_pool_still_runs() -> None:
    with ProcessExecutor(2) as pool:
        out = list(pool.map(_timed_sleep, [(0, 0.0)], [8]))
    assert out[0][1][0] == 0


def test_the_runner_asks_the_task_for_its_resources(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[int]] = []
    real_map = ProcessExecutor.map

    def spy(self, fn, chunks, weights=None):  # type: ignore[no-untyped-def]
        seen.append(list(weights or []))
        return real_map(self, fn, chunks, weights)

    monkeypatch.setattr(ProcessExecutor, "map", spy)
    specs = runner.plan("noop", ["constant"], [0, 1, 2], "smoke", {"processes": "2"})
    report = runner.run_specs(specs, ResultStore(db), jobs=2, executor="process")
    assert report.ran == 3 and report.failed == 0
    assert seen and all(w == 2 for ws in seen for w in ws)
    assert catalog.get_task("noop").resources(specs[0].config and _config(processes=3)) == Resources(3)


def _config(**overrides: object) -> object:
    return catalog.get_task("noop").make_config("smoke", {k: str(v) for k, v in overrides.items()})


def test_resources_refuse_a_run_of_no_process() -> None:
    with pytest.raises(ValueError, match="at least one process"):
        Resources(processes=0)


def test_jobs_beyond_what_the_machine_allows_are_refused_in_one_line(bench: BenchRunner, db: Path) -> None:
    with pytest.raises(UserError, match="thrashes"):
        make_executor("process", max_jobs() + 1)
    code, _, err = bench("run", "noop", "constant", "--seeds", "0-1", "-j", "10000", "--db", db)
    assert code == 2 and err.count("\n") == 1 and "--jobs 10000" in err
    assert not db.exists() or ResultStore(db).count() == 0


def test_a_non_finite_metric_fails_the_run(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    algo = catalog.get_algorithm("noop", "uniform")
    monkeypatch.setattr(algo, "score", lambda self, seed: float("nan"))
    report = runner.run_specs(runner.plan("noop", ["uniform"], [0], "smoke"), ResultStore(db))
    (result,) = report.results
    assert result.status == "failed" and "NonFiniteMetric: score=nan" in result.error


def test_setting_a_parameter_of_an_algorithm_not_in_the_run_is_refused() -> None:
    with pytest.raises(UserError, match="not among the algorithms of this run"):
        runner.plan("noop", ["constant"], [0], "smoke", {"uniform.anything": "1"})


def test_timeout_children_do_not_start_with_a_bare_fork() -> None:
    assert executors.child_context().get_start_method() in {"forkserver", "spawn"}


def test_a_missing_requirement_makes_the_task_unavailable_with_its_pip_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    task_cls = type(catalog.get_task("noop"))
    monkeypatch.setattr(task_cls, "requires", Requirement("gpu", ("no_such_module_xyz",)))
    line = task_cls.unavailable()
    assert line == "noop needs no_such_module_xyz: pip install 'iclrbench[gpu]'"
    with pytest.raises(UserError) as info:
        runner.plan("noop", ["constant"], [0], "smoke")
    assert str(info.value) == line


def test_no_accelerator_is_recorded_without_one(monkeypatch: pytest.MonkeyPatch) -> None:
    class FakeCuda:
        @staticmethod
        def is_available() -> bool:
            return False

    class FakeTorch:
        cuda = FakeCuda

    monkeypatch.setitem(sys.modules, "torch", FakeTorch)
    assert accelerator() is None and "accelerator" not in run_provenance()


def test_an_accelerator_is_recorded_by_name_memory_and_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    class Props:
        name, total_memory = "NVIDIA H200", 141 * 2**30

    class FakeCuda:
        is_available = staticmethod(lambda: True)
        current_device = staticmethod(lambda: 0)
        device_count = staticmethod(lambda: 1)
        get_device_properties = staticmethod(lambda i: Props)

    class FakeTorch:
        cuda = FakeCuda

        class version:  # mirrors torch.version
            cuda = "12.8"

    monkeypatch.setitem(sys.modules, "torch", FakeTorch)
    gpu = run_provenance()["accelerator"]
    assert gpu["name"] == "NVIDIA H200" and gpu["memory_gib"] == 141.0 and gpu["cuda"] == "12.8"


# ------------------------------------------------------------------------------- processes left behind
def _children(pid: int) -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.add(int(entry.name))
    return out


def _descendants(pid: int) -> set[int]:
    found, frontier = set(), {pid}
    while frontier:
        kids = set().union(*(_children(p) for p in frontier)) - found
        found |= kids
        frontier = kids
    return found


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for p in pids:
        try:
            state = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(p)
    return alive


def _start_sleepy_sweep(db: Path, *extra: str) -> tuple[subprocess.Popen[bytes], set[int]]:
    cmd = [sys.executable, "-m", "iclrbench.cli", "run", "noop", "constant", "--seeds", "0-5"]
    cmd += ["--set", "sleep=60", "-j", "2", "--db", str(db), *extra]
    proc = subprocess.Popen(cmd, env=plugin_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    workers: set[int] = set()
    while time.time() < deadline and len(workers) < 2:
        time.sleep(0.3)
        workers = _descendants(proc.pid)
    assert len(workers) >= 2, "the sweep's workers never started"
    time.sleep(1.0)  # the workers are inside their runs' sleep
    return proc, _descendants(proc.pid)


def _wait_gone(pids: set[int], seconds: float = 10.0) -> set[int]:
    deadline = time.time() + seconds
    while time.time() < deadline and _alive(pids):
        time.sleep(0.2)
    return _alive(pids)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process table from /proc")
@pytest.mark.parametrize("timeout", [[], ["--timeout", "120"]], ids=["pool", "pool+timeout-children"])
def test_ctrl_c_stops_a_parallel_sweep_and_its_workers_within_seconds(
    tmp_path: Path, timeout: list[str]
) -> None:
    proc, workers = _start_sleepy_sweep(tmp_path / "r.sqlite", *timeout)
    start = time.time()
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=15)
    assert time.time() - start < 10 and proc.returncode != 0
    assert not _wait_gone(workers), "workers outlived the interrupted sweep"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process table from /proc")
@pytest.mark.parametrize("timeout", [[], ["--timeout", "120"]], ids=["pool", "pool+timeout-children"])
def test_kill_9_of_the_driver_leaves_no_worker_behind(tmp_path: Path, timeout: list[str]) -> None:
    proc, workers = _start_sleepy_sweep(tmp_path / "r.sqlite", *timeout)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=15)
    assert not _wait_gone(workers), "workers outlived their killed driver"


def test_declared_heavy_imports_happen_before_the_clock_starts(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first run in a process does not pay for importing the task's packages (torch: ~1 s)."""
    (tmp_path / "slow_to_import_xyz.py").write_text("import time\ntime.sleep(1.5)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "slow_to_import_xyz", raising=False)
    task_cls = type(catalog.get_task("noop"))
    monkeypatch.setattr(task_cls, "requires", Requirement("", ("slow_to_import_xyz",)))
    (result,) = runner.run_specs(runner.plan("noop", ["constant"], [0], "smoke"), ResultStore(db)).results
    assert result.status == "ok" and "slow_to_import_xyz" in sys.modules
    assert result.wall_s < 1.0, "the import's 1.5 s were counted in the run"


def _die_on_zero(chunk: int) -> int:
    if chunk == 0:
        os._exit(9)  # a worker killed mid-run (out of memory, segfault)
    time.sleep(0.3)
    return chunk


def test_a_dead_worker_fails_its_chunks_and_the_rest_of_the_sweep_still_runs() -> None:
    with ProcessExecutor(2) as pool:
        out = dict(pool.map(_die_on_zero, list(range(6))))
    assert sorted(out) == list(range(6))
    assert not any(isinstance(v, int) for k, v in out.items() if k == 0)
    assert any(isinstance(v, int) for v in out.values()), "no chunk ran after the pool broke"
