"""Nothing stored is lost (issue 22): no output replaces the results store or any SQLite file, a store that
cannot be written is refused before anything is computed and can still be read, and several processes
may create the same new results file at once."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from iclrbench import runner
from iclrbench.core import catalog
from iclrbench.core.errors import UserError
from iclrbench.core.outputs import refuse_overwrite
from iclrbench.core.store import APPLICATION_ID, ResultStore
from tests.conftest import TASK, BenchRunner

SMOKE_RUN = ("--seeds", "0,1", "--budget", "smoke", "--set", "horizon=100")


@pytest.fixture
def stored(bench: BenchRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A results file with two runs, the working directory its folder (so './x' and 'x' both name it)."""
    db = tmp_path / "runs.sqlite"
    code, _, err = bench("run", TASK, "random-price", *SMOKE_RUN, "--db", db)
    assert code == 0, err
    monkeypatch.chdir(tmp_path)
    return db


def _snapshot(db: Path) -> tuple[bytes, int]:
    """The file's bytes (after folding the WAL in, so that they are the whole content) and its rows."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    rows = conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    conn.close()
    return db.read_bytes(), rows


def _one_line_exit_2(result: tuple[int, str, str], *needles: str) -> None:
    code, _out, err = result
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("bench: error:"), err
    for needle in needles:
        assert needle in err


# ------------------------------------------------------------------------------- outputs vs the store
def _aliases(db: Path) -> dict[str, Callable[[], str]]:
    """Ways of naming the results file (each made on demand, inside its folder)."""

    def symlink() -> str:
        link = db.parent / "link.csv"
        link.symlink_to(db)
        return str(link)

    def hardlink() -> str:
        other = db.parent / "hard.csv"
        os.link(db, other)
        return str(other)

    def subdir_dotdot() -> str:
        (db.parent / "sub").mkdir(exist_ok=True)
        return f"sub/../{db.name}"

    return {
        "same": lambda: str(db),
        "relative": lambda: db.name,
        "dot-slash": lambda: f"./{db.name}",
        "dotdot": subdir_dotdot,
        "symlink": symlink,
        "hardlink": hardlink,
        "wal": lambda: f"{db}-wal",
    }


@pytest.mark.parametrize("alias", list(_aliases(Path("x"))))
@pytest.mark.parametrize("command", ["export-csv", "export-json", "export-parquet", "leaderboard-html"])
def test_no_output_replaces_the_store(bench: BenchRunner, stored: Path, alias: str, command: str) -> None:
    before = _snapshot(stored)
    target = _aliases(stored)[alias]()
    if command.startswith("export"):
        args = ["export", "--format", command.split("-")[1], "--output", target]
    else:
        args = ["leaderboard", "--html", target]
    _one_line_exit_2(bench(*args, "--db", stored.name), "refusing to overwrite")
    assert _snapshot(stored) == before


def test_demo_refuses_the_store_as_its_page_before_running_anything(
    bench: BenchRunner, stored: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _snapshot(stored)
    bilateral = next(c for c in catalog.task_classes() if c.id == TASK)
    monkeypatch.setattr(catalog, "task_classes", lambda: [bilateral])
    _one_line_exit_2(bench("demo", "--db", stored, "--html", f"./{stored.name}"), "refusing to overwrite")
    assert _snapshot(stored) == before  # not one demo run was added


def test_no_output_replaces_another_sqlite_file(bench: BenchRunner, stored: Path) -> None:
    """Not the store, but someone's database: refused by its SQLite header, whatever it is called."""
    other = stored.parent / "notes.html"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE mine (x)")
    conn.execute("INSERT INTO mine VALUES ('precious')")
    conn.commit()
    conn.close()
    before = other.read_bytes()
    _one_line_exit_2(bench("export", "--output", other, "--db", stored), "is an SQLite database")
    _one_line_exit_2(bench("leaderboard", "--html", other, "--db", stored), "is an SQLite database")
    assert other.read_bytes() == before


def test_ordinary_outputs_are_still_written(bench: BenchRunner, stored: Path) -> None:
    assert bench("export", "--output", "runs.csv", "--db", stored)[0] == 0
    assert Path("runs.csv").read_text().startswith("run_id,")
    assert bench("leaderboard", "--html", "page.html", "--db", stored)[0] == 0
    assert "<html" in Path("page.html").read_text().lower()
    # an existing non-SQLite output is replaced, as asked
    assert bench("export", "--output", "runs.csv", "--format", "json", "--db", stored)[0] == 0
    assert Path("runs.csv").read_text().lstrip().startswith("[")


def test_refuse_overwrite_when_the_store_does_not_exist_yet(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="results store"):
        refuse_overwrite(tmp_path / "a" / ".." / "new.sqlite", tmp_path / "new.sqlite", "--html")


