"""The results store: one SQLite file, WAL mode, one row per run, unique on the run key.

Only the driver process writes. Each finished run is committed on its own, so an interrupted sweep keeps
every run that finished. A failed run is stored with its error and replaced when retried; a finished
(``ok``) run is replaced only when asked (``--force``). Claims' verdicts are stored beside the runs.
The schema of a row is :mod:`iclrbench.core.result`.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from iclrbench.core.errors import UserError
from iclrbench.core.result import SCHEMA_VERSION, RunResult, run_key
from iclrbench.core.task import ClaimResult

DEFAULT_DB = Path(".iclrbench") / "results.sqlite"
#: marks a SQLite file as ours (PRAGMA application_id), so a stranger's database is never written to
APPLICATION_ID = 0x1C1B2025
BUSY_TIMEOUT_MS = 30_000

_SCHEMA = """
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
CREATE TABLE IF NOT EXISTS claims (
    task TEXT NOT NULL, claim_id TEXT NOT NULL, budget TEXT NOT NULL,
    statement TEXT NOT NULL, verdict TEXT NOT NULL, measured TEXT NOT NULL, created_at TEXT NOT NULL,
    PRIMARY KEY (task, claim_id, budget)
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

_JSON_FIELDS = ("config", "params", "metrics", "curves", "provenance")
_COLUMNS = (
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


def resolve_path(db: str | os.PathLike[str] | None) -> Path:
    """``--db``, else ``$ICLRBENCH_DB``, else ``./.iclrbench/results.sqlite``."""
    return Path(db or os.environ.get("ICLRBENCH_DB") or DEFAULT_DB)


class ResultStore:
    """Open (creating if absent) the results database at ``path``; bad files raise :class:`UserError`."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, create: bool = True) -> None:
        self.path = resolve_path(path)
        self._conn = self._open(create)

    def _open(self, create: bool) -> sqlite3.Connection:
        path = self.path
        if path.is_dir():
            raise UserError(f"--db {path}: is a directory, not a results file")
        exists = path.exists()
        if not exists and not create:
            raise UserError(f"no results database at {path} (run 'bench run' first or pass --db)")
        if exists:
            with open(path, "rb") as fh:  # never hand a foreign file to sqlite for writing
                head = fh.read(16)
            if head and head != b"SQLite format 3\x00":
                raise UserError(f"--db {path}: not a results database (not an SQLite file); left untouched")
        else:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()
                path.unlink()
            except OSError as exc:
                raise UserError(f"--db {path}: cannot create the results file ({exc.strerror})") from None
        try:
            conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            raise UserError(f"--db {path}: not a readable results database ({exc})") from None
        if app_id == 0 and not tables:
            app_id, tables = self._initialise(conn)
        if app_id != APPLICATION_ID:
            conn.close()
            raise UserError(
                f"--db {path}: an SQLite file that is not an iclrbench results database; untouched"
            )
        conn.execute("PRAGMA synchronous = NORMAL")
        return conn

    def _initialise(self, conn: sqlite3.Connection) -> tuple[int, set[str]]:
        """Create the schema in one transaction, so that a second process opening the file at the same
        moment sees either nothing or the whole schema with our application id -- never half of it."""
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("BEGIN IMMEDIATE")
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if app_id == 0 and not tables:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute(
                    "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
                )
                app_id = APPLICATION_ID
            conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            conn.close()
            raise UserError(f"--db {self.path}: cannot initialise the results file ({exc})") from None
        return app_id, tables

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise UserError(f"--db {self.path}: results file is locked or read-only ({exc})") from None
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        else:
            self._conn.execute("COMMIT")

    # runs ---------------------------------------------------------------------------------------
    def put(self, result: RunResult) -> int:
        """Insert or replace the run with ``result``'s key, committed at once; returns its run id."""
        return self.put_many([result])[0]

    def put_many(self, results: Iterable[RunResult]) -> list[int]:
        """Insert or replace several runs in one transaction (imports, tests); returns their run ids."""
        placeholders = ", ".join("?" for _ in _COLUMNS)
        insert = f"INSERT INTO runs ({', '.join(_COLUMNS)}) VALUES ({placeholders})"
        ids = []
        with self._write() as conn:
            for result in results:
                row = result.to_json()
                values = [result.key] + [
                    json.dumps(row[c], sort_keys=True) if c in _JSON_FIELDS else row[c] for c in _COLUMNS[1:]
                ]
                conn.execute("DELETE FROM runs WHERE run_key = ?", (result.key,))
                result.run_id = int(conn.execute(insert, values).lastrowid or 0)
                ids.append(result.run_id)
        return ids

    def get(self, key: str) -> RunResult | None:
        row = self._conn.execute("SELECT * FROM runs WHERE run_key = ?", (key,)).fetchone()
        return None if row is None else self._to_result(row)

    def get_run(
        self, task: str, version: int, config_hash: str, algorithm: str, params_hash: str, seed: int
    ) -> RunResult | None:
        return self.get(run_key(task, version, config_hash, algorithm, params_hash, seed))

    def by_id(self, run_id: int) -> RunResult | None:
        row = self._conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else self._to_result(row)

    def runs(self, task: str | None = None, status: str | None = None) -> list[RunResult]:
        sql, args = "SELECT * FROM runs WHERE 1 = 1", []
        if task is not None:
            sql += " AND task = ?"
            args.append(task)
        if status is not None:
            sql += " AND status = ?"
            args.append(status)
        return [self._to_result(r) for r in self._conn.execute(sql + " ORDER BY run_id", args)]

    def count(self) -> int:
        return int(self._conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])

    def _to_result(self, row: Iterable[Any]) -> RunResult:
        names = ["run_id", *_COLUMNS]
        data = dict(zip(names, row, strict=True))
        data.pop("run_key")
        for c in _JSON_FIELDS:
            data[c] = json.loads(data[c])
        return RunResult(**data)

    # claims -------------------------------------------------------------------------------------
    def put_claim(self, claim: ClaimResult, created_at: str) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO claims VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    claim.task,
                    claim.id,
                    claim.budget,
                    claim.statement,
                    claim.verdict,
                    json.dumps(claim.measured, sort_keys=True),
                    created_at,
                ),
            )

    def claims(self, task: str | None = None) -> list[ClaimResult]:
        sql, args = "SELECT task, claim_id, statement, verdict, measured, budget FROM claims", []
        if task is not None:
            sql += " WHERE task = ?"
            args.append(task)
        return [
            ClaimResult(task=t, id=i, statement=s, verdict=v, measured=json.loads(m), budget=b)
            for t, i, s, v, m, b in self._conn.execute(sql + " ORDER BY task, claim_id, budget", args)
        ]

    def integrity(self) -> str:
        return str(self._conn.execute("PRAGMA integrity_check").fetchone()[0])
