"""Where tasks keep what they build once and reuse (processed data sets, pre-trained towers, trained
language models, quantised model files): ``$ICLRBENCH_CACHE``, else ``.iclrbench/cache`` under the working
folder. Everything in it can be rebuilt from seeds; deleting it costs time, never results."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path


def cache_root() -> Path:
    """The task cache: ``$ICLRBENCH_CACHE``, else ``.iclrbench/cache``."""
    return Path(os.environ.get("ICLRBENCH_CACHE") or Path(".iclrbench") / "cache")


def build_once(path: Path, write: Callable[[Path], None]) -> Path:
    """``path``, written by ``write(tmp)`` the first time only: under a file lock beside it, so parallel
    runs wait for one build instead of each doing it, and through an atomic rename, so a reader never sees
    half a file and a killed build leaves nothing behind but a stray temporary file. ``tmp`` keeps
    ``path``'s suffix (``np.savez`` appends ``.npz`` otherwise)."""
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():  # another process may have built it while this one waited
            tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
            write(tmp)
            os.replace(tmp, path)
    return path
