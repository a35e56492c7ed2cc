"""The results store: one SQLite file, WAL mode, one row per run, unique on the run key.

Only the driver process writes. Each finished run is committed on its own, so an interrupted sweep keeps
every run that finished. A failed run is stored with its error and replaced when retried; a finished
(``ok``) run is replaced only when asked (``--force``). Claims' verdicts are stored beside the runs.
The schema of a row is :mod:`iclrbench.core.result`.

Safety rules, each tested (tests/core/test_store.py, tests/core/test_data_safety.py):

- a file that is not ours (not SQLite, or SQLite without our ``application_id``) is never written;
- several processes may create the same new file at once (job arrays): the schema is created in one
  ``BEGIN IMMEDIATE`` transaction, retried while another process holds the lock, and an empty file is
  taken for one that such a process is just creating;
- a writer checks that the file can be written before anything is computed; a reader opens the file
  read-only (``mode=ro``, or ``immutable=1`` in a read-only folder), so a read-only store stays readable;
- :func:`iclrbench.core.outputs.refuse_overwrite` keeps every output file (``--output``, ``--html``) off
  the store and off any SQLite file or journal.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from iclrbench.core.errors import UserError
from iclrbench.core.result import SCHEMA_VERSION, RunResult, run_key
from iclrbench.core.sqlite_file import (
    APPLICATION_ID,
    CLAIMS_TABLE,
    COLUMNS,
    JSON_FIELDS,
    SCHEMA,
    SQLITE_HEADER,
    has_claim_versions,
    identity,
    is_busy,
    read_header,
)
from iclrbench.core.task import ClaimResult

DEFAULT_DB = Path(".iclrbench") / "results.sqlite"
BUSY_TIMEOUT_MS = 30_000
#: how long opening waits for another process that is creating the same file's schema
INIT_PATIENCE_S = 60.0
#: how long a reader waits for a file that another process is creating
READER_PATIENCE_S = 5.0


def resolve_path(db: str | os.PathLike[str] | None) -> Path:
    """``--db``, else ``$ICLRBENCH_DB``, else ``./.iclrbench/results.sqlite``."""
    return Path(db or os.environ.get("ICLRBENCH_DB") or DEFAULT_DB)


class ResultStore:
    """The results database at ``path`` (see :func:`resolve_path`).

    ``create``: make the file when it is absent (writers). ``readonly``: open it for reading only
    (``leaderboard``, ``export``, ``show``): it must exist, and it is never written, so a store on a
    read-only file or in a read-only folder can still be read. A file that cannot be used, or that is
    not ours, raises :class:`UserError` and is left untouched.
    """

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, create: bool = True, readonly: bool = False
    ) -> None:
        self.path = resolve_path(path)
        self.readonly = readonly
        self._copy_dir: tempfile.TemporaryDirectory[str] | None = None
        #: run ids of rows that could not be read (broken JSON), each reported once on stderr
        self.unreadable: set[int] = set()
        self._conn = self._open_readonly() if readonly else self._open(create)

    # opening ------------------------------------------------------------------------------------
    def _check_file(self, must_exist: bool) -> bool:
        """Refuse a directory or a file that is not SQLite; return whether the file exists."""
        path = self.path
        if path.is_dir():
            raise UserError(f"--db {path}: is a directory, not a results file")
        if not path.exists():
            if must_exist:
                raise UserError(f"no results database at {path} (run 'bench run' first or pass --db)")
            return False
        try:
            mode = path.stat().st_mode
        except OSError as exc:
            raise UserError(f"--db {path}: cannot read ({exc.strerror})") from None
        if not stat.S_ISREG(mode):  # a FIFO or a device would block or stream, never hold runs
            raise UserError(f"--db {path}: not a regular file (a pipe, socket or device); left untouched")
        try:
            head = read_header(path)
        except OSError as exc:
            raise UserError(f"--db {path}: cannot read ({exc.strerror})") from None
        # never hand a foreign file to sqlite; an empty file is one being created (by us or a sibling)
        if head and head != SQLITE_HEADER:
            raise UserError(f"--db {path}: not a results database (not an SQLite file); left untouched")
        return True

    def _open(self, create: bool) -> sqlite3.Connection:
        path = self.path
        exists = self._check_file(must_exist=not create)
        if not exists:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                # O_CREAT without O_EXCL or O_TRUNC: creates an empty file, or keeps the one a concurrent
                # process has just made; never removes anything (a sibling may already have it open)
                os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o666))
            except OSError as exc:
                raise UserError(f"--db {path}: cannot create the results file ({exc.strerror})") from None
        self._check_writable()
        try:
            conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        except sqlite3.DatabaseError as exc:
            raise UserError(f"--db {path}: not a readable results database ({exc})") from None
        try:
            self._initialise(conn)
            self._migrate(conn)
            self._probe_write(conn)
            conn.execute("PRAGMA synchronous = NORMAL")
        except BaseException:
            conn.close()
            raise
        return conn

    def _check_writable(self) -> None:
        """Before anything is computed: the file and its folder (SQLite puts ``-wal``/``-shm`` beside the
        file) must be writable, else the results of a long run would be lost at the first write."""
        folder = self.path.parent if str(self.path.parent) else Path(".")
        for target in (self.path, folder):
            if not os.access(target, os.W_OK):
                raise UserError(
                    f"--db {self.path}: cannot be written ({'folder' if target == folder else 'file'} is "
                    "read-only); 'bench leaderboard', 'export' and 'show' can still read it"
                )

    def _probe_write(self, conn: sqlite3.Connection) -> None:
        """A write rolled back at once: catches what ``os.access`` cannot see (a file SQLite could only
        open read-only), before any run is computed."""
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('write_probe', '')")
        except sqlite3.OperationalError as exc:
            if is_busy(exc):
                return  # another process is writing it: writable, and each put waits its turn
            raise UserError(
                f"--db {self.path}: cannot be written ({exc}); 'bench leaderboard', 'export' and 'show' "
                "can still read it"
            ) from None
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")

    def _initialise(self, conn: sqlite3.Connection) -> None:
        """Create the schema if the file is new, and check that the file is ours.

        Safe under concurrent first use: the schema and our application id are written in one
        ``BEGIN IMMEDIATE`` transaction, so another process sees either an empty database (and waits
        for the lock, then finds the schema) or all of it, never half. ``SQLITE_BUSY`` from a sibling
        that is switching the new file to WAL mode is retried until :data:`INIT_PATIENCE_S`.
        """
        deadline = time.monotonic() + INIT_PATIENCE_S
        delay = 0.005
        while True:
            try:
                app_id, tables = identity(conn)
                if app_id == APPLICATION_ID:
                    return
                if app_id != 0 or tables:
                    raise UserError(
                        f"--db {self.path}: an SQLite file that is not an iclrbench results database; "
                        "untouched"
                    )
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("BEGIN IMMEDIATE")
                app_id, tables = identity(conn)  # again, under the lock: a sibling may have won
                if app_id == 0 and not tables:
                    for statement in SCHEMA.split(";"):
                        if statement.strip():
                            conn.execute(statement)
                    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                    conn.execute(
                        "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
                    )
                conn.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if is_busy(exc) and time.monotonic() < deadline:
                    time.sleep(delay)
                    delay = min(delay * 2, 0.2)
                    continue
                raise UserError(f"--db {self.path}: cannot initialise the results file ({exc})") from None
            except sqlite3.DatabaseError as exc:
                raise UserError(f"--db {self.path}: not a readable results database ({exc})") from None

    def _migrate(self, conn: sqlite3.Connection) -> None:
        """Bring a store written by an older iclrbench up to date, in place, keeping every row.

        The claims table gained ``task_version``, ``config_hash`` and ``claim_version`` and a key that
        includes them (a verdict of a new claim rule does not replace the old rule's). ``ALTER TABLE ADD
        COLUMN`` cannot change a primary key, so the table is rebuilt in one transaction (SQLite's
        documented way); old verdicts get version 0 and hash ''.
        """
        if has_claim_versions(conn):
            return
        try:
            conn.execute("BEGIN IMMEDIATE")
            if not has_claim_versions(conn):  # a sibling may have migrated meanwhile
                conn.execute("ALTER TABLE claims RENAME TO claims_before_versions")
                conn.execute(CLAIMS_TABLE)
                conn.execute(
                    "INSERT INTO claims (task, claim_id, budget, statement, verdict, measured, created_at) "
                    "SELECT task, claim_id, budget, statement, verdict, measured, created_at "
                    "FROM claims_before_versions"
                )
                conn.execute("DROP TABLE claims_before_versions")
            conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise UserError(f"--db {self.path}: cannot upgrade the results file ({exc})") from None

    def _open_readonly(self) -> sqlite3.Connection:
        """Open for reading only; nothing is written, not even ``-wal``/``-shm`` in a read-only folder.

        A file another process is creating right now (empty, or SQLite without our schema yet) is waited
        for up to :data:`READER_PATIENCE_S`, then named as such.
        """
        self._check_file(must_exist=True)
        path = self._readable_path()
        uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro"
        # mode=ro still needs the -shm file of a WAL database, which a read-only folder cannot get;
        # then immutable=1 reads the main file alone (in a read-only folder no writer can be running, and
        # a -wal left there was copied out with its database above)
        attempts = [uri, uri + "&immutable=1"]
        deadline = time.monotonic() + READER_PATIENCE_S
        while True:
            conn, app_id, tables, error = self._first_readable(attempts)
            if conn is None:
                raise UserError(f"--db {self.path}: not a readable results database ({error})")
            if app_id == APPLICATION_ID:
                return conn
            conn.close()
            if app_id != 0 or tables:
                raise UserError(
                    f"--db {self.path}: an SQLite file that is not an iclrbench results database; untouched"
                )
            if time.monotonic() >= deadline:
                raise UserError(
                    f"--db {self.path}: an empty results file, perhaps being created by another bench "
                    "process; try again once it has stored a run"
                )
            time.sleep(0.05)

    @staticmethod
    def _first_readable(
        attempts: list[str],
    ) -> tuple[sqlite3.Connection | None, int, set[str], Exception | None]:
        error: Exception | None = None
        for candidate in attempts:
            conn = None
            try:
                conn = sqlite3.connect(
                    candidate, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None
                )
                app_id, tables = identity(conn)
            except sqlite3.DatabaseError as exc:
                if conn is not None:
                    conn.close()  # the failed attempt's handle, before the next one
                error = exc
                continue
            return conn, app_id, tables, None
        return None, 0, set(), error

    def _readable_path(self) -> Path:
        """The file to read: the store itself, or -- when it has a ``-wal`` but no ``-shm`` in a folder
        that cannot be written -- a private copy of both, in which SQLite can replay the log (read in
        place, such a store shows only its checkpointed runs; committed runs would go missing)."""
        wal, shm = Path(f"{self.path}-wal"), Path(f"{self.path}-shm")
        folder = self.path.parent if str(self.path.parent) else Path(".")
        try:
            has_log = wal.is_file() and wal.stat().st_size > 0
        except OSError:
            has_log = False
        if not has_log or shm.exists() or os.access(folder, os.W_OK):
            return self.path
        self._copy_dir = tempfile.TemporaryDirectory(prefix="iclrbench-read-")
        copy = Path(self._copy_dir.name) / self.path.name
        try:
            shutil.copyfile(self.path, copy)
            shutil.copyfile(wal, Path(f"{copy}-wal"))
        except OSError as exc:
            raise UserError(f"--db {self.path}: cannot read its write-ahead log ({exc.strerror})") from None
        return copy

    def close(self) -> None:
        self._conn.close()
        if self._copy_dir is not None:
            self._copy_dir.cleanup()

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
            self._conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:  # disk full, I/O error, a damaged page
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise UserError(
                f"--db {self.path}: cannot write the results file ({exc}); every run stored before is intact"
            ) from None
        except BaseException:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise

    # runs ---------------------------------------------------------------------------------------
    def put(self, result: RunResult) -> int:
        """Insert or replace the run with ``result``'s key, committed at once; returns its run id."""
        return self.put_many([result])[0]

    def put_many(self, results: Iterable[RunResult]) -> list[int]:
        """Insert or replace several runs in one transaction (imports, tests); returns their run ids."""
        placeholders = ", ".join("?" for _ in COLUMNS)
        insert = f"INSERT INTO runs ({', '.join(COLUMNS)}) VALUES ({placeholders})"
        ids = []
        with self._write() as conn:
            for result in results:
                row = result.to_json()
                values = [result.key] + [
                    json.dumps(row[c], sort_keys=True) if c in JSON_FIELDS else row[c] for c in COLUMNS[1:]
                ]
                conn.execute("DELETE FROM runs WHERE run_key = ?", (result.key,))
                result.run_id = int(conn.execute(insert, values).lastrowid or 0)
                ids.append(result.run_id)
        return ids

    def rename_algorithm(self, task: str, old: str, new: str) -> int:
        """Give the runs stored under ``task``'s algorithm ``old`` its new name ``new``, run keys included
        (:func:`~iclrbench.core.result.run_key`'s format), so they are found and reused under it. A row whose
        new key is already taken is left as it was. Returns the number of rows renamed."""
        if (
            self._conn.execute(
                "SELECT 1 FROM runs WHERE task = ? AND algorithm = ? LIMIT 1", (task, old)
            ).fetchone()
            is None
        ):
            return 0
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE OR IGNORE runs SET algorithm = ?, run_key = task || '|v' || task_version || '|' "
                "|| config_hash || '|' || ? || '|' || params_hash || '|' || seed "
                "WHERE task = ? AND algorithm = ?",
                (new, new, task, old),
            )
        return cursor.rowcount

    def get(self, key: str) -> RunResult | None:
        """The run stored under ``key``; ``None`` when there is none, or when its row is unreadable (it is
        reported, and a new result replaces it)."""
        rows = self._select("SELECT * FROM runs WHERE run_key = ?", (key,))
        return rows[0] if rows else None

    def get_run(
        self, task: str, version: int, config_hash: str, algorithm: str, params_hash: str, seed: int
    ) -> RunResult | None:
        return self.get(run_key(task, version, config_hash, algorithm, params_hash, seed))

    def by_id(self, run_id: int) -> RunResult | None:
        rows = self._select("SELECT * FROM runs WHERE run_id = ?", (run_id,), report=False)
        if not rows and run_id in self.unreadable:
            raise UserError(f"run {run_id} in {self.path} is unreadable (its stored JSON is broken)")
        return rows[0] if rows else None

    def runs(self, task: str | None = None, status: str | None = None) -> list[RunResult]:
        sql, args = "SELECT * FROM runs WHERE 1 = 1", []
        if task is not None:
            sql += " AND task = ?"
            args.append(task)
        if status is not None:
            sql += " AND status = ?"
            args.append(status)
        return self._select(sql + " ORDER BY run_id", args)

    def count(self) -> int:
        try:
            return int(self._conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
        except sqlite3.DatabaseError as exc:
            raise UserError(f"--db {self.path}: the results file is damaged ({exc})") from None

    def _select(self, sql: str, args: Iterable[Any] = (), *, report: bool = True) -> list[RunResult]:
        """The runs ``sql`` selects; a row that cannot be read (broken JSON, wrong fields) is left out and
        (``report``) named once on stderr; a damaged file (a malformed page) is one line, never a
        traceback."""
        out, bad = [], []
        try:
            for row in self._conn.execute(sql, tuple(args)):
                try:
                    out.append(self._to_result(row))
                except (ValueError, TypeError, KeyError):
                    bad.append(int(row[0]))
        except sqlite3.DatabaseError as exc:
            raise UserError(
                f"--db {self.path}: the results file is damaged ({exc}); 'sqlite3 {self.path} .recover' can "
                "save its readable rows into a new file"
            ) from None
        new = sorted(set(bad) - self.unreadable)
        self.unreadable.update(new)
        if new and report:
            shown = ", ".join(map(str, new[:10])) + (f" and {len(new) - 10} more" if len(new) > 10 else "")
            print(
                f"bench: skipped {len(new)} unreadable run(s) in {self.path} (run id {shown})",
                file=sys.stderr,
            )
        return out

    def _to_result(self, row: Iterable[Any]) -> RunResult:
        names = ["run_id", *COLUMNS]
        data = dict(zip(names, row, strict=True))
        data.pop("run_key")
        for c in JSON_FIELDS:
            data[c] = json.loads(data[c])
        return RunResult(**data)

    # claims -------------------------------------------------------------------------------------
    def put_claim(self, claim: ClaimResult, created_at: str) -> None:
        """Store a verdict: one per (task, claim, budget, task version, config hash), the newest kept."""
        with self._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO claims (task, claim_id, budget, statement, verdict, measured, "
                "created_at, task_version, config_hash, claim_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    claim.task,
                    claim.id,
                    claim.budget,
                    claim.statement,
                    claim.verdict,
                    json.dumps(claim.measured, sort_keys=True),
                    created_at,
                    claim.task_version,
                    claim.config_hash,
                    claim.claim_version,
                ),
            )

    def claims(self, task: str | None = None, *, all_versions: bool = False) -> list[ClaimResult]:
        """Stored verdicts, ordered by task, claim and budget.

        By default only those judged on the task's current version (the installed task's ``version``)
        by the claim's current rule (``Claim.version``), one per (task, claim, budget): the newest if
        several base configs were judged. A claim the task no longer has is left out. For a task that is
        not installed, its newest stored version stands in. ``all_versions`` returns every verdict.
        """
        versioned = has_claim_versions(self._conn)  # a read-only store may predate the columns
        extra = "task_version, config_hash, claim_version" if versioned else "0, '', 0"
        sql = f"SELECT task, claim_id, statement, verdict, measured, budget, {extra}, created_at FROM claims"
        args: list[Any] = []
        if task is not None:
            sql += " WHERE task = ?"
            args.append(task)
        order = " ORDER BY task, claim_id, budget" + (", task_version, config_hash" if versioned else "")
        try:
            rows = self._conn.execute(sql + order, args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise UserError(f"--db {self.path}: the results file is damaged ({exc})") from None
        results = []
        for t, i, s, v, m, b, tv, ch, cv, created in rows:
            try:
                measured = json.loads(m)
            except ValueError:  # a verdict whose figures cannot be read is no verdict
                continue
            results.append(
                (
                    created,
                    ClaimResult(
                        task=t,
                        id=i,
                        statement=s,
                        verdict=v,
                        measured=measured,
                        budget=b,
                        task_version=int(tv),
                        config_hash=ch,
                        claim_version=int(cv),
                    ),
                )
            )
        if all_versions:
            return [c for _, c in results]
        return _current_claims(results)

    def integrity(self) -> str:
        return str(self._conn.execute("PRAGMA integrity_check").fetchone()[0])


def _current_claims(results: list[tuple[str, ClaimResult]]) -> list[ClaimResult]:
    """The verdicts of each task's current version and each claim's current rule (see ``claims``);
    ``results`` are (created_at, verdict) pairs."""
    from iclrbench.core import catalog  # late: the store itself needs no task

    installed = {cls.id: cls for cls in catalog.task_classes()}
    newest_stored: dict[str, int] = {}
    for _, c in results:
        newest_stored[c.task] = max(newest_stored.get(c.task, c.task_version), c.task_version)
    kept: dict[tuple[str, str, str], tuple[str, ClaimResult]] = {}
    for created, c in results:
        cls = installed.get(c.task)
        if cls is None:
            if c.task_version != newest_stored[c.task]:
                continue
        else:
            rules = {claim.id: claim.stored_version for claim in cls.claims}
            if c.task_version != cls.version or rules.get(c.id) != c.claim_version:
                continue
        key = (c.task, c.id, c.budget)
        if key not in kept or created >= kept[key][0]:  # several base configs: the newest verdict
            kept[key] = (created, c)
    return [c for _, c in kept.values()]
