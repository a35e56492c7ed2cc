"""The CLI end to end, in-process: outputs, JSON shapes, and one-line exit-2 errors that change nothing."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import TASK, BenchRunner


def test_list_shows_tasks_then_algorithms_with_roles(bench: BenchRunner) -> None:
    code, out, _ = bench("list")
    assert code == 0 and TASK in out and "ellipsoid-sbb" in out and "oracle" in out
    code, out, _ = bench("list", "--format", "json")
    data = json.loads(out)
    task = next(t for t in data if t["id"] == TASK)
    assert {"name": "ellipsoid-sbb", "role": "reference"}.items() <= task["algorithms"][0].items()


def test_info_shows_paper_config_budgets_metrics_algorithms_claims(bench: BenchRunner) -> None:
    code, out, _ = bench("info", TASK)
    assert code == 0
    for needle in (
        "Feature-Based Online Bilateral Trade",
        "horizon",
        "default 100000",
        "smoke",
        "paper",
        "regret",
        "primary",
        "one-bit-gbb",
        "ellipsoid-log-regret",
    ):
        assert needle in out
    info = json.loads(bench("info", TASK, "--format", "json")[1])
    assert info["metrics"][0]["name"] == "regret" and info["paper"]["arxiv"] == "2405.18183"


def test_run_prints_json_objects_and_stores_them(bench: BenchRunner, db: Path) -> None:
    code, out, _ = bench(
        "run",
        TASK,
        "ellipsoid-sbb",
        "random-price",
        "--seeds",
        "0,2",
        "--budget",
        "smoke",
        "--set",
        "horizon=500",
        "--db",
        db,
        "--format",
        "json",
    )
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 4
    for row in rows:
        assert {"task", "algorithm", "seed", "config", "metrics", "status", "wall_s"} <= row.keys()
        assert row["status"] == "ok" and row["config"]["horizon"] == 500 and row["metrics"]["regret"] >= 0
    code, out, _ = bench(
        "run",
        TASK,
        "ellipsoid-sbb",
        "--seeds",
        "0",
        "--budget",
        "smoke",
        "--set",
        "horizon=500",
        "--db",
        db,
        "--format",
        "json",
    )
    assert json.loads(out)["reused"] is True


def test_run_all_skips_what_does_not_apply(bench: BenchRunner, db: Path) -> None:
    code, out, err = bench(
        "run", TASK, "--all", "--seeds", "0", "--budget", "smoke", "--set", "horizon=300", "--db", db
    )
    assert code == 0 and "one-bit-gbb" in err and "6 runs: 6 ran" in out
    code, out, err = bench(
        "run",
        TASK,
        "--all",
        "--seeds",
        "0",
        "--budget",
        "smoke",
        "--db",
        db,
        "--set",
        "horizon=300",
        "--set",
        "feedback=one-bit",
        "--set",
        "budget_balance=global",
    )
    assert code == 0 and "one-bit-gbb" in out and "ellipsoid-sbb" in err


def _rows(db: Path) -> list[tuple]:  # type: ignore[type-arg]
    if not db.exists():
        return []
    return sqlite3.connect(db).execute("SELECT run_key, metrics FROM runs ORDER BY run_key").fetchall()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "no-such-task", "--all"], "unknown task 'no-such-task'"),
        (["run", TASK, "elipsoid-sbb"], "did you mean 'ellipsoid-sbb'"),
        (["run", TASK, "--all", "--set", "horizn=10"], "did you mean 'horizon'"),
        (["run", TASK, "--all", "--set", "d=eight"], "d: expected int, got 'eight'"),
        (["run", TASK, "--all", "--set", "d"], "expected KEY=VALUE"),
        (["run", TASK, "--all", "--set", "noise=0.5"], "above the maximum"),
        (["run", TASK, "--all", "--seeds", "3-1"], "--seeds '3-1'"),
        (["run", TASK, "--all", "--budget", "huge"], "invalid choice"),
        (["run", TASK], "name at least one algorithm"),
        (["run", TASK, "one-bit-gbb"], "needs global budget balance"),
        (["info", "bilateral"], "unknown task"),
        (["claims", "nope"], "unknown task"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_changes_nothing(
    bench: BenchRunner, db: Path, args: list[str], message: str
) -> None:
    bench(
        "run", TASK, "random-price", "--seeds", "0", "--budget", "smoke", "--set", "horizon=100", "--db", db
    )
    before = _rows(db)
    code, _out, err = bench(*args, "--db", db) if args[0] in ("run", "claims") else bench(*args)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("bench: error:") and message in err
    assert _rows(db) == before


def test_a_non_results_file_at_db_is_left_alone(bench: BenchRunner, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("precious")
    code, _, err = bench("run", TASK, "random-price", "--budget", "smoke", "--db", notes)
    assert code == 2 and "not a results database" in err and notes.read_text() == "precious"
    code, _, err = bench("leaderboard", "--db", notes)
    assert code == 2 and notes.read_text() == "precious"


def test_unwritable_db_is_exit_2(bench: BenchRunner, tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    code, _, err = bench("run", TASK, "random-price", "--budget", "smoke", "--db", blocker / "x.sqlite")
    assert code == 2 and "cannot create" in err


def test_icrlbench_db_environment_variable(
    bench: BenchRunner, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ICLRBENCH_DB", str(db))
    bench("run", TASK, "random-price", "--seeds", "0", "--budget", "smoke", "--set", "horizon=100")
    assert len(_rows(db)) == 1


def test_leaderboard_formats(bench: BenchRunner, db: Path) -> None:
    bench(
        "run",
        TASK,
        "ellipsoid-sbb",
        "random-price",
        "--seeds",
        "0-2",
        "--budget",
        "smoke",
        "--set",
        "horizon=1000",
        "--db",
        db,
    )
    code, out, _ = bench("leaderboard", "--db", db)
    assert code == 0 and "ellipsoid-sbb" in out and "95%" in out
    records = json.loads(bench("leaderboard", "--db", db, "--format", "json")[1])
    ranks = {r["algorithm"]: r["rank"] for r in records}
    assert ranks == {"ellipsoid-sbb": 1, "random-price": 2}
    best = next(r for r in records if r["algorithm"] == "ellipsoid-sbb")
    assert best["n"] == 3 and best["regret_ci_low"] <= best["regret_mean"] <= best["regret_ci_high"]
    csv_out = bench("leaderboard", "--db", db, "--format", "csv")[1]
    assert csv_out.splitlines()[0].startswith("task,task_version") and len(csv_out.splitlines()) == 3
    md = bench("leaderboard", "--db", db, "--format", "markdown")[1]
    assert "| 1 | ellipsoid-sbb |" in md


def test_claims_json_shape(bench: BenchRunner, db: Path) -> None:
    code, out, _ = bench("claims", TASK, "--budget", "smoke", "--db", db, "--format", "json")
    assert code == 0
    claims = json.loads(out)
    assert {c["id"] for c in claims} == {"ellipsoid-log-regret", "noisy-two-thirds", "one-bit-global-budget"}
    for c in claims:
        assert c["verdict"] in ("reproduced", "not_reproduced", "inconclusive")
        assert {"task", "statement", "measured"} <= c.keys()


def test_ctrl_c_keeps_finished_runs(tmp_path: Path) -> None:
    """SIGINT to a real ``bench run`` sweep: exit 130, the store intact with every finished run."""
    db = tmp_path / "r.sqlite"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "iclrbench.cli",
            "run",
            TASK,
            "--all",
            "--seeds",
            "0-200",
            "--budget",
            "small",
            "--db",
            str(db),
            "--format",
            "json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 60
    assert proc.stdout is not None
    first = proc.stdout.readline()  # at least one run has finished and been stored
    assert json.loads(first)["status"] == "ok"
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=max(1, deadline - time.time()))
    assert proc.returncode == 130 and "every finished run is stored" in err
    printed = 1 + len([line for line in out.splitlines() if line.strip()])
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT COUNT(*) FROM runs WHERE status = 'ok'").fetchone()[0] >= printed


# ------------------------------------------------------------------------------- unavailable tasks
@pytest.fixture
def unavailable(monkeypatch: pytest.MonkeyPatch) -> str:
    """The bilateral-trade task as if its packages were missing; making it, or importing its algorithm
    modules, would fail loudly (neither may happen to list it or refuse it)."""
    from iclrbench.core import catalog
    from iclrbench.core.task import Requirement

    cls = next(c for c in catalog.task_classes() if c.id == TASK)
    monkeypatch.setattr(cls, "requires", Requirement(extra="nope", modules=("iclrbench_no_such_module",)))
    monkeypatch.setattr(cls, "algorithm_modules", ("iclrbench_no_such_module.algorithms",))
    line = cls.unavailable()
    assert line is not None and "pip install 'iclrbench[nope]'" in line
    return line


def test_list_shows_an_unavailable_task_with_its_pip_line(
    bench: BenchRunner, unavailable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from iclrbench.core import catalog

    cls = next(c for c in catalog.task_classes() if c.id == TASK)

    def no_instances(self: object) -> None:
        raise AssertionError("bench list made an unavailable task")

    monkeypatch.setattr(cls, "__init__", no_instances)
    code, out, err = bench("list")
    assert code == 0, err
    section = out.split(f"algorithms of {TASK}:")[1].split("\nalgorithms of")[0]
    assert unavailable in section and "ellipsoid-sbb" not in section
    rows = json.loads(bench("list", "--format", "json")[1])
    row = next(r for r in rows if r["id"] == TASK)
    assert row["available"] is False and row["unavailable"] == unavailable and row["algorithms"] == []
    others = {r["id"]: r["available"] for r in rows if r["id"] != TASK}
    assert others == {t: t in catalog.available_task_ids() for t in others}


def test_every_command_on_an_unavailable_task_is_its_one_line(
    bench: BenchRunner, unavailable: str, db: Path, tmp_path: Path
) -> None:
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(f"budget: smoke\nseeds: 0\ntasks:\n  {TASK}:\n    algorithms: all\n")
    for args in (
        ["run", TASK, "--all", "--budget", "smoke", "--db", db],
        ["run", TASK, "ellipsoid-sbb", "--budget", "smoke", "--db", db],
        ["claims", TASK, "--budget", "smoke", "--db", db],
        ["info", TASK],
        ["sweep", sweep_file, "--db", db],
    ):
        code, out, err = bench(*args)
        assert code == 2, (args, out, err)
        assert err == f"bench: error: {unavailable}\n", (args, err)
        assert not db.exists(), args  # nothing stored, not even an empty results file


def test_claims_of_every_task_skip_an_unavailable_one_and_say_so(
    bench: BenchRunner, unavailable: str, db: Path, plugin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from iclrbench.core import catalog

    chosen = [c for c in catalog.task_classes() if c.id in (TASK, "noop")]
    monkeypatch.setattr(catalog, "task_classes", lambda: chosen)
    code, out, err = bench("claims", "--budget", "smoke", "--db", db, "--format", "json")
    assert code == 0, err
    assert f"skipped {unavailable}" in err and json.loads(out) == []  # noop has no claims


# ------------------------------------------------------------------------------- claims and versions
def test_claims_print_older_verdicts_only_with_all_versions(bench: BenchRunner, db: Path) -> None:
    from iclrbench.core.store import ResultStore
    from iclrbench.core.task import ClaimResult

    older = ClaimResult(TASK, "ellipsoid-log-regret", "s", "not_reproduced", {"slope": 9}, "smoke", 0, "", 0)
    with ResultStore(db) as store:
        store.put_claim(older, "2025-01-01T00:00:00+00:00")
    code, out, _ = bench("claims", TASK, "--budget", "smoke", "--db", db, "--format", "json")
    assert code == 0
    current = json.loads(out)
    assert len(current) == 3 and all(c["current"] and c["task_version"] >= 1 for c in current)
    assert all(c["config_hash"] and c["claim_version"] >= 1 for c in current)
    code, out, _ = bench(
        "claims", TASK, "--budget", "smoke", "--db", db, "--format", "json", "--all-versions"
    )
    every = json.loads(out)
    assert len(every) == 4
    (old,) = [c for c in every if not c["current"]]
    assert (old["task_version"], old["verdict"], old["measured"]) == (0, "not_reproduced", {"slope": 9})
    text = bench("claims", TASK, "--budget", "smoke", "--db", db, "--all-versions")[1]
    assert "stored: task v0" in text
    with ResultStore(db, readonly=True) as store:  # what the page and bench leaderboard read
        assert {c.task_version for c in store.claims(TASK)} == {current[0]["task_version"]}


# ------------------------------------------------------------------------------------------- demo
def test_demo_prints_primary_metrics_judges_no_claims_and_names_the_claims_command(
    bench: BenchRunner, db: Path, tmp_path: Path, plugin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two tasks whose primary metrics differ (regret, score); the demo's smoke runs never judge a claim
    (each is defined at its own budget); it ends with each task's 'bench claims' command."""
    from iclrbench.core import catalog
    from iclrbench.core.store import ResultStore

    chosen = [c for c in catalog.task_classes() if c.id in (TASK, "noop")]
    monkeypatch.setattr(catalog, "task_classes", lambda: chosen)
    monkeypatch.setenv("FLAKY_DIR", str(tmp_path))
    (tmp_path / "seed-0").touch()  # the flaky plugin algorithm has had its failure
    page = tmp_path / "page.html"
    code, _out, err = bench("demo", "--seeds", "0", "--db", db, "--html", page)
    assert code == 0, err
    lines = err.splitlines()
    assert any("seed=0" in line and "regret=" in line for line in lines)
    assert any("constant" in line and "score=1" in line for line in lines)
    assert not any("noop" in line or "constant" in line for line in lines if "regret=" in line)
    assert f"bench claims {TASK} --db {db}" in err
    assert "claim " not in err.replace("bench claims", "")  # no verdict printed
    with ResultStore(db, readonly=True) as store:
        assert store.claims(all_versions=True) == []
    assert page.exists()
