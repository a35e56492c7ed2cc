"""The results file as SQLite sees it: what marks a file as ours, the schema of its tables, the companion
files SQLite keeps beside it, and the small reads that tell them apart before anything is opened for
writing. :mod:`iclrbench.core.store` builds the store on these; the output guard
(:mod:`iclrbench.core.outputs`) uses them to keep every output off any database."""

from __future__ import annotations

import sqlite3
from pathlib import Path

#: marks a SQLite file as ours (PRAGMA application_id), so a stranger's database is never written to
APPLICATION_ID = 0x1C1B2025
#: the first 16 bytes of every SQLite 3 database file
SQLITE_HEADER = b"SQLite format 3\x00"
#: companion files SQLite keeps next to a database (never an output either)
COMPANIONS = ("", "-wal", "-shm", "-journal")

CLAIMS_TABLE = """CREATE TABLE IF NOT EXISTS claims (
    task TEXT NOT NULL, claim_id TEXT NOT NULL, budget TEXT NOT NULL,
    statement TEXT NOT NULL, verdict TEXT NOT NULL, measured TEXT NOT NULL, created_at TEXT NOT NULL,
    task_version INTEGER NOT NULL DEFAULT 0, config_hash TEXT NOT NULL DEFAULT '',
    claim_version INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (task, claim_id, budget, task_version, config_hash, claim_version)
)"""
SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_key TEXT NOT NULL UNIQUE,
    task TEXT NOT NULL, task_version INTEGER NOT NULL,
    config_hash TEXT NOT NULL, config TEXT NOT NULL,
    algorithm TEXT NOT NULL, role TEXT NOT NULL,
    params_hash TEXT NOT NULL, params TEXT NOT NULL,
    seed INTEGER NOT NULL, budget TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')), error TEXT NOT NULL DEFAULT '',
    metrics TEXT NOT NULL, curves TEXT NOT NULL, notes TEXT NOT NULL DEFAULT '',
    wall_s REAL NOT NULL, cpu_s REAL NOT NULL, peak_mem_mb REAL NOT NULL,
    provenance TEXT NOT NULL, created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_by_task ON runs (task, task_version, config_hash, algorithm);
{claims}
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
""".format(claims=CLAIMS_TABLE + ";")

JSON_FIELDS = ("config", "params", "metrics", "curves", "provenance")
COLUMNS = (
    "run_key",
    "task",
    "task_version",
    "config_hash",
    "config",
    "algorithm",
    "role",
    "params_hash",
    "params",
    "seed",
    "budget",
    "status",
    "error",
    "metrics",
    "curves",
    "notes",
    "wall_s",
    "cpu_s",
    "peak_mem_mb",
    "provenance",
    "created_at",
)


def read_header(path: Path) -> bytes:
    """The first 16 bytes of ``path`` (an SQLite database's are :data:`SQLITE_HEADER`)."""
    with open(path, "rb") as fh:
        return fh.read(len(SQLITE_HEADER))


def identity(conn: sqlite3.Connection) -> tuple[int, set[str]]:
    """The file's application id and table names (0 and none for a new, empty database), read in one
    transaction: two separate reads could straddle a sibling's schema commit and see its tables with
    the id still 0 -- a "foreign" database that is in fact ours."""
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")
    try:
        app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        if own and conn.in_transaction:
            conn.execute("COMMIT")
    return app_id, tables


def has_claim_versions(conn: sqlite3.Connection) -> bool:
    """Whether the claims table has the version columns (a store written before them lacks them)."""
    return "task_version" in {r[1] for r in conn.execute("PRAGMA table_info(claims)")}


def is_busy(exc: sqlite3.OperationalError) -> bool:
    """Whether ``exc`` is another process holding the lock (to wait for), not a real failure."""
    text = str(exc).lower()
    return "locked" in text or "busy" in text
