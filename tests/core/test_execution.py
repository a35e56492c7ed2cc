"""Executors, timeouts, retries, sweep files and shards, on the test plugin's ``noop`` task."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from iclrbench import runner, sweep
from iclrbench.core.errors import UserError
from iclrbench.core.store import ResultStore
from tests.conftest import BenchRunner

pytestmark = pytest.mark.usefixtures("plugin")


def _specs(algorithms: list[str], seeds: range, **sets: object) -> list[runner.RunSpec]:
    return runner.plan("noop", algorithms, list(seeds), "smoke", {k: str(v) for k, v in sets.items()})


def test_the_plugin_task_arrives_through_its_entry_point(bench: BenchRunner) -> None:
    code, out, _ = bench("list", "--format", "json")
    assert code == 0
    noop = next(t for t in json.loads(out) if t["id"] == "noop")
    assert {a["name"] for a in noop["algorithms"]} >= {"constant", "uniform", "flaky"}


def test_a_task_installed_after_the_catalog_was_read_is_found_on_first_use() -> None:
    """A run's worker forks from a forkserver whose catalog was read when it started: a plugin installed
    since then (a notebook's pip install, or this suite's plugin after a sweep) is found by a scan on the
    miss, not refused as unknown."""
    from iclrbench.core import catalog

    del catalog._tasks._items["noop"]  # the catalog as read before the plugin was on the path
    assert "noop" not in catalog.task_ids()
    assert catalog.get_task("noop").id == "noop"


@pytest.mark.parametrize("executor", ["serial", "process"])
def test_every_executor_stores_every_run_once(db: Path, executor: str) -> None:
    store = ResultStore(db)
    report = runner.run_specs(_specs(["constant", "uniform"], range(6)), store, jobs=2, executor=executor)
    assert report.ran == 12 and report.failed == 0
    runs = store.runs("noop")
    assert len(runs) == 12 and {r.provenance["executor"] for r in runs} == {executor}
    again = runner.run_specs(_specs(["constant", "uniform"], range(6)), store, jobs=2, executor=executor)
    assert again.reused == 12 and again.ran == 0


def test_dask_local_cluster_runs_and_only_the_driver_writes(db: Path) -> None:
    pytest.importorskip("distributed")
    store = ResultStore(db)
    specs = _specs(["constant", "uniform"], range(4), work=2000)
    report = runner.run_specs(specs, store, jobs=2, executor="dask")
    assert report.ran == 8 and report.failed == 0
    runs = store.runs("noop")
    assert sorted((r.algorithm, r.seed) for r in runs) == sorted((s.algorithm, s.seed) for s in specs)
    assert all(r.provenance["executor"] == "dask" for r in runs)
    serial = {
        (r.algorithm, r.seed): r.metrics
        for r in runner.run_specs(specs, ResultStore(db.with_name("s.db"))).results
    }
    assert {(r.algorithm, r.seed): r.metrics for r in runs} == serial  # the same numbers wherever they ran


def test_an_unreachable_scheduler_is_one_line_and_exit_2(bench: BenchRunner, db: Path) -> None:
    pytest.importorskip("distributed")
    code, _, err = bench(
        "run", "noop", "constant", "--seeds", "0", "--scheduler", "tcp://127.0.0.1:9", "--db", db
    )
    assert code == 2 and err.count("\n") == 1 and "scheduler" in err


def test_a_run_past_the_timeout_fails_alone_and_the_sweep_goes_on(db: Path) -> None:
    store = ResultStore(db)
    slow = _specs(["constant"], range(1), sleep=30)
    fast = _specs(["uniform"], range(2))
    start = time.perf_counter()
    report = runner.run_specs([*slow, *fast], store, timeout=0.5)
    assert time.perf_counter() - start < 15
    by_algo = {r.algorithm: r for r in report.results}
    assert by_algo["constant"].status == "failed" and "TimeoutError" in by_algo["constant"].error
    assert by_algo["uniform"].status == "ok" and report.failed == 1
    assert store.get(slow[0].key).status == "failed"


def test_a_timeout_that_is_not_reached_changes_nothing(db: Path) -> None:
    specs = _specs(["uniform"], range(3))
    limited = runner.run_specs(specs, ResultStore(db), timeout=30)
    free = runner.run_specs(specs, ResultStore(db.with_name("free.db")))
    assert [r.metrics for r in limited.results] == [r.metrics for r in free.results]


def test_retries_turn_a_transient_failure_into_a_result(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLAKY_DIR", str(tmp_path))
    store = ResultStore(db)
    report = runner.run_specs(_specs(["flaky"], range(3)), store, retries=1)
    assert report.failed == 0 and all(r.metrics["score"] == 0.5 for r in report.results)
    assert all(r.provenance["attempt"] == 2 for r in store.runs("noop"))


def test_without_retries_a_failure_is_stored_and_retried_next_time(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLAKY_DIR", str(tmp_path))
    store = ResultStore(db)
    first = runner.run_specs(_specs(["flaky"], range(2)), store)
    assert first.failed == 2 and {r.status for r in store.runs("noop")} == {"failed"}
    assert "OSError: transient failure" in store.runs("noop")[0].error
    second = runner.run_specs(_specs(["flaky"], range(2)), store)
    assert second.ran == 2 and second.failed == 0 and len(store.runs("noop")) == 2


@pytest.mark.parametrize(
    "args",
    [
        ["--timeout", "0"],
        ["--retries", "-1"],
        ["--scheduler", "tcp://127.0.0.1:8786", "--executor", "process"],
        ["--executor", "slurm"],
        ["-j", "0"],
    ],
)
def test_bad_execution_options_are_one_line_and_exit_2(bench: BenchRunner, db: Path, args: list[str]) -> None:
    code, _, err = bench("run", "noop", "constant", "--db", db, *args)
    assert code == 2 and err.startswith("bench: error:") and err.count("\n") == 1
    assert not db.exists() or ResultStore(db).count() == 0


# ------------------------------------------------------------------------------------------- sweeps
SWEEP = """
budget: smoke
seeds: 0-2
tasks:
  noop:
    - algorithms: [constant, uniform]
      grid: {work: [0, 10, 20]}
    - algorithms: [uniform]
      set: {work: 5}