# ------------------------------------------------------------------------------- read-only stores
def _never_compute(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("a run was computed although its result could not be stored")

    monkeypatch.setattr(runner, "execute_chunk", fail)


def test_unwritable_store_is_refused_before_computing(
    bench: BenchRunner, stored: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``os.access`` is what reports a read-only file or folder (also for root on a read-only mount, see
    the next test); here it is made to report the store's folder read-only, in-process."""
    before = _snapshot(stored)
    real_access = os.access
    folder = os.path.realpath(stored.parent)

    def access(path: object, mode: int, **kwargs: object) -> bool:
        if mode & os.W_OK and os.path.realpath(str(path)).startswith(folder):
            return False
        return real_access(path, mode, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", access)
    _never_compute(monkeypatch)
    for args in (
        ["run", TASK, "ellipsoid-sbb", *SMOKE_RUN],
        ["claims", TASK, "--budget", "smoke"],
    ):
        _one_line_exit_2(bench(*args, "--db", stored), "cannot be written")
    monkeypatch.setattr(os, "access", real_access)
    assert _snapshot(stored) == before


def test_a_store_sqlite_opens_read_only_is_refused_by_the_write_probe(
    stored: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What os.access cannot see (e.g. a file sqlite can only open read-only) the probe write catches."""
    import iclrbench.core.store as store_module

    real_connect = sqlite3.connect

    def read_only(path: object, *args: object, **kwargs: object) -> sqlite3.Connection:
        uri = f"file:{os.path.abspath(str(path))}?mode=ro"
        return real_connect(uri, *args, uri=True, **kwargs)  # type: ignore[arg-type, misc]

    monkeypatch.setattr(store_module.sqlite3, "connect", read_only)
    with pytest.raises(UserError, match="cannot be written"):
        ResultStore(stored)


def test_readers_open_the_store_read_only(stored: Path) -> None:
    """leaderboard, export and show open with mode=ro: sqlite itself refuses writes (also for root)."""
    with ResultStore(stored, readonly=True) as store:
        assert store.count() == 2
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store._conn.execute("DELETE FROM runs")


def _can_bind_read_only() -> bool:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount --bind /tmp /tmp && mount -o remount,bind,ro /tmp /tmp"],
        capture_output=True,
    )
    return probe.returncode == 0


def test_a_read_only_store_can_be_read_but_not_run_into(bench: BenchRunner, stored: Path) -> None:
    """The real thing: the store's folder on a read-only mount (root: ``unshare -m`` and a read-only bind
    mount, which binds root too; otherwise: chmod, which binds an ordinary user). The store is in WAL
    mode, so a reader needs ``immutable=1`` there (no -shm file can be made)."""
    assert bench("leaderboard", "--db", stored, "--format", "json")[0] == 0
    before = _snapshot(stored)
    script = textwrap.dedent(
        f"""
        cd {stored.parent}
        for args in "leaderboard --format csv" "export --format json" "show 1" \\
                    "run {TASK} ellipsoid-sbb {" ".join(SMOKE_RUN)}"; do
            {sys.executable} -m iclrbench.cli $args --db {stored.name} >/dev/null 2>err.txt
            echo "$args => $? $(head -c 300 err.txt | tr '\\n' ' ')"
        done
        """
    )
    if _can_bind_read_only():
        mount = f"mount --bind {stored.parent} {stored.parent} && mount -o remount,bind,ro {stored.parent}"
        command = ["unshare", "-m", "sh", "-c", f"{mount} {stored.parent} && {{ {script} }}"]
        # err.txt cannot be written on the read-only mount: send it to a writable place
        command[-1] = command[-1].replace("err.txt", "/tmp/iclrbench-ro-err.txt")
    elif os.geteuid() != 0:
        os.chmod(stored.parent, 0o555)
        command = ["sh", "-c", script.replace("err.txt", "/tmp/iclrbench-ro-err.txt")]
    else:
        pytest.skip("root without mount namespaces: nothing here can make a file read-only for root")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    finally:
        os.chmod(stored.parent, 0o755)
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 4, done.stdout + done.stderr
    for line in lines[:3]:
        assert " => 0 " in line + " ", line
    assert " => 2 " in lines[3] and "cannot be written" in lines[3], lines[3]
    assert _snapshot(stored) == before


# ------------------------------------------------------------------------------- concurrent first use
_WORKER = textwrap.dedent(
    """
    import sys, time
    from iclrbench.core.errors import UserError
    from iclrbench.core.store import ResultStore
    for line in sys.stdin:
        path, start = line.split()
        time.sleep(max(0.0, float(start) - time.time()))
        try:
            with ResultStore(path) as store:
                store.count()
            print("ok", flush=True)
        except UserError as exc:
            print("refused", exc, flush=True)
    """
)


def test_eight_processes_create_a_new_store_together(tmp_path: Path) -> None:
    """8 processes open a results file that does not exist yet at the same instant, 20 times over: every
    one succeeds, and the file ends up ours (the job-array case). Long-lived workers keep it fast: each
    round they are sent a new path and a start time 50 ms ahead."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(8)
    ]
    try:
        for trial in range(20):
            path = tmp_path / f"trial{trial}" / "results.sqlite"
            start = time.time() + 0.05
            for w in workers:
                assert w.stdin is not None
                w.stdin.write(f"{path} {start}\n")
                w.stdin.flush()
            answers = [w.stdout.readline().strip() for w in workers if w.stdout is not None]
            assert answers == ["ok"] * 8, (trial, answers)
            conn = sqlite3.connect(path)
            assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
            conn.close()
    finally:
        for w in workers:
            if w.stdin is not None:
                w.stdin.close()
            w.wait(timeout=30)


def test_an_empty_file_is_taken_for_one_being_created(tmp_path: Path) -> None:
    """A zero-length file (a sibling's connect() has created it, its schema not yet written) is ours."""
    db = tmp_path / "new.sqlite"
    db.touch()
    with ResultStore(db) as store:
        assert store.count() == 0


def test_a_dry_run_reads_the_store_and_creates_none(bench: BenchRunner, stored: Path, tmp_path: Path) -> None:
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(
        f"budget: smoke\nseeds: 0-2\ntasks:\n  {TASK}:\n"
        "    algorithms: [random-price]\n    set: {horizon: 100}\n"
    )
    absent = tmp_path / "absent.sqlite"
    code, out, err = bench("sweep", sweep_file, "--dry-run", "--db", absent)
    assert code == 0 and "0 already stored" in err and not absent.exists()
    before = _snapshot(stored)
    code, out, err = bench("sweep", sweep_file, "--dry-run", "--db", stored)
    assert code == 0 and "2 already stored" in err and out.count("todo") == 1
    assert _snapshot(stored) == before
