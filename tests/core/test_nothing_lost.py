"""Nothing lost, round two (issue 37): file-system faults and odd inputs that lost runs, hung or printed a
traceback. Each test failed before its fix."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from iclrbench.core import outputs as outputs_module
from iclrbench.core import store as store_module
from iclrbench.core.errors import UserError
from iclrbench.core.outputs import refuse_overwrite
from iclrbench.core.store import ResultStore
from iclrbench.testing import fake_runs
from tests.conftest import TASK, BenchRunner

SMOKE_RUN = ("--seeds", "0,1", "--budget", "smoke", "--set", "horizon=100")


@pytest.fixture
def stored(bench: BenchRunner, tmp_path: Path) -> Path:
    db = tmp_path / "runs.sqlite"
    code, _, err = bench("run", TASK, "random-price", *SMOKE_RUN, "--db", db)
    assert code == 0, err
    return db


def _rows(db: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT run_id, status FROM runs ORDER BY run_id").fetchall()


def _one_line(err: str) -> None:
    assert "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err


# 1 ------------------------------------------------------------------------------------ a failed --force
def test_a_failed_force_redo_keeps_the_finished_run(bench: BenchRunner, stored: Path) -> None:
    before = _rows(stored)
    _code, out, _err = bench(
        "run",
        TASK,
        "random-price",
        *SMOKE_RUN,
        "--db",
        stored,
        "--force",
        "--timeout",
        "0.001",
        "--format",
        "json",
    )
    records = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert records and all(r["status"] == "failed" for r in records), out
    assert all("is kept" in r["error"] for r in records)
    after = _rows(stored)
    assert [s for _, s in after] == ["ok", "ok"] and after == before


# 3, 4 ------------------------------------------------------------------------------ the output guard
@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_another_databases_companion_files_are_never_outputs(tmp_path: Path, suffix: str) -> None:
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    companion = Path(f"{other}{suffix}")
    companion.write_bytes(b"committed but not checkpointed")
    with pytest.raises(UserError, match="refusing"):
        refuse_overwrite(companion, None, "--output")
    companion.unlink()
    with pytest.raises(UserError, match="refusing"):  # not there yet: writing it would still be read as one
        refuse_overwrite(companion, None, "--output")


def test_a_wal_or_journal_is_known_by_its_first_bytes(tmp_path: Path) -> None:
    wal = tmp_path / "renamed.log"
    wal.write_bytes(bytes.fromhex("377f0682") + b"\0" * 60)
    with pytest.raises(UserError, match="refusing"):
        refuse_overwrite(wal, None, "--html")
    journal = tmp_path / "renamed.bak"
    journal.write_bytes(bytes.fromhex("d9d505f920a163d7") + b"\0" * 60)
    with pytest.raises(UserError, match="refusing"):
        refuse_overwrite(journal, None, "--html")
    plain = tmp_path / "plain.csv"
    plain.write_text("a,b\n")
    refuse_overwrite(plain, None, "--output")  # an ordinary file may be replaced


def test_a_file_whose_header_cannot_be_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "mode-0200.csv"
    target.write_bytes(b"SQLite format 3\x00" + b"\0" * 100)

    def unreadable(path: Path) -> bytes:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(outputs_module, "read_header", unreadable)  # what mode 0200 does to a non-root user
    with pytest.raises(UserError, match="cannot be read"):
        refuse_overwrite(target, None, "--output")


# 6 ---------------------------------------------------------------------- -wal without -shm, read-only
@pytest.fixture
def read_only_mount() -> Iterator[Path]:
    """A folder on its own tmpfs, remounted read-only once filled: what a non-root user meets in a folder
    without write permission, enforced for root too (EROFS)."""
    folder = Path(tempfile.mkdtemp(prefix="iclrbench-ro-"))
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)], capture_output=True
    )
    if mounted.returncode != 0:
        folder.rmdir()
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)
        folder.rmdir()


def test_a_read_only_folder_with_a_log_but_no_shm_reads_every_committed_run(
    tmp_path: Path, read_only_mount: Path
) -> None:
    db = tmp_path / "runs.sqlite"
    writer = ResultStore(db)
    writer._conn.execute("PRAGMA wal_autocheckpoint = 0")  # the runs stay in the log
    writer.put_many(fake_runs(TASK, "random-price", range(5), {"regret": 1.0}))
    writer._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # 5 runs in the main file ...
    writer.put_many(fake_runs(TASK, "random-price", range(5, 23), {"regret": 1.0}))  # ... 18 in the log
    for suffix in ("", "-wal"):  # no -shm: a store copied off a machine, or its writer crashed
        Path(f"{read_only_mount}/runs.sqlite{suffix}").write_bytes(Path(f"{db}{suffix}").read_bytes())
    writer.close()
    subprocess.run(["mount", "-o", "remount,ro", str(read_only_mount)], check=True)
    with ResultStore(read_only_mount / "runs.sqlite", readonly=True) as reader:
        assert len(reader.runs()) == 23


# 7 ------------------------------------------------------------------------------------ a FIFO as --db
@pytest.mark.parametrize(
    "command", [["leaderboard"], ["export", "--format", "csv"], ["show", "1"], ["run", TASK, "random-price"]]
)
def test_a_fifo_as_the_store_is_one_line_not_a_hang(tmp_path: Path, command: list[str]) -> None:
    fifo = tmp_path / "runs.sqlite"
    os.mkfifo(fifo)
    out = subprocess.run(
        [sys.executable, "-m", "iclrbench.cli", *command, "--db", str(fifo)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert "not a regular file" in out.stderr
    _one_line(out.stderr)


# 8 ---------------------------------------------------------------------------- broken rows, bad pages
def test_a_row_with_broken_json_is_named_and_the_rest_shown(bench: BenchRunner, stored: Path) -> None:
    with sqlite3.connect(stored) as conn:
        conn.execute("UPDATE runs SET metrics = '{\"regret\": ' WHERE run_id = 1")
    for command in (["leaderboard"], ["export", "--format", "csv"]):
        code, _out, err = bench(*command, "--db", stored)
        assert code == 0, err
        assert "skipped 1 unreadable run(s)" in err and "run id 1" in err
        _one_line(err)
    code, _, err = bench("show", "1", "--db", stored)
    assert code == 2 and "unreadable" in err
    _one_line(err)
    code, _, err = bench("run", TASK, "random-price", *SMOKE_RUN, "--db", stored)
    assert code == 0, err  # the unreadable run is redone and replaces the broken row
    assert [s for _, s in _rows(stored)] == ["ok", "ok"]


def test_a_file_damaged_in_its_middle_pages_is_one_line(bench: BenchRunner, tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    with ResultStore(db) as s:
        runs = fake_runs(TASK, "random-price", range(200), {"regret": 1.0})
        for r in runs:
            r.notes = "x" * 2000  # enough rows for many pages
        s.put_many(runs)
    sqlite3.connect(db).execute("PRAGMA wal_checkpoint(TRUNCATE)").connection.close()
    data = bytearray(db.read_bytes())
    middle = len(data) // 2 // 4096 * 4096
    data[middle : middle + 4096] = os.urandom(4096)
    db.write_bytes(bytes(data))
    for command in (["leaderboard"], ["export", "--format", "csv"]):
        code, _, err = bench(*command, "--db", db)
        assert code == 2, err
        assert "damaged" in err
        _one_line(err)


# 9 ---------------------------------------------------------------------------------------- disk full
def test_a_full_disk_is_one_line_and_the_store_stays_intact(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    with ResultStore(db) as s:
        s.put_many(fake_runs(TASK, "random-price", range(3), {"regret": 1.0}))
        pages = s._conn.execute("PRAGMA page_count").fetchone()[0]
        s._conn.execute(f"PRAGMA max_page_count = {pages}")  # SQLITE_FULL at the next new page
        big = fake_runs(TASK, "random-price", [99], {"regret": 1.0})[0]
        big.notes = "x" * 200_000
        with pytest.raises(UserError, match="every run stored before is intact") as caught:
            s.put(big)
        assert "\n" not in str(caught.value)
    assert len(_rows(db)) == 3


# 14 --------------------------------------------------------------------- a reader racing the creator
def test_a_reader_of_a_file_being_created_waits_for_it(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    db.touch()  # what a reader sees between the first writer's open() and its schema

    def create() -> None:
        time.sleep(0.3)
        with ResultStore(db) as s:
            s.put_many(fake_runs(TASK, "random-price", [0], {"regret": 1.0}))

    writer = threading.Thread(target=create)
    writer.start()
    with ResultStore(db, readonly=True) as reader:
        assert reader.count() in (0, 1)
    writer.join()


def test_a_reader_of_a_file_nobody_creates_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "READER_PATIENCE_S", 0.2)
    db = tmp_path / "runs.sqlite"
    db.touch()
    with pytest.raises(UserError, match="being created by another bench process"):
        ResultStore(db, readonly=True)


# 2, 9 ------------------------------------------------------------------------------ exports that fail
def test_a_failed_export_leaves_its_target_as_it_was(
    bench: BenchRunner, stored: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pyarrow")
    import pandas as pd

    target = stored.parent / "runs.parquet"
    target.write_bytes(b"last week's export")

    def half_written(self: pd.DataFrame, path: Path, **kwargs: object) -> None:
        Path(path).write_bytes(b"PAR1 half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", half_written)
    code, _, err = bench("export", "--format", "parquet", "--output", target, "--db", stored)
    assert code == 2 and "left as it was" in err
    _one_line(err)
    assert target.read_bytes() == b"last week's export"
    assert sorted(p.name for p in stored.parent.iterdir() if "parquet" in p.name) == ["runs.parquet"]


def test_an_export_to_a_full_disk_leaves_no_file(bench: BenchRunner, stored: Path) -> None:
    folder = Path(tempfile.mkdtemp(prefix="iclrbench-full-"))
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(folder)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        with contextlib.suppress(OSError):  # fill the disk
            (folder / "filler").write_bytes(b"x" * 8192)
        code, _, err = bench("export", "--format", "json", "--output", folder / "runs.json", "--db", stored)
        assert code == 2 and "No space left" in err, err
        _one_line(err)
        assert [p.name for p in folder.iterdir()] == ["filler"]  # no partial or empty runs.json
    finally:
        subprocess.run(["umount", str(folder)], check=False)
        folder.rmdir()


def test_dev_full_as_output_or_stdout_is_one_line(stored: Path) -> None:
    cmd = [sys.executable, "-m", "iclrbench.cli"]
    out = subprocess.run(
        [*cmd, "export", "--output", "/dev/full", "--db", str(stored)], capture_output=True, text=True
    )
    assert out.returncode == 2 and "No space left" in out.stderr
    _one_line(out.stderr)
    with open("/dev/full", "w") as full:
        out = subprocess.run(
            [*cmd, "export", "--db", str(stored)], stdout=full, stderr=subprocess.PIPE, text=True
        )
    assert out.returncode == 2 and "cannot write the output" in out.stderr
    _one_line(out.stderr)
    out = subprocess.run(
        f"{sys.executable} -m iclrbench.cli list >&-", shell=True, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and "stdout is closed" in out.stderr
    _one_line(out.stderr)


# 5, 10, 12, 13 ---------------------------------------------------- refused before anything is touched
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", TASK, "random-price", "--seeds", str(2**63)], "below 2^63"),
        (["run", TASK, "random-price", "-j", "1000"], "--jobs 1000"),
        (["run", TASK, "random-price", "--scheduler", "tcp://127.0.0.1:1", "--executor", "process"], "dask"),
        (["claims", TASK, "-j", "1000"], "--jobs 1000"),
        (["run", TASK, "random-price", "--seeds", "0-9999,10000-19999"], "more than 10000 seeds in all"),
    ],
)
def test_refused_arguments_create_no_store(
    bench: BenchRunner, tmp_path: Path, args: list[str], needle: str
) -> None:
    db = tmp_path / "runs.sqlite"
    code, _, err = bench(*args, "--db", db)
    assert code == 2 and needle in err, err
    _one_line(err)
    assert not db.exists()


def test_the_jobs_cap_counts_the_cores_this_process_may_use(
    bench: BenchRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})  # as under taskset -c 0
    code, _, err = bench("run", TASK, "random-price", "-j", "8", "--db", tmp_path / "runs.sqlite")
    assert code == 2 and "4 per core this process may use: 1" in err, err


@pytest.mark.timeout(120)  # refused from the axes; expanding 40 M points first hung
def test_a_huge_sweep_grid_is_refused_before_it_is_expanded(bench: BenchRunner, tmp_path: Path) -> None:
    sweep = tmp_path / "huge.yaml"
    values = ", ".join(str(v) for v in range(200))
    sweep.write_text(
        f"budget: smoke\nseeds: 0-999\ntasks:\n  {TASK}:\n    algorithms: [random-price]\n"
        f"    grid:\n      horizon: [{values}]\n      d: [{values}]\n"
    )  # 200 x 200 points x 1,000 seeds = 40 M runs
    code, _, err = bench("sweep", sweep, "--dry-run", "--db", tmp_path / "runs.sqlite")
    assert code == 2 and "more than 100,000 runs" in err, err


# cosmetic ----------------------------------------------------------------------------------------
def test_infinite_metrics_print_no_numpy_warnings(bench: BenchRunner, tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    with ResultStore(db) as s:
        s.put_many(fake_runs(TASK, "random-price", range(3), {"regret": float("inf")}))
        s.put_many(fake_runs(TASK, "ellipsoid-sbb", range(3), {"regret": 1.0}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code, out, err = bench("leaderboard", "--db", db)
        assert code == 0 and "Warning" not in err, err
        assert "inf" in out
        code, _, err = bench("leaderboard", "--db", db, "--html", tmp_path / "page.html")
        assert code == 0 and "Warning" not in err, err


# 11, and the echo of a huge value ------------------------------------------------------------------
def test_negative_zero_is_the_same_config_as_zero(bench: BenchRunner, tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    first = ("run", TASK, "random-price", "--seeds", "0", "--budget", "smoke", "--db", db, "--format", "json")
    assert bench(*first, "--set", "noise=0")[0] == 0
    code, out, err = bench(*first, "--set", "noise=-0")
    assert code == 0, err
    assert json.loads(out.splitlines()[0])["reused"] is True
    assert len(_rows(db)) == 1


@pytest.mark.parametrize("key", ["noise", "d", "feedback", "nosuchkey"])
def test_a_huge_set_value_is_not_echoed_whole(bench: BenchRunner, tmp_path: Path, key: str) -> None:
    code, _, err = bench(
        "run", TASK, "random-price", "--set", f"{key}={'x' * 100_000}", "--db", tmp_path / "r.sqlite"
    )
    assert code == 2
    _one_line(err)
    assert len(err) < 1000


def _sweep_then(signum: int, tmp_path: Path, *extra: str) -> str:
    """A ``-j 2`` sweep of the plugin's sleeping task, sent ``signum`` once some runs are stored (to its
    whole process group, as a terminal's Ctrl-C is; SIGKILL to the driver alone); its stderr."""
    from tests.conftest import plugin_env

    db = tmp_path / "runs.sqlite"
    command = [sys.executable, "-m", "iclrbench.cli", "run", "noop", "constant", "uniform", "--seeds", "0-59"]
    command += ["--budget", "smoke", "--set", "sleep=0.2", "-j", "2", "--db", str(db), *extra]
    proc = subprocess.Popen(
        command,
        env=plugin_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        with contextlib.suppress(sqlite3.Error):
            if db.exists() and len(_rows(db)) >= 4:
                break
        time.sleep(0.1)
    if signum == signal.SIGKILL:
        os.kill(proc.pid, signum)  # the driver alone: its pool's semaphores are left to the tracker
    else:
        os.killpg(proc.pid, signum)
    _, err = proc.communicate(timeout=60)
    time.sleep(1)  # the resource tracker outlives the driver by a moment
    return err


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signum", "extra"),
    [(signal.SIGINT, ("--timeout", "600")), (signal.SIGTERM, ()), (signal.SIGKILL, ())],
)
def test_stopping_a_sweep_prints_no_traceback_or_leak_warning(
    signum: int, extra: tuple[str, ...], tmp_path: Path
) -> None:
    err = _sweep_then(signum, tmp_path, *extra)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "leaked semaphore" not in err, err
    if signum != signal.SIGKILL:
        assert "interrupted; every finished run is stored" in err
