"""Output files (``--output``, ``--html``) written whole or not at all.

A regular file is written to a temporary file in the same folder and renamed onto its target only once the
write succeeded, so a failure (a full disk, a writer that raises) leaves the target as it was and no
partial or empty file behind. A target that is not a regular file (``/dev/stdout``, ``/dev/full``, a pipe)
cannot be renamed onto: it is written directly, and a failure is one line too. Every target passes the
store's guard first: never a results store, an SQLite database or one's journal.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from iclrbench.core.errors import UserError
from iclrbench.core.sqlite_file import COMPANIONS, SQLITE_HEADER, read_header

#: the first bytes of a write-ahead log (two byte orders) and of a rollback journal
_WAL_MAGICS = (bytes.fromhex("377f0682"), bytes.fromhex("377f0683"))
_JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")


def _is_sqlite_file(path: Path) -> bool | None:
    """Whether ``path`` is an SQLite database or one's ``-wal`` / ``-shm`` / ``-journal`` (by its first
    bytes, or by its name beside a database); ``None`` when it cannot be read to tell."""
    for suffix in COMPANIONS[1:]:
        if path.name.endswith(suffix):
            base = path.with_name(path.name[: -len(suffix)])
            try:
                if base.is_file() and read_header(base) == SQLITE_HEADER:
                    return True
            except OSError:
                return None
    try:
        if path.stat().st_size == 0:
            return False  # an empty file holds nothing to lose
        head = read_header(path)
    except OSError:
        return None
    return head == SQLITE_HEADER or head[:4] in _WAL_MAGICS or head[:8] == _JOURNAL_MAGIC


def refuse_overwrite(
    target: str | os.PathLike[str], store: str | os.PathLike[str] | None, option: str
) -> None:
    """Raise :class:`UserError` if writing ``target`` could replace the results store ``store`` (or its
    ``-wal``/``-shm``/``-journal``) or any SQLite database or its companion files, however the file is
    named: another spelling, a symbolic link or a hard link to it (``os.path.samefile``), a different
    database altogether (its first bytes), or a ``-wal`` / ``-shm`` / ``-journal`` beside one (overwriting
    a database's un-checkpointed log loses its committed transactions; a hot journal's, makes its crashed
    writes permanent). A file whose first bytes cannot be read is refused too, unless it is empty."""
    target_path = Path(target)
    if store is not None:
        for suffix in COMPANIONS:
            companion = Path(f"{store}{suffix}")
            same = (
                os.path.samefile(target_path, companion)
                if target_path.exists() and companion.exists()
                else os.path.realpath(target_path) == os.path.realpath(companion)
            )
            if same:
                raise UserError(
                    f"{option} {target}: that is the results store {store}{suffix}; refusing to overwrite it"
                )
    if target_path.is_file():
        verdict = _is_sqlite_file(target_path)
        if verdict is None:
            raise UserError(
                f"{option} {target}: cannot be read to check that it is not a database; "
                "refusing to overwrite it"
            )
        if verdict:
            raise UserError(
                f"{option} {target}: is an SQLite database or one's journal; refusing to overwrite it"
            )
    elif target_path.name.endswith(COMPANIONS[1:]) and _is_sqlite_file(target_path):
        raise UserError(f"{option} {target}: is the journal of an SQLite database; refusing to write it")


def _regular_or_absent(target: Path) -> bool:
    try:
        return stat.S_ISREG(target.stat().st_mode)
    except FileNotFoundError:
        return True


def write_output(
    target: str | os.PathLike[str],
    write: Callable[[Path], None],
    option: str,
    store: str | os.PathLike[str] | None = None,
) -> Path:
    """Call ``write(path)`` to produce ``target`` atomically and return ``target``; any failure is a
    :class:`UserError` naming ``option`` (one line), with ``target`` untouched."""
    path = Path(target)
    refuse_overwrite(path, store, option)
    if not _regular_or_absent(path):
        try:
            write(path)
        except OSError as exc:
            raise UserError(f"{option} {target}: cannot write ({exc.strerror or exc})") from None
        return path
    folder = path.parent if str(path.parent) else Path(".")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=folder)
    except OSError as exc:
        raise UserError(f"{option} {target}: cannot write ({exc.strerror or exc})") from None
    os.close(fd)
    partial = Path(name)
    try:
        write(partial)
        with open(partial, "rb+") as fh:  # on disk before the rename makes it the target
            os.fsync(fh.fileno())
        if path.exists():
            with contextlib.suppress(OSError):
                os.chmod(partial, stat.S_IMODE(path.stat().st_mode))
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(partial, 0o666 & ~umask)
        os.replace(partial, path)
    except OSError as exc:
        raise UserError(f"{option} {target}: cannot write ({exc.strerror or exc}); left as it was") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
    return path
