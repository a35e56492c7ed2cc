"""Results as data: bench show, bench export (CSV / Parquet / JSON), iclrbench.load_results."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import pandas as pd
import pytest

import iclrbench
from iclrbench.core.store import ResultStore
from tests.conftest import BenchRunner

pytestmark = pytest.mark.usefixtures("plugin")


@pytest.fixture
def filled(bench: BenchRunner, db: Path) -> Path:
    assert (
        bench("run", "noop", "constant", "uniform", "--seeds", "0-3", "--budget", "smoke", "--db", db)[0] == 0
    )
    assert bench("run", "noop", "uniform", "--seeds", "0-1", "--set", "fail=true", "--db", db)[0] == 1
    return db


def test_load_results_has_one_row_per_run_and_one_column_per_metric(filled: Path) -> None:
    frame = iclrbench.load_results(filled)
    assert len(frame) == 10 and {"score", "busy"} <= set(frame.columns)
    ok = frame[frame.status == "ok"]
    assert (ok[ok.algorithm == "constant"]["score"] == 1.0).all()
    assert ok.groupby("algorithm")["score"].count().to_dict() == {"constant": 4, "uniform": 4}
    assert frame[frame.status == "failed"]["error"].str.contains("asked to fail").all()
    for column in ("config.sleep", "provenance.git_sha", "provenance.python", "provenance.threads", "seed"):
        assert column in frame.columns
    assert len(iclrbench.load_results(filled, status="ok")) == 8


def test_show_prints_every_field_of_one_run(bench: BenchRunner, filled: Path) -> None:
    run = ResultStore(filled).runs("noop")[0]
    code, out, _ = bench("show", run.run_id, "--db", filled)
    assert code == 0 and "score" in out and run.config_hash in out and "git_sha" in out
    code, out, _ = bench("show", run.run_id, "--db", filled, "--format", "json")
    assert code == 0 and json.loads(out)["metrics"] == run.metrics


@pytest.mark.parametrize("run_id", ["999", "abc", "-1"])
def test_show_of_a_missing_run_is_one_line_and_exit_2(bench: BenchRunner, filled: Path, run_id: str) -> None:
    code, _, err = bench("show", run_id, "--db", filled)
    assert code == 2 and err.count("\n") == 1


def test_export_csv_json_and_parquet_carry_the_same_runs(
    bench: BenchRunner, filled: Path, tmp_path: Path
) -> None:
    code, out, _ = bench("export", "--db", filled, "--task", "noop")
    csv = pd.read_csv(io.StringIO(out))
    code_j, out_j, _ = bench("export", "--db", filled, "--format", "json")
    records = json.loads(out_j)
    target = tmp_path / "runs.parquet"
    code_p, _, _ = bench("export", "--db", filled, "--format", "parquet", "--output", target)
    parquet = pd.read_parquet(target)
    assert code == code_j == code_p == 0
    assert len(csv) == len(records) == len(parquet) == 10
    assert sorted(csv.run_id) == sorted(r["run_id"] for r in records) == sorted(parquet.run_id)
    pd.testing.assert_series_equal(
        csv.sort_values("run_id")["score"].reset_index(drop=True),
        parquet.sort_values("run_id")["score"].reset_index(drop=True),
    )
    code, out, _ = bench("export", "--db", filled, "--status", "failed")
    assert len(pd.read_csv(io.StringIO(out))) == 2


def test_export_refuses_parquet_to_a_terminal_and_unwritable_paths(bench: BenchRunner, filled: Path) -> None:
    code, _, err = bench("export", "--db", filled, "--format", "parquet")
    assert code == 2 and "--output" in err
    code, _, err = bench("export", "--db", filled, "--output", "/proc/nope/runs.csv")
    assert code == 2 and err.count("\n") == 1


def test_an_older_task_version_is_never_mixed_in_unless_asked(bench: BenchRunner, filled: Path) -> None:
    store = ResultStore(filled)
    old = [dataclasses.replace(r, task_version=0, run_id=None) for r in store.runs("noop", status="ok")]
    for r in old:
        r.metrics = {**r.metrics, "score": -100.0}  # what the old version measured differs
    store.put_many(old)
    code, out, _ = bench("leaderboard", "--db", filled, "--format", "json", "--task", "noop")
    rows = json.loads(out)
    assert code == 0 and {r["task_version"] for r in rows} == {1}
    assert all(r["score_mean"] > -100 for r in rows if r["n"])
    code, out, _ = bench("leaderboard", "--db", filled, "--format", "json", "--all-versions")
    assert {r["task_version"] for r in json.loads(out)} == {0, 1}
    code, out, _ = bench("export", "--db", filled)
    assert set(pd.read_csv(io.StringIO(out)).task_version) == {1}
    code, out, _ = bench("export", "--db", filled, "--all-versions")
    assert set(pd.read_csv(io.StringIO(out)).task_version) == {0, 1}
