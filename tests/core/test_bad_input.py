"""Bad input is one line on stderr and exit code 2 with the store unchanged, never a traceback (issue 22);
what ``--help`` and ``bench list`` say; strict JSON from every command that prints it."""

from __future__ import annotations

import inspect
import json
import sqlite3
from pathlib import Path

import pytest

from iclrbench.cli.output import first_sentence, plain_text
from iclrbench.core import catalog
from tests.conftest import TASK, BenchRunner

SMOKE_RUN = ("--seeds", "0", "--budget", "smoke", "--set", "horizon=100")


@pytest.fixture
def stored(bench: BenchRunner, db: Path) -> Path:
    code, _, err = bench("run", TASK, "random-price", *SMOKE_RUN, "--db", db)
    assert code == 0, err
    return db


def _state(db: Path) -> list[tuple[object, ...]]:
    """Every run and verdict, read after folding the WAL into the file (so its bytes are all of it)."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    rows = conn.execute("SELECT run_key, status, metrics FROM runs ORDER BY run_key").fetchall()
    rows += conn.execute("SELECT * FROM claims ORDER BY task, claim_id").fetchall()
    conn.close()
    return rows


def _sweep_not_utf8(tmp_path: Path) -> str:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(f"budget: smoke\ntasks:\n  {TASK}:\n    set: {{label: caf\xe9}}\n".encode("latin-1"))
    return str(path)


CASES: list[tuple[list[str], str]] = [
    (["sweep", "{not_utf8}"], "not UTF-8"),
    (["run", TASK, "random-price", *SMOKE_RUN, "--timeout", "nan"], "--timeout"),
    (["run", TASK, "random-price", *SMOKE_RUN, "--timeout", "inf"], "--timeout"),
    (["run", TASK, "random-price", *SMOKE_RUN, "--timeout", "-inf"], "--timeout"),
    (["run", TASK, "random-price", *SMOKE_RUN, "--timeout", "1e30"], "--timeout"),
    (["run", TASK, "random-price", *SMOKE_RUN, "--timeout", "0"], "--timeout"),
    (["run", TASK, "random-price", *SMOKE_RUN, "--timeout", "soon"], "--timeout"),
    (["sweep", "{not_utf8}", "--timeout", "nan"], "--timeout"),
    (["claims", TASK, "--timeout", "1e30"], "--timeout"),
    (["run", TASK, "random-price", *SMOKE_RUN, "--scheduler", "not-an-address"], "tcp://HOST:PORT"),
    (["run", TASK, "random-price", *SMOKE_RUN, "--scheduler", "tcp://node1"], "tcp://HOST:PORT"),
    (["run", TASK, "random-price", *SMOKE_RUN, "--scheduler", "tcp://node1:99999"], "tcp://HOST:PORT"),
    (["run", TASK, "random-price", *SMOKE_RUN, "--retries", "-1"], "--retries"),
    (["run", TASK, "random-price", *SMOKE_RUN, "-j", "0"], "--jobs"),
    (["show", "99999999999999999999999"], "no run with id"),
    (["show", "-5"], "no run with id"),
    (["show", "0"], "no run with id"),
    (["show", "seven"], "expected an integer"),
    (["run", TASK, "--all", "random-price", *SMOKE_RUN], "give algorithm names or --all, not both"),
    (["run", TASK, "random-price", "--all", *SMOKE_RUN], "give algorithm names or --all, not both"),
    (["run", TASK, "random-price", *SMOKE_RUN, "--sed", "1"], "unrecognized arguments"),
]


@pytest.mark.parametrize(("args", "message"), CASES, ids=[" ".join(a)[:60] for a, _ in CASES])
def test_bad_input_is_one_line_exit_2_store_unchanged(
    bench: BenchRunner, stored: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    before = _state(stored)
    bytes_before = stored.read_bytes()
    argv = [a.replace("{not_utf8}", _sweep_not_utf8(tmp_path)) for a in args]
    code, out, err = bench(*argv, "--db", stored)
    assert code == 2, (out, err)
    assert err.count("\n") == 1 and err.startswith("bench: error:"), err
    assert message in err
    assert "Traceback" not in err
    assert _state(stored) == before and stored.read_bytes() == bytes_before


def test_algorithm_names_may_follow_options(bench: BenchRunner, db: Path) -> None:
    """Positional ALGO after options is accepted (what made '--all ALGO' read as unrecognized)."""
    code, out, err = bench("run", TASK, "random-price", *SMOKE_RUN, "ellipsoid-sbb", "--db", db)
    assert code == 0, err
    assert "2 runs: 2 ran" in out


# ------------------------------------------------------------------------------------------ help
def test_run_help_describes_every_argument(bench: BenchRunner) -> None:
    code, out, _ = bench("run", "--help")
    assert code == 0
    assert "Run algorithms of a task over seeds" in out
    assert "(default: small)" in out
    for needle in ("TASK ", "a task id", "ALGO ", "algorithms of the task", "--format", "--budget"):
        assert needle in out
    flat = " ".join(out.split())
    assert "JSON Lines" in flat and "smoke: seconds" in flat


def test_sweep_help_says_json_lines(bench: BenchRunner) -> None:
    code, out, _ = bench("sweep", "--help")
    assert code == 0 and "JSON Lines" in " ".join(out.split())


def test_top_help_has_no_rest_markup_and_a_version(bench: BenchRunner) -> None:
    code, out, _ = bench("--help")
    assert code == 0 and "``" not in out and ":class:" not in out
    assert "bench run" in out and "exit" in out
    code, out, _ = bench("--version")
    assert code == 0 and out.startswith("bench (iclrbench) ") and out.strip().split()[-1][0].isdigit()


# ------------------------------------------------------------------------------------------ list
def test_list_descriptions_are_whole_sentences_without_markup(bench: BenchRunner) -> None:
    code, out, _ = bench("list")
    assert code == 0
    assert "``" not in out and ":class:`" not in out and ":func:`" not in out
    # each task's algorithms are rows under its own heading (two tasks may name an algorithm alike)
    sections = {
        head.split(":", 1)[0]: body
        for head, _, body in (s.partition("\n") for s in out.split("\nalgorithms of ")[1:])
    }
    for tid in catalog.available_task_ids():  # an unavailable task lists no algorithms
        rows = {row.split()[0]: row for row in sections[tid].splitlines() if row.strip()}
        for name, cls in catalog.algorithms(tid).items():
            line = rows[name]
            assert line.split()[1] == cls.role, line
            summary = line.split(cls.role, 1)[1].strip()
            paragraph = plain_text((inspect.getdoc(cls) or "").split("\n\n")[0])
            assert paragraph.startswith(summary), (name, summary)
            # a whole sentence: the paragraph itself, or ended by a full stop where the paragraph goes on
            assert summary == paragraph or summary[-1] in ".!?", (name, summary)


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ("Stops here. Not this.", "Stops here."),
        ("Uses ``optimize_acqf`` (Sec. 3, Thm. 1). More.", "Uses optimize_acqf (Sec. 3, Thm. 1)."),
        ("A :class:`~pkg.Model`, e.g. GPs. Second.", "A ~pkg.Model, e.g. GPs."),
        (
            "One line\ncontinued on the next line.\n\nA second paragraph.",
            "One line continued on the next line.",
        ),
        ("See `the paper <https://arxiv.org>`_ and *this*.", "See the paper and this."),
        ("No full stop at all", "No full stop at all"),
        ("", ""),
    ],
)
def test_first_sentence(doc: str, expected: str) -> None:
    assert first_sentence(doc) == expected


# ------------------------------------------------------------------------------------ strict JSON
def _strict(text: str) -> object:
    def refuse(token: str) -> object:
        raise AssertionError(f"non-standard JSON constant {token}")

    return json.loads(text, parse_constant=refuse)


def test_json_outputs_are_strict_with_non_finite_metrics(bench: BenchRunner, stored: Path) -> None:
    """A stored NaN / infinity (from an older version, or a plugin) prints as null, never NaN/Infinity."""
    conn = sqlite3.connect(stored)
    conn.execute(
        'UPDATE runs SET metrics = \'{"regret": NaN, "gain_from_trade": Infinity, "trade_rate": 0.5}\''
    )
    conn.commit()
    conn.close()
    code, out, _ = bench("show", "1", "--format", "json", "--db", stored)
    assert code == 0
    shown = _strict(out)
    assert isinstance(shown, dict) and shown["metrics"]["regret"] is None
    assert shown["metrics"]["gain_from_trade"] is None and shown["metrics"]["trade_rate"] == 0.5
    code, out, _ = bench("show", "1", "--db", stored)
    assert code == 0 and "nan" in out  # people see what is stored
    code, out, _ = bench("export", "--format", "json", "--all-versions", "--db", stored)
    assert code == 0
    exported = _strict(out)
    assert isinstance(exported, list) and exported[0]["regret"] is None
    code, out, _ = bench("run", TASK, "random-price", *SMOKE_RUN, "--db", stored, "--format", "json")
    assert code == 0  # reused from the store, NaN and all
    line = _strict(out.strip())
    assert isinstance(line, dict) and line["reused"] is True and line["metrics"]["regret"] is None
