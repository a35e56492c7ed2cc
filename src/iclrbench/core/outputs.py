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
from iclrbench.core.store import refuse_overwrite


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
