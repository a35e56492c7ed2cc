"""Shared fixtures: a throwaway results database and the ``bench`` CLI called in-process."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from iclrbench.cli import main

TASK = "contextual-bilateral-trade"

BenchRunner = Callable[..., tuple[int, str, str]]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "results.sqlite"


@pytest.fixture
def bench(capsys: pytest.CaptureFixture[str]) -> BenchRunner:
    """``bench(*args) -> (exit code, stdout, stderr)``."""

    def run(*args: object) -> tuple[int, str, str]:
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return run
