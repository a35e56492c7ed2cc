"""The leaderboard page: self-contained, escaped, with tables, curves, claims and downloads."""

from __future__ import annotations

import json
import math
import re
import urllib.parse
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from iclrbench.core.result import RunResult
from iclrbench.core.task import ClaimResult
from iclrbench.leaderboard.aggregate import aggregate
from iclrbench.leaderboard.html import render_html
from iclrbench.testing import fake_run
from tests.conftest import TASK, BenchRunner

HOSTILE = "<img src=x onerror=alert(1)>"
TEMPLATES = Path(__file__).resolve().parents[2] / "src" / "iclrbench" / "leaderboard" / "templates"


def hostile_run(seed: int, task: str = TASK) -> RunResult:
    metrics = {
        "regret": 1.0 + seed,
        "gain_from_trade": 2.0,
        "budget_deficit": 0.0,
        "trade_rate": 0.5,
        "seconds": 0.1,
    }
    return fake_run(
        task,
        HOSTILE,
        seed,
        metrics,
        config={"note": HOSTILE},
        curves={"regret": {"x": [1, 2, 3], "y": [0.0, 0.5, 1.0 + seed], "x_label": "t", "y_label": HOSTILE}},
        provenance={"cpu": HOSTILE},
    )


def run(
    algorithm: str,
    seed: int,
    regret: float,
    *,
    params: dict[str, Any] | None = None,
    curve: list[float] | None = None,
    budget: str = "smoke",
) -> RunResult:
    """A run of the bilateral-trade task (its metrics: regret is primary, lower is better)."""
    return fake_run(
        TASK,
        algorithm,
        seed,
        {"regret": regret, "trade_rate": 0.5},
        role="reference" if algorithm.startswith("ellipsoid") else "baseline",
        config={"d": 2},
        params=params,
        budget=budget,
        curves={"regret": {"x": [1, 2, 3, 4], "y": curve}} if curve is not None else None,
    )


class Page(HTMLParser):
    """The parsed page: every element with its attributes and ancestors, and every text with its path."""

    VOID = frozenset({"meta", "br", "img", "input", "link", "hr", "rect", "line", "polygon", "polyline"})

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, dict[str, str]]] = []
        self.elements: list[tuple[str, dict[str, str], tuple[tuple[str, dict[str, str]], ...]]] = []
        self.texts: list[tuple[str, tuple[str, ...]]] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.elements.append((tag, a, tuple(self.stack)))
        if tag not in self.VOID:
            self.stack.append((tag, a))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}, tuple(self.stack)))

    def handle_endtag(self, tag: str) -> None:
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.texts.append((data, tuple(t for t, _ in self.stack)))

    def tags(self, name: str) -> list[tuple[dict[str, str], tuple[tuple[str, dict[str, str]], ...]]]:
        return [(a, anc) for t, a, anc in self.elements if t == name]


def _claim(claim_id: str, verdict: str, budget: str, task: str = TASK) -> ClaimResult:
    return ClaimResult(task, claim_id, "statement", verdict, {"slope": 0.5}, budget)  # type: ignore[arg-type]


def test_hostile_names_render_as_text_in_every_place() -> None:
    claim = ClaimResult(TASK, HOSTILE, HOSTILE, "reproduced", {HOSTILE: HOSTILE}, "small")
    runs = [hostile_run(0), hostile_run(1), hostile_run(0, task=HOSTILE), hostile_run(1, task=HOSTILE)]
    page = render_html(
        aggregate(runs), [claim], {TASK: {"title": HOSTILE, "authors": HOSTILE, "arxiv": HOSTILE}}
    )
    assert HOSTILE not in page and "<img" not in page
    parsed = Page(page)
    assert not parsed.tags("img") and len(parsed.tags("script")) == 1
    # the hostile text is shown, decoded, as text in each place it appears
    where = {path[-1] for text, path in parsed.texts if HOSTILE in text}
    # nav link and table cell (a), paper line (p), table cells (td), claim id (b), chart title and
    # series title (title), legend entry (span), axis label (text), section heading (h2), config heading (h3)
    assert {"a", "p", "td", "b", "title", "span", "text", "h2", "h3"} <= where, where
    # attribute values keep it as data too: the section id and the nav's data-view hold the literal name
    assert any(a.get("id") == HOSTILE for a, _ in parsed.tags("section"))
    assert any(a.get("data-view") == HOSTILE for a, _ in parsed.tags("a"))
    assert any(a.get("aria-label", "").startswith(HOSTILE) for a, _ in parsed.tags("svg"))


def test_templates_mark_nothing_safe_and_autoescape() -> None:
    from iclrbench.leaderboard import html

    assert not [
        p.name
        for p in TEMPLATES.iterdir()
        if re.search(r"\|\s*safe|Markup|autoescape\s+false", p.read_text())
    ]
    env = html._environment()
    assert env.autoescape is True or all(env.autoescape(n) for n in ("page.html.j2", "macros.html.j2"))


