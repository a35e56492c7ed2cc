from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from iclrbench.core.errors import UserError
from iclrbench.core.result import RunResult
from iclrbench.core.store import ResultStore
from iclrbench.core.task import ClaimResult
from iclrbench.testing import fake_run


def make_result(seed: int = 0, status: str = "ok", regret: float = 1.0) -> RunResult:
    return fake_run(
        "t",
        "a",
        seed,
        {"regret": regret},
        status=status,
        config={"d": 2},
        curves={"regret": {"x": [1, 2], "y": [0.5, regret]}},
        error="" if status == "ok" else "ValueError: boom",
    )


def test_round_trip_and_wal(db: Path) -> None:
    with ResultStore(db) as store:
        run_id = store.put(make_result())
        back = store.get(make_result().key)
        assert back is not None and back.run_id == run_id
        assert back.metrics == {"regret": 1.0} and back.curves["regret"]["y"] == [0.5, 1.0]
        assert store.by_id(run_id) == back
        assert store.integrity() == "ok"
    mode = sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_run_key_is_unique_and_put_replaces(db: Path) -> None:
    with ResultStore(db) as store:
        store.put(make_result(status="failed"))
        store.put(make_result(regret=2.0))
        assert store.count() == 1
        stored = store.get(make_result().key)
        assert stored is not None and stored.status == "ok" and stored.metrics["regret"] == 2.0


def test_claims_are_stored(db: Path) -> None:
    claim = ClaimResult("t", "c1", "a statement", "reproduced", {"slope": 0.6}, "smoke")
    with ResultStore(db) as store:
        store.put_claim(claim, "now")
        store.put_claim(claim, "later")
        assert store.claims("t") == [claim]


def test_a_file_that_is_not_sqlite_is_refused_and_untouched(db: Path) -> None:
    db.write_text("my thesis, no backup")
    with pytest.raises(UserError, match="not a results database"):
        ResultStore(db)
    assert db.read_text() == "my thesis, no backup"


def test_a_foreign_sqlite_database_is_refused_and_untouched(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE mine (x)")
    conn.execute("INSERT INTO mine VALUES (42)")
    conn.commit()
    conn.close()
    before = db.read_bytes()
    with pytest.raises(UserError, match="not an iclrbench results database"):
        ResultStore(db)
    assert db.read_bytes() == before


def test_unwritable_location_is_a_user_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UserError, match="cannot create"):
        ResultStore(blocker / "sub" / "results.sqlite")


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="is a directory"):
        ResultStore(tmp_path)


def test_missing_database_for_reading(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no results database"):
        ResultStore(tmp_path / "nope.sqlite", create=False)


def test_locked_database_is_a_user_error(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ResultStore(db).close()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    monkeypatch.setattr("iclrbench.core.store.BUSY_TIMEOUT_MS", 100)
    try:
        store = ResultStore(db)
        store._conn.execute("PRAGMA busy_timeout = 100")
        with pytest.raises(UserError, match="locked"):
            store.put(make_result())
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with ResultStore(db) as store:
        assert store.count() == 0
