"""The leaderboard page in headless Chromium (Debian's /usr/bin/chromium, driven by playwright)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import TASK, BenchRunner

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(),
        reason="Debian chromium is not installed here; .ci/run installs it (apt-get install chromium)",
    ),
]


def test_leaderboard_page_in_chromium(bench: BenchRunner, db: Path, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    bench("run", TASK, "--all", "--seeds", "0-2", "--budget", "smoke", "--db", db, "--quiet")
    bench("claims", TASK, "--budget", "smoke", "--db", db, "--quiet")
    page_path = tmp_path / "leaderboard.html"
    assert bench("leaderboard", "--db", db, "--html", page_path)[0] == 0
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(page_path.as_uri())
        table = page.locator("table.board").first
        names = lambda: table.locator("tbody td.name").all_inner_texts()  # noqa: E731
        before = names()
        assert len(before) == 6
        table.locator("th").first.click()  # sort by algorithm name, ascending
        ascending = names()
        assert ascending == sorted(before) and ascending != before
        table.locator("th").first.click()
        assert names() == list(reversed(ascending))
        table.locator("th").nth(1).click()  # by rank
        assert next(n.split()[0] for n in names()) == "ellipsoid-sbb"
        assert page.locator("svg polygon").count() >= 6
        assert page.locator(".verdict").count() == 3
        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / "leaderboard.png"
        page.screenshot(path=str(shot), full_page=True)
        browser.close()
    assert errors == []
    assert shot.stat().st_size > 10_000