def test_every_table_scrolls_inside_its_own_box() -> None:
    # a wide table: many metrics and a long config label
    runs = [run("ellipsoid-sbb", s, 1.0 + s) for s in range(3)] + [
        run("random-price", s, 9.0) for s in range(3)
    ]
    page = render_html(aggregate(runs), [])
    tables = Page(page).tags("table")
    assert len(tables) >= 3
    for _, ancestors in tables:
        tag, attrs = ancestors[-1]
        assert tag == "div" and "scroll" in attrs.get("class", "").split()
    css = (TEMPLATES / "page.css").read_text()
    assert re.search(r"\.scroll\{[^}]*overflow-x:auto", css)


def test_one_seed_shows_no_interval() -> None:
    page = render_html(aggregate([run("ellipsoid-sbb", 0, 5.0), run("random-price", 0, 7.0)]), [])
    # two rows x two metrics (regret, trade_rate), each with "1 seed" under its mean
    under_means = [d for d, path in Page(page).texts if path[-2:] == ("td", "span")]
    assert under_means.count("1 seed") == 4 and "[5, 5]" not in page and "[7, 7]" not in page


def test_intervals_and_bands_are_named_on_the_page() -> None:
    runs = [run("ellipsoid-sbb", s, 1.0 + s, curve=[0, 1, 2, 3 + s]) for s in range(3)]
    table = aggregate(runs)[0]
    summary, curve = table.rows[0].metrics["regret"], table.rows[0].curves["regret"]
    page = render_html([table], [])
    assert f"Under each mean: its {summary.ci_method} interval" in page
    assert f"shaded: {curve.band} band of the mean" in page and "95% CI" not in page


def _svg_attribute_values(page: str) -> list[str]:
    return [
        v
        for t, a, anc in Page(page).elements
        if t == "svg" or "svg" in {x for x, _ in anc}
        for v in a.values()
    ]


def test_charts_skip_missing_points_and_never_write_nan() -> None:
    nan, inf = float("nan"), float("inf")
    runs = [
        run("ellipsoid-sbb", 0, 1.0, curve=[0.0, nan, 2.0, 3.0]),
        run("ellipsoid-sbb", 1, nan, curve=[0.0, nan, 2.5, 3.5]),
        run("random-price", 0, 5.0, curve=[inf, 1.0, -inf, nan]),
        run("random-price", 1, 6.0, curve=[nan, nan, nan, nan]),
        run("best-fixed-price", 0, 2.0, curve=[1.0, 1.0, 1.0, 1.0]),
    ]
    page = render_html(aggregate(runs), [])
    values = _svg_attribute_values(page)
    assert values and not [v for v in values if re.search(r"nan|inf", v, re.IGNORECASE)]
    points = [
        float(c)
        for v in (a["points"] for t, a, _ in Page(page).elements if "points" in a)
        for c in re.split(r"[ ,]", v)
    ]
    assert points and all(math.isfinite(p) for p in points)
    # the missing point breaks the line: best-fixed-price is whole, the ellipsoid's mean line is not
    polylines = [a for t, a, _ in Page(page).elements if t == "polyline"]
    assert any(len(a["points"].split()) == 4 for a in polylines)


def test_page_downloads_are_strict_json_even_with_nan() -> None:
    page = render_html(aggregate([run("ellipsoid-sbb", 0, float("nan")), run("random-price", 0, 3.0)]), [])
    links = re.findall(r'href="data:application/json;charset=utf-8,([^"]+)"', page)
    assert links

    def refuse(constant: str) -> None:
        raise AssertionError(f"non-standard JSON constant {constant}")

    for link in links:
        records = json.loads(urllib.parse.unquote(link), parse_constant=refuse)
        assert any(r["regret_mean"] is None for r in records)


def test_unranked_rows_show_a_dash_and_rows_with_fewer_seeds_are_marked() -> None:
    runs = [run("ellipsoid-sbb", s, 1.0) for s in range(3)]
    runs += [run("random-price", s, 4.0) for s in range(2)]
    runs += [run("best-fixed-price", 0, float("nan"))]
    table = aggregate(runs)[0]
    page = render_html([table], [])
    rows = {r.algorithm: r for r in table.rows}
    assert rows["best-fixed-price"].rank == 0
    parsed = Page(page)
    section = page.split(f'<section class="task view" id="{TASK}">', 1)[1]
    board = section.split('<table class="board">', 1)[1].split("</table>", 1)[0]
    body_rows = re.findall(r"<tr>(.*?)</tr>", board, re.S)
    by_name = {re.sub(r"<[^>]+>", " ", r).split()[0]: r for r in body_rows}
    assert re.search(r"<td[^>]*>—</td>", by_name["best-fixed-price"])
    assert re.search(r'<td class="fewer"[^>]*>2\*</td>', by_name["random-price"])
    assert not re.search(r'class="fewer"', by_name["ellipsoid-sbb"])
    assert "fewer seeds than other rows" in " ".join(d for d, _ in parsed.texts)