"""


def test_a_sweep_file_is_the_grid_it_describes(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP)
    specs = sweep.plan_sweep(sweep.load_sweep(path))
    assert len(specs) == 2 * 3 * 3 + 3
    assert {s.config["work"] for s in specs} == {0, 5, 10, 20}
    assert len({s.key for s in specs}) == len(specs)


@pytest.mark.parametrize("count", [1, 2, 3, 7, 30])
def test_shards_are_disjoint_balanced_and_cover_the_sweep(tmp_path: Path, count: int) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP)
    specs = sweep.plan_sweep(sweep.load_sweep(path))
    slices = [sweep.shard(specs, i, count) for i in range(count)]
    keys = [s.key for part in slices for s in part]
    assert sorted(keys) == sorted(s.key for s in specs)
    assert max(map(len, slices)) - min(map(len, slices)) <= 1


def test_sweep_dry_run_counts_what_is_stored_and_runs_nothing(
    bench: BenchRunner, tmp_path: Path, db: Path
) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP)
    code, _, err = bench("sweep", path, "--shard", "0/3", "--db", db, "--quiet")
    assert code == 0
    code, out, err = bench("sweep", path, "--dry-run", "--db", db, "--format", "json")
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(lines) == 21 and sum(x["stored"] == "ok" for x in lines) == 7
    assert "21 runs: 7 already stored" in err and ResultStore(db).count() == 7
    for i in (1, 2):
        assert bench("sweep", path, "--shard", f"{i}/3", "--db", db, "--quiet")[0] == 0
    code, _, err = bench("sweep", path, "--dry-run", "--db", db)
    assert "21 runs: 21 already stored" in err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tasks: {noop: {algorithms: [constant]}}\nbudgt: smoke\n", "did you mean 'budget'"),
        ("tasks: {nope: {}}\n", "unknown task 'nope'"),
        ("tasks: {noop: {grid: {wrok: [1]}}}\n", "did you mean 'work'"),
        ("tasks: {noop: {algorithms: [constnt]}}\n", "did you mean 'constant'"),
        ("tasks: [noop\n", "not valid YAML"),
        ("budget: huge\ntasks: {noop: {}}\n", "sweep budget 'huge'"),
        ("- 1\n", "expected a mapping"),
    ],
)
def test_a_bad_sweep_file_is_one_line_and_exit_2(
    bench: BenchRunner, tmp_path: Path, db: Path, text: str, message: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    code, _, err = bench("sweep", path, "--db", db)
    assert code == 2 and message in err and err.count("\n") == 1


def test_a_bad_shard_is_refused() -> None:
    for text in ("3/3", "1", "a/b", "0/0"):
        with pytest.raises(UserError):
            sweep.parse_shard(text)
    assert sweep.parse_shard("2/8") == (2, 8)


def test_the_example_sweep_in_the_repository_plans() -> None:
    example = Path(__file__).resolve().parents[2] / "sweeps" / "example.yaml"
    specs = sweep.plan_sweep(sweep.load_sweep(example))
    assert len(specs) == 3 * 6 * 3 + 2 * 3


def test_dask_workers_enforce_the_timeout_too(db: Path) -> None:
    pytest.importorskip("distributed")
    store = ResultStore(db)
    specs = [*_specs(["constant"], range(1), sleep=30), *_specs(["uniform"], range(2))]
    report = runner.run_specs(specs, store, jobs=2, executor="dask", timeout=1.0)
    status = {(r.algorithm, r.seed): r.status for r in report.results}
    assert status == {("constant", 0): "failed", ("uniform", 0): "ok", ("uniform", 1): "ok"}
    assert "TimeoutError" in store.get(specs[0].key).error


def test_a_swallowed_ctrl_c_still_stops_the_sweep_after_the_run_in_hand(db: Path) -> None:
    from iclrbench.core import interrupt

    store = ResultStore(db)
    try:
        with pytest.raises(KeyboardInterrupt):
            runner.run_specs(
                _specs(["constant"], range(5)), store, on_result=lambda result, reused: interrupt.STOP.set()
            )
    finally:
        interrupt.STOP.clear()
    assert store.count() == 1 and store.runs("noop")[0].status == "ok"


def _record_prepare(monkeypatch: pytest.MonkeyPatch, fail: bool = False) -> list[object]:
    from iclrbench.core import catalog

    calls: list[object] = []
    task_cls = type(catalog.get_task("noop"))

    def prepare(self: object, config: object) -> None:
        calls.append(("prepare", config.sleep))  # type: ignore[attr-defined]
        if fail:
            raise RuntimeError("the shared data cannot be built")

    monkeypatch.setattr(task_cls, "prepare", prepare)
    return calls


def test_prepare_runs_once_per_config_in_the_driver_before_any_run(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _record_prepare(monkeypatch)
    announced: list[str] = []
    specs = _specs(["constant", "uniform"], range(3)) + _specs(["constant"], range(3), sleep=0.001)
    report = runner.run_specs(
        specs,
        ResultStore(db),
        on_result=lambda r, reused: calls.append(("run", r.seed)),
        on_prepare=announced.append,
    )
    assert report.ran == 9 and report.failed == 0
    assert calls[:2] == [("prepare", 0.0), ("prepare", 0.001)]  # two configs, both before the first run
    assert all(kind == "run" for kind, _ in calls[2:]) and len(calls) == 11  # type: ignore[misc]
    assert announced == ["noop", "noop"]
    calls.clear()
    assert runner.run_specs(specs, ResultStore(db)).reused == 9
    assert calls == []  # nothing to run, nothing to prepare


def test_a_failing_prepare_leaves_the_runs_to_do_their_own_work(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _record_prepare(monkeypatch, fail=True)
    report = runner.run_specs(_specs(["constant"], range(3)), ResultStore(db))
    assert calls == [("prepare", 0.0)]
    assert report.ran == 3 and report.failed == 0


def test_sweep_lists_and_mappings_reach_the_config_parser_as_json() -> None:
    """A tuple field's grid (``layers: [[3, 4], [8]]``) or a nested config's mapping is passed on as JSON,
    which the typed config parser reads (it refused lists before)."""
    import dataclasses

    from iclrbench.core import config as cfg

    @dataclasses.dataclass(frozen=True)
    class Layers:
        layers: tuple[int, ...] = cfg.param((2,), "widths")

    texts = [sweep._as_text(v) for v in ([3, 4], [8])]
    assert [cfg.build(Layers, {"layers": t}).layers for t in texts] == [(3, 4), (8,)]
    with pytest.raises(UserError, match="expected a number, string, boolean, list or mapping"):
        sweep._as_text(None)
    import datetime

    with pytest.raises(UserError, match="may hold numbers, strings and booleans"):
        sweep._as_text([datetime.date(2024, 1, 1)])  # YAML reads 2024-01-01 as a date
