"""core.cache.build_once: one build under a lock, atomic, and nothing left behind by a failed build."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from iclrbench.core.cache import build_once


def test_builds_once_and_keeps_the_suffix(tmp_path: Path) -> None:
    calls: list[Path] = []

    def write(tmp: Path) -> None:
        calls.append(tmp)
        tmp.write_text("weights")

    path = tmp_path / "sub" / "model.npz"
    assert build_once(path, write) == path and build_once(path, write) == path
    assert len(calls) == 1 and calls[0].suffix == ".npz" and calls[0] != path
    assert path.read_text() == "weights" and not calls[0].exists()


def test_a_failed_build_leaves_no_file(tmp_path: Path) -> None:
    def fail(tmp: Path) -> None:
        tmp.write_text("half")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        build_once(tmp_path / "m.pt", fail)
    assert not (tmp_path / "m.pt").exists()


def _slow_build(path: str, log: str) -> None:
    def write(tmp: Path) -> None:
        with open(log, "a") as f:
            f.write("built\n")
        time.sleep(0.5)
        tmp.write_text("x")

    build_once(Path(path), write)


def test_parallel_callers_wait_for_one_build(tmp_path: Path) -> None:
    path, log = tmp_path / "m.pt", tmp_path / "log"
    procs = [multiprocessing.Process(target=_slow_build, args=(str(path), str(log))) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    assert path.read_text() == "x" and log.read_text().count("built") == 1