def test_rows_of_one_algorithm_show_the_params_that_differ() -> None:
    curve = [0.0, 1.0, 2.0, 3.0]
    runs = [run("ellipsoid-sbb", s, 1.0 + s, params={"gamma": 0.5, "lr": 1}, curve=curve) for s in range(2)]
    runs += [run("ellipsoid-sbb", s, 3.0 + s, params={"gamma": 0.9, "lr": 1}, curve=curve) for s in range(2)]
    page = render_html(aggregate(runs), [])
    parsed = Page(page)
    in_table = [d for d, path in parsed.texts if path[-2:] == ("td", "span") and "gamma" in d]
    assert sorted(in_table) == ["gamma=0.5", "gamma=0.9"]  # lr is the same: not shown
    # two curves and two rows of the improvement matrix, told apart the same way
    legend = [d for d, path in parsed.texts if path[-2:] == ("figcaption", "span") and "gamma" in d]
    assert sorted(legend) == ["ellipsoid-sbb (gamma=0.5)", "ellipsoid-sbb (gamma=0.9)"]
    assert len([a for t, a, _ in parsed.elements if t == "polyline"]) == 2
    poi_rows = [d for d, path in parsed.texts if path[-1] == "td" and d.startswith("ellipsoid-sbb (")]
    assert sorted(poi_rows) == ["ellipsoid-sbb (gamma=0.5)", "ellipsoid-sbb (gamma=0.9)"]


def test_claims_are_shown_only_at_the_budget_they_are_defined_at() -> None:
    from iclrbench.core import catalog

    declared = [c.id for c in catalog.get_task(TASK).claims]
    assert len(declared) >= 2 and all(c.budget == "small" for c in catalog.get_task(TASK).claims)
    smoke_only, at_small = declared[0], declared[1]
    claims = [
        _claim(smoke_only, "reproduced", "smoke"),
        _claim(at_small, "not_reproduced", "smoke"),
        _claim(at_small, "reproduced", "small"),
    ]
    page = render_html(aggregate([run("ellipsoid-sbb", 0, 1.0), run("random-price", 0, 2.0)]), claims)
    items = re.findall(r"<li>(.*?)</li>", page, re.S)
    by_id = {re.search(r"<b>(.*?)</b>", li).group(1): li for li in items}  # type: ignore[union-attr]
    assert set(by_id) == set(declared)  # every declared claim is listed, checked or not
    assert "not checked at this budget" in by_id[smoke_only] and ">reproduced<" not in by_id[smoke_only]
    assert f"bench claims {TASK} --budget small" in by_id[smoke_only]
    assert "stored verdict is from smoke runs" in by_id[smoke_only]
    assert 'class="verdict reproduced"' in by_id[at_small] and "not checked" not in by_id[at_small]
    # the overview counts by the same rule: one reproduced (at small), the smoke verdict does not count
    overview = page.split('id="overview"', 1)[1].split("</section>", 1)[0]
    assert f"1 / {len(declared)}" in overview
    assert f"{len(declared) - 1} not checked at their budget" in overview


def test_claims_of_a_task_no_longer_installed_still_render() -> None:
    page = render_html([], [_claim("c1", "reproduced", "small", task="gone-task")])
    assert 'class="verdict reproduced"' in page and "gone-task" in page


@pytest.mark.parametrize("with_nan", [False, True])
def test_page_parses_with_one_view_per_task(with_nan: bool) -> None:
    value = float("nan") if with_nan else 1.0
    page = render_html(aggregate([run("ellipsoid-sbb", 0, value), run("random-price", 0, 2.0)]), [])
    sections = [a["id"] for a, _ in Page(page).tags("section")]
    assert sections == ["overview", TASK]
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")


def test_page_is_self_contained(bench: BenchRunner, db: Path, tmp_path: Path) -> None:
    bench("run", TASK, "ellipsoid-sbb", "random-price", "--seeds", "0-2", "--budget", "smoke", "--db", db)
    bench("claims", TASK, "--budget", "smoke", "--db", db, "--quiet")
    out = tmp_path / "site" / "index.html"
    code, _, err = bench("leaderboard", "--db", db, "--html", out)
    assert code == 0 and "wrote" in err
    page = out.read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page), "no network references"
    assert page.count("<svg") >= 1 and "polygon" in page  # curve with its band
    assert "not checked at this budget" in page and "ellipsoid-log-regret" in page
    assert "Provenance" in page and "git_sha" in page
    csv_link = re.search(r'href="data:text/csv;charset=utf-8,([^"]+)"', page)
    assert csv_link is not None
    assert urllib.parse.unquote(csv_link.group(1)).startswith("task,task_version")


def test_empty_store_still_renders() -> None:
    page = render_html([], [])
    assert "No stored runs yet" in page and page.startswith("<!DOCTYPE html>")
