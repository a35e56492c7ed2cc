"""Config values through the real ``bench`` command line: bad ones are one line, exit 2, nothing stored."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.conftest import TASK, BenchRunner


def _rows(db: Path) -> list[tuple[str, str]]:
    if not db.exists():
        return []
    return sqlite3.connect(db).execute("SELECT run_key, metrics FROM runs ORDER BY run_key").fetchall()


@pytest.mark.parametrize(
    ("algorithm", "setting", "message"),
    [
        ("random-price", "noise=nan", "noise: expected a finite float, got 'nan'"),
        ("random-price", "noise=-inf", "noise: expected a finite float, got '-inf'"),
        ("ellipsoid-sbb", "epsilon_scale=inf", "epsilon_scale: expected a finite float, got 'inf'"),
        ("ellipsoid-sbb", "epsilon_scale=1e400", "epsilon_scale: expected a finite float, got '1e400'"),
        ("random-price", "horizon=nan", "horizon: expected int, got 'nan'"),
        ("random-price", "feedback=two-bits", "feedback: 'two-bits' is not one of two-bit, one-bit"),
    ],
)
def test_non_finite_and_malformed_values_exit_2_in_one_line_and_store_nothing(
    bench: BenchRunner, db: Path, algorithm: str, setting: str, message: str
) -> None:
    bench(
        "run", TASK, "random-price", "--seeds", "0", "--budget", "smoke", "--set", "horizon=100", "--db", db
    )
    before = _rows(db)
    code, _out, err = bench(
        "run", TASK, algorithm, "--seeds", "0-4", "--budget", "smoke", "--set", setting, "--db", db
    )
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("bench: error:") and message in err, err
    assert _rows(db) == before
