"""Stored runs outlive the layout: a results store written before the one-stem move (kept as a fixture,
built by the main of that day) is reused run for run, no run redone and none lost.

Run keys carry the task id, versions, config and params hashes, the algorithm's name and the seed, never a
module path; the one algorithm renamed in the move (conformal-fairness's ``conformal-fairness``, now
``cf-framework``) is renamed in the store, run keys with it, before the runner looks for its runs.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from iclrbench import runner
from iclrbench.core import catalog

FIXTURE = Path(__file__).parent.parent / "fixtures" / "store-before-one-stem.sqlite"


def _rows(db: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT task, algorithm, metrics FROM runs ORDER BY run_id").fetchall()


def _tasks(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [t for (t,) in conn.execute("SELECT DISTINCT task FROM runs ORDER BY task")]


def _keys(db: Path, task: str) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {k for (k,) in conn.execute("SELECT run_key FROM runs WHERE task = ?", (task,))}


@pytest.mark.parametrize("task", _tasks(FIXTURE))
def test_every_stored_run_is_reused(task: str, bench, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Every run the store holds for today's plan is reused, none redone, none lost. A task whose version
    or smoke config changed since the fixture was written plans other runs (rightly: its results changed):
    the test says that reuse was not exercised for it, without running them."""
    if task not in catalog.available_task_ids():
        pytest.skip(f"{task} is not installed here")
    db = tmp_path / "results.sqlite"
    shutil.copy(FIXTURE, db)
    before = _rows(db)
    renamed = catalog.get_task(task).renamed_algorithms
    stored = set()  # the keys the runner will look for: the fixture's, after the rename
    for key in _keys(db, task):
        for old, new in renamed.items():
            key = key.replace(f"|{old}|", f"|{new}|")
        stored.add(key)
    planned = {
        s.algorithm: s.key
        for s in runner.plan(task, list(catalog.algorithms(task)), [0], "smoke", skip_unsupported=True)
    }
    held = {a for a, key in planned.items() if key in stored}
    if not held:  # nothing to reuse: running its whole smoke sweep would test no reuse (minutes of CI)
        assert _rows(db) == before
        pytest.skip(f"{task} changed since the fixture (version or smoke config): no stored run to reuse")
    code, out, err = bench(
        "run", task, "--all", "--budget", "smoke", "--seeds", "0", "--db", db, "--format", "json"
    )
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert records, "no run planned"
    redone = [r["algorithm"] for r in records if not r["reused"] and r["algorithm"] in held]
    assert not redone, f"{task}: stored runs redone after the move: {redone}"
    after = _rows(db)
    expected = [(t, renamed.get(a, a) if t == task else a, m) for t, a, m in before]
    assert after[: len(before)] == expected, "a stored run was lost or its metrics changed"
    assert len(after) == len(before) + len(records) - sum(r["reused"] for r in records)


def test_the_renamed_algorithm_keeps_its_runs(bench, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The fixture holds conformal-fairness's reference under its former name; after any run of the task
    the rows carry the new name and the run keys it makes."""
    if "conformal-fairness" not in catalog.available_task_ids():
        pytest.skip("conformal-fairness is not installed here")
    db = tmp_path / "results.sqlite"
    shutil.copy(FIXTURE, db)
    with sqlite3.connect(db) as conn:
        old = conn.execute("SELECT COUNT(*) FROM runs WHERE algorithm = 'conformal-fairness'").fetchone()[0]
    assert old > 0, "the fixture has no run of the former name: it tests nothing"
    code, _, err = bench(
        "run", "conformal-fairness", "cf-framework", "--budget", "smoke", "--seeds", "0", "--db", db
    )
    assert code == 0, err
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT run_key, algorithm FROM runs WHERE task = 'conformal-fairness'"
        ).fetchall()
    assert not [k for k, a in rows if a == "conformal-fairness"]
    assert all(f"|{a}|" in k for k, a in rows)
