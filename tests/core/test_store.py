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


# claim verdicts and their versions ------------------------------------------------------------------
def _verdict(task: str = "t", claim: str = "c1", task_version: int = 1, **kw: object) -> ClaimResult:
    values: dict[str, object] = {
        "statement": "a statement",
        "verdict": "reproduced",
        "measured": {"slope": 0.6},
        "budget": "small",
        "config_hash": "h1",
        "claim_version": 1,
        **kw,
    }
    return ClaimResult(task=task, id=claim, task_version=task_version, **values)  # type: ignore[arg-type]


def test_one_verdict_per_task_version_and_config(db: Path) -> None:
    with ResultStore(db) as store:
        store.put_claim(_verdict(task_version=1), "t1")
        store.put_claim(_verdict(task_version=2), "t2")
        store.put_claim(_verdict(task_version=2, config_hash="h2"), "t3")
        store.put_claim(_verdict(task_version=2, verdict="inconclusive"), "t4")  # replaces its twin
        every = store.claims("t", all_versions=True)
        assert [(c.task_version, c.config_hash, c.verdict) for c in every] == [
            (1, "h1", "reproduced"),
            (2, "h1", "inconclusive"),
            (2, "h2", "reproduced"),
        ]


def test_default_claims_are_the_installed_task_and_rule_versions(db: Path) -> None:
    from iclrbench.core import catalog

    cls = next(c for c in catalog.task_classes() if c.id == "contextual-bilateral-trade")
    rule = cls.claims[0]
    current = _verdict(cls.id, rule.id, cls.version, claim_version=rule.stored_version)
    with ResultStore(db) as store:
        store.put_claim(current, "now")
        stored = rule.stored_version
        store.put_claim(_verdict(cls.id, rule.id, cls.version - 1, claim_version=stored), "before")
        store.put_claim(_verdict(cls.id, rule.id, cls.version + 1, claim_version=stored), "a branch")
        store.put_claim(
            _verdict(cls.id, rule.id, cls.version, config_hash="h0", claim_version=stored - 1), "x"
        )
        store.put_claim(_verdict(cls.id, "a-claim-since-removed", cls.version), "old")
        assert store.claims(cls.id) == [current]
        assert store.claims() == [current]
        assert len(store.claims(cls.id, all_versions=True)) == 5


def test_claims_of_a_task_not_installed_keep_its_newest_version(db: Path) -> None:
    with ResultStore(db) as store:
        store.put_claim(_verdict("gone", task_version=3), "a")
        store.put_claim(_verdict("gone", task_version=5), "b")
        assert [c.task_version for c in store.claims("gone")] == [5]


_OLD_CLAIMS_TABLE = """CREATE TABLE claims (
    task TEXT NOT NULL, claim_id TEXT NOT NULL, budget TEXT NOT NULL,
    statement TEXT NOT NULL, verdict TEXT NOT NULL, measured TEXT NOT NULL, created_at TEXT NOT NULL,
    PRIMARY KEY (task, claim_id, budget))"""


def _old_store(db: Path) -> None:
    """A store as iclrbench wrote it before verdicts had versions: the claims table of that time."""
    ResultStore(db).close()
    conn = sqlite3.connect(db)
    conn.execute("DROP TABLE claims")
    conn.execute(_OLD_CLAIMS_TABLE)
    conn.execute("INSERT INTO claims VALUES ('t', 'c1', 'small', 's', 'reproduced', '{\"x\": 1}', 'then')")
    conn.commit()
    conn.close()


def test_an_old_claims_table_is_migrated_in_place(db: Path) -> None:
    _old_store(db)
    with ResultStore(db, readonly=True) as reader:  # read as it is, without writing
        (old,) = reader.claims("t", all_versions=True)
        assert (old.task_version, old.config_hash, old.claim_version) == (0, "", 0)
    with ResultStore(db) as store:
        (old,) = store.claims("t", all_versions=True)
        assert (old.verdict, old.measured, old.task_version, old.config_hash) == (
            "reproduced",
            {"x": 1},
            0,
            "",
        )
        store.put_claim(_verdict(task_version=1), "now")  # a new version does not replace the old verdict
        assert len(store.claims("t", all_versions=True)) == 2
        assert store.integrity() == "ok"
    columns = {r[1] for r in sqlite3.connect(db).execute("PRAGMA table_info(claims)")}
    assert {"task_version", "config_hash", "claim_version"} <= columns


def test_a_verdict_of_a_new_claim_rule_keeps_the_old_rules(tmp_path: Path) -> None:
    from dataclasses import replace

    old = ClaimResult(
        "t", "c", "s", "reproduced", {}, "small", task_version=1, config_hash="h", claim_version=1
    )
    with ResultStore(tmp_path / "r.sqlite") as store:
        store.put_claim(old, "2026-01-01T00:00:00+00:00")
        store.put_claim(replace(old, verdict="inconclusive", claim_version=2), "2026-01-02T00:00:00+00:00")
        kept = {(c.claim_version, c.verdict) for c in store.claims("t", all_versions=True)}
    assert kept == {(1, "reproduced"), (2, "inconclusive")}
