"""Faults and load on the store, with real ``bench`` processes: kill -9 in the middle of a sweep, and two
sweeps writing one results file at once."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import plugin_env

BENCH = [sys.executable, "-m", "iclrbench.cli"]


def _rows(db: Path) -> list[tuple[int, str, str]]:
    if not db.exists():
        return []
    with sqlite3.connect(db, timeout=30) as conn:
        try:
            return conn.execute("SELECT run_id, run_key, created_at FROM runs WHERE status = 'ok'").fetchall()
        except sqlite3.OperationalError:  # tables not created yet
            return []


def _integrity(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_kill_9_mid_sweep_then_the_same_command_loses_and_redoes_nothing(tmp_path: Path, jobs: str) -> None:
    db = tmp_path / "results.sqlite"
    command = [*BENCH, "run", "noop", "constant", "uniform", "--seeds", "0-59", "--budget", "smoke"]
    command += ["--set", "sleep=0.05", "-j", jobs, "--db", str(db), "--format", "json"]
    proc = subprocess.Popen(command, env=plugin_env(), stdout=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 60
    while len(_rows(db)) < 15 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its workers, with no chance to clean up
    proc.wait()
    before = {key: (run_id, created) for run_id, key, created in _rows(db)}
    assert 15 <= len(before) < 120, "the sweep should have been killed part-way"
    assert _integrity(db) == "ok"

    done = subprocess.run(command, env=plugin_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(records) == 120
    assert sum(r["reused"] for r in records) == len(before)  # no finished run is redone
    after = {key: (run_id, created) for run_id, key, created in _rows(db)}
    assert len(after) == 120 and all(after[k] == v for k, v in before.items())  # none lost or rewritten
    assert _integrity(db) == "ok"


def test_two_bench_processes_writing_one_file_lose_no_row(tmp_path: Path) -> None:
    db = tmp_path / "results.sqlite"
    common = ["--seeds", "0-79", "--budget", "smoke", "--db", str(db), "--quiet", "--set", "sleep=0.002"]
    procs = [
        subprocess.Popen([*BENCH, "run", "noop", name, *common], env=plugin_env(), stderr=subprocess.PIPE)
        for name in ("constant", "uniform")
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    rows = _rows(db)
    assert len(rows) == 160 and len({key for _, key, _ in rows}) == 160
    assert _integrity(db) == "ok"
