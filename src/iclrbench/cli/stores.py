"""The results store as a command opens it: created for writing, read-only for reading, and closed by
:func:`iclrbench.cli.main` when the command ends, however it ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# core.store (sqlite3 and the schema) is imported inside the functions: bench list opens no store and
# stays fast

_OPEN_STORES: list[Any] = []


def open_store(db: str | None) -> Any:
    """The store for a command that writes: created if absent, and refused (one line, exit 2) before
    anything is computed when it cannot be written."""
    from iclrbench.core.store import ResultStore

    return _opened(ResultStore(db))


def read_store(db: str | None) -> Any:
    """The store for a command that only reads: opened read-only, so a read-only file still works."""
    from iclrbench.core.store import ResultStore

    return _opened(ResultStore(db, readonly=True))


def _opened(store: Any) -> Any:
    """Remember ``store`` so that :func:`close_stores` closes it when the command ends."""
    _OPEN_STORES.append(store)
    return store


def close_stores() -> None:
    """Close every store a command opened (newest first)."""
    while _OPEN_STORES:
        _OPEN_STORES.pop().close()


def guard_output(target: str | Path, store_path: Any, option: str) -> None:
    """Refuse an output path that is the results store, or any SQLite file (one line, exit 2)."""
    from iclrbench.core.outputs import refuse_overwrite

    refuse_overwrite(target, store_path, option)
