"""The leaderboard page in headless Chromium (Debian's /usr/bin/chromium, driven by playwright)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

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


def _browser(pw: Any) -> Any:
    return pw.chromium.launch(
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


def test_leaderboard_page_in_chromium(bench: BenchRunner, db: Path, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    bench("run", TASK, "--all", "--seeds", "0-2", "--budget", "smoke", "--db", db, "--quiet")
    bench("claims", TASK, "--budget", "smoke", "--db", db, "--quiet")
    page_path = tmp_path / "leaderboard.html"
    assert bench("leaderboard", "--db", db, "--html", page_path)[0] == 0
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = _browser(pw)
        page = browser.new_page(viewport={"width": 1300, "height": 1000}, accept_downloads=True)
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(page_path.as_uri())

        # the overview first; the task's view is hidden until chosen in the navigation
        overview, section = page.locator("section#overview"), page.locator(f"section[id='{TASK}']")
        expect(overview).to_be_visible()
        expect(section).to_be_hidden()
        # the claims were judged on smoke runs, but they are defined at small: none counts as reproduced
        tasks_row = page.locator("#tasks tbody").inner_text()
        assert TASK in tasks_row and "0 / 3" in tasks_row and "3 not checked at their budget" in tasks_row
        page.locator(f"nav a[data-view='{TASK}']").click()
        expect(section).to_be_visible()  # waits for the hashchange handler
        expect(overview).to_be_hidden()
        assert page.evaluate("location.hash") == f"#{TASK}"
        page.go_back()
        expect(overview).to_be_visible()
        expect(section).to_be_hidden()
        overview.locator(f"a[href='#{TASK}']").first.click()  # the overview's own links navigate too
        expect(section).to_be_visible()

        table = section.locator("table.board").first
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
        assert section.locator("svg polygon").count() >= 6
        assert section.locator(".verdict").count() == 3
        assert section.locator(".verdict.not_checked").count() == 3
        assert f"bench claims {TASK} --budget small" in section.locator("ul.claims").inner_text()
        section.locator("details summary", has_text="Probability of improvement").first.click()
        expect(section.locator("table.poi").first).to_be_visible()

        with page.expect_download() as info:
            section.locator("p.downloads a", has_text="CSV").first.click()
        csv = Path(info.value.path()).read_text()
        assert csv.splitlines()[0].startswith("task,") and "ellipsoid-sbb" in csv
        with page.expect_download() as info:
            section.locator("p.downloads a", has_text="JSON").first.click()
        records = json.loads(Path(info.value.path()).read_text())
        assert {r["algorithm"] for r in records} >= {"ellipsoid-sbb", "random-price"}

        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / "leaderboard.png"
        page.screenshot(path=str(shot), full_page=True)

        # a table wider than the window scrolls inside its box; the section itself does not overflow
        page.set_viewport_size({"width": 520, "height": 900})
        wrapper = section.locator("div.scroll").first
        sizes = wrapper.evaluate(
            "w => ({scroll: w.scrollWidth, client: w.clientWidth, "
            "section: w.closest('section').scrollWidth - w.closest('section').clientWidth})"
        )
        assert sizes["scroll"] > sizes["client"] and sizes["section"] <= 0, sizes
        last = wrapper.locator("thead th").last
        wrapper.evaluate("w => { w.scrollLeft = w.scrollWidth; }")
        box, frame = last.bounding_box(), wrapper.bounding_box()
        assert box is not None and frame is not None
        assert frame["x"] <= box["x"] and box["x"] + box["width"] <= frame["x"] + frame["width"] + 1
        browser.close()
    assert errors == []
    assert shot.stat().st_size > 10_000


@pytest.mark.usefixtures("plugin")
def test_a_hostile_plugin_name_renders_as_text_in_chromium(
    bench: BenchRunner, db: Path, tmp_path: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    hostile = "<img src=x onerror=alert(1)>"
    assert (
        bench("run", "noop", "constant", hostile, "--seeds", "0-2", "--budget", "smoke", "--db", db)[0] == 0
    )
    page_path = tmp_path / "leaderboard.html"
    assert bench("leaderboard", "--db", db, "--html", page_path)[0] == 0
    dialogs: list[str] = []
    with sync_playwright() as pw:
        browser = _browser(pw)
        page = browser.new_page()
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(page_path.as_uri())
        page.locator("nav a[data-view='noop']").click()
        expect(page.locator("section#noop")).to_be_visible()
        cells = page.locator("section#noop table.board tbody td.name").all_inner_texts()
        assert any(hostile in c for c in cells)  # shown as the literal text
        assert page.locator("img").count() == 0 and page.locator("script").count() == 1
        page.wait_for_timeout(200)
        browser.close()
    assert dialogs == []


def test_without_javascript_every_view_is_shown(tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    from iclrbench.leaderboard.aggregate import aggregate
    from iclrbench.leaderboard.html import render_html
    from tests.core.test_html import run

    page_path = tmp_path / "leaderboard.html"
    runs = [run("ellipsoid-sbb", s, 1.0 + s, curve=[0, 1, 2, 3]) for s in range(3)]
    page_path.write_text(render_html(aggregate([*runs, run("random-price", 0, 5.0)]), []), encoding="utf-8")
    with sync_playwright() as pw:
        browser = _browser(pw)
        page = browser.new_context(java_script_enabled=False).new_page()
        page.goto(page_path.as_uri())
        expect(page.locator("section#overview")).to_be_visible()
        expect(page.locator(f"section[id='{TASK}']")).to_be_visible()
        expect(page.locator(f"section[id='{TASK}'] svg polyline").first).to_be_visible()
        browser.close()
