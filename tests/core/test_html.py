"""The leaderboard page: self-contained, escaped, with tables, curves, claims and downloads."""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path

from iclrbench.core.result import RunResult
from iclrbench.core.task import ClaimResult
from iclrbench.leaderboard.aggregate import aggregate
from iclrbench.leaderboard.html import render_html
from tests.conftest import TASK, BenchRunner

HOSTILE = "<img src=x onerror=alert(1)>"


def hostile_run(seed: int) -> RunResult:
    return RunResult(
        task=TASK,
        task_version=1,
        config={"note": HOSTILE},
        config_hash="h" * 16,
        algorithm=HOSTILE,
        role="baseline",
        params={},
        params_hash="p" * 16,
        seed=seed,
        budget="smoke",
        status="ok",
        metrics={
            "regret": 1.0 + seed,
            "gain_from_trade": 2.0,
            "budget_deficit": 0.0,
            "trade_rate": 0.5,
            "seconds": 0.1,
        },
        curves={"regret": {"x": [1, 2, 3], "y": [0.0, 0.5, 1.0 + seed], "x_label": "t", "y_label": HOSTILE}},
        provenance={"cpu": HOSTILE},
        created_at="2026-01-01T00:00:00+00:00",
    )


def test_hostile_names_render_as_text() -> None:
    claim = ClaimResult(TASK, HOSTILE, HOSTILE, "reproduced", {HOSTILE: HOSTILE}, "smoke")
    page = render_html(aggregate([hostile_run(0), hostile_run(1)]), [claim])
    assert HOSTILE not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "<img" not in page


def test_page_is_self_contained(bench: BenchRunner, db: Path, tmp_path: Path) -> None:
    bench("run", TASK, "ellipsoid-sbb", "random-price", "--seeds", "0-2", "--budget", "smoke", "--db", db)
    bench("claims", TASK, "--budget", "smoke", "--db", db, "--quiet")
    out = tmp_path / "site" / "index.html"
    code, _, err = bench("leaderboard", "--db", db, "--html", out)
    assert code == 0 and "wrote" in err
    page = out.read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page), "no network references"
    assert page.count("<svg") >= 1 and "polygon" in page  # curve with its CI band
    assert "reproduced" in page and "ellipsoid-log-regret" in page
    assert "Provenance" in page and "git_sha" in page
    csv_link = re.search(r'href="data:text/csv;charset=utf-8,([^"]+)"', page)
    assert csv_link is not None
    assert urllib.parse.unquote(csv_link.group(1)).startswith("task,task_version")


def test_empty_store_still_renders() -> None:
    page = render_html([], [])
    assert "No stored runs yet" in page and page.startswith("<!DOCTYPE html>")
