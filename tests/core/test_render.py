"""Text renderings of the leaderboard (terminal table, markdown, CSV, JSON) and the chart geometry."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from iclrbench.core.jsonsafe import finite
from iclrbench.leaderboard import svg
from iclrbench.leaderboard.aggregate import CurveSummary, aggregate
from iclrbench.leaderboard.render import (
    fmt,
    render_csv,
    render_json,
    render_markdown,
    render_table,
)
from tests.core.test_html import run


def _strict(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


def test_json_is_strict_with_nan_and_infinity_anywhere() -> None:
    nan, inf = float("nan"), float("inf")
    runs = [
        run("ellipsoid-sbb", 0, nan, params={"gamma": nan}),
        run("ellipsoid-sbb", 1, 1.0, params={"gamma": nan}),
        run("random-price", 0, inf),
        run("random-price", 1, 2.0),
    ]
    records = _strict(render_json(aggregate(runs)))
    by_name = {r["algorithm"]: r for r in records}
    assert (
        by_name["ellipsoid-sbb"]["regret_mean"] is None
        and by_name["ellipsoid-sbb"]["params"]["gamma"] is None
    )
    assert by_name["random-price"]["regret_mean"] is None  # inf is not a JSON number either
    assert by_name["ellipsoid-sbb"]["rank"] is None  # a NaN mean is unranked: null, not rank 0


def test_json_names_the_interval_method_and_gives_none_from_one_seed() -> None:
    runs = [run("ellipsoid-sbb", s, 1.0 + s) for s in range(3)] + [run("random-price", 0, 5.0)]
    by_name = {r["algorithm"]: r for r in _strict(render_json(aggregate(runs)))}
    ellipsoid, single = by_name["ellipsoid-sbb"], by_name["random-price"]
    assert ellipsoid["regret_ci_method"] and ellipsoid["regret_ci_low"] < 2.0 < ellipsoid["regret_ci_high"]
    assert single["regret_ci_low"] is None and single["regret_ci_high"] is None and single["regret_n"] == 1
    assert single["fewer_seeds"] is True and ellipsoid["fewer_seeds"] is False


@settings(max_examples=80, deadline=None)
@given(
    st.recursive(
        st.floats(allow_nan=True, allow_infinity=True) | st.integers() | st.text(max_size=3) | st.booleans(),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
        max_leaves=12,
    )
)
def test_finite_always_gives_strict_json(value: Any) -> None:
    text = json.dumps(finite(value), allow_nan=False)
    _strict(text)


def test_text_tables_say_one_seed_dash_for_unranked_params_and_the_seed_mark() -> None:
    runs = [run("ellipsoid-sbb", s, 1.0, params={"gamma": 0.5}) for s in range(3)]
    runs += [run("ellipsoid-sbb", s, 2.0, params={"gamma": 0.9}) for s in range(3)]
    runs += [run("random-price", 0, 5.0), run("best-fixed-price", 0, float("nan"))]
    tables = aggregate(runs)
    for text in (render_table(tables), render_markdown(tables)):
        assert "ellipsoid-sbb (gamma=0.5)" in text and "ellipsoid-sbb (gamma=0.9)" in text
        assert "5 1 seed" in text and "[5, 5]" not in text
        assert re.search(r"—\s*\|?\s*│?\s*best-fixed-price", text)  # unranked, not "0"
        assert "1*" in text and "fewer seeds than other rows" in text
    rows = list(csv.DictReader(io.StringIO(render_csv(tables))))
    diffs = sorted(r["params_diff"] for r in rows if r["algorithm"] == "ellipsoid-sbb")
    assert diffs == ['{"gamma": 0.5}', '{"gamma": 0.9}']


def test_fmt_reads_missing_and_non_finite_values() -> None:
    assert fmt(None) == "—" and fmt(float("nan")) == "nan" and fmt(float("-inf")) == "-inf"
    assert (
        fmt(0.0) == "0" and fmt(1234.5678) == "1235" and fmt(12345.6) == "12346" and fmt(1e-7) == "1.000e-07"
    )


def _curve(y: list[float | None], band: float = 0.5) -> CurveSummary:
    x = [float(i) for i in range(len(y))]
    low = [None if v is None else v - band for v in y]
    high = [None if v is None else v + band for v in y]
    return CurveSummary(x=x, mean=y, low=low, high=high, x_label="t", y_label="y")  # type: ignore[arg-type]


def test_a_missing_point_breaks_the_curve_and_its_band() -> None:
    plot = svg.curves_plot({"a": _curve([0.0, 1.0, float("nan"), 3.0, 4.0])}, "t", fmt)
    assert plot is not None
    (series,) = plot.series
    assert [len(p.split()) for p in series.lines] == [2, 2]
    assert [len(p.split()) for p in series.bands] == [4, 4]  # each piece: forward along high, back along low


def test_a_curve_with_no_finite_point_is_left_out() -> None:
    nan = float("nan")
    assert svg.curves_plot({"a": _curve([nan, nan])}, "t", fmt) is None
    plot = svg.curves_plot({"a": _curve([nan, nan]), "b": _curve([1.0, 2.0])}, "t", fmt)
    assert plot is not None and [s.name for s in plot.series] == ["b"]


values = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True, width=32))


@settings(max_examples=120, deadline=None)
@given(st.lists(st.lists(values, min_size=1, max_size=8), min_size=1, max_size=4))
def test_chart_coordinates_are_always_finite(curves: list[list[float | None]]) -> None:
    plot = svg.curves_plot({f"c{i}": _curve(y) for i, y in enumerate(curves)}, "t", fmt)
    if plot is None:
        return
    numbers = [
        float(c) for s in plot.series for points in (*s.bands, *s.lines) for c in re.split(r"[ ,]", points)
    ] + [t.at for t in (*plot.x_ticks, *plot.y_ticks)]
    assert all(math.isfinite(v) for v in numbers)


def test_profiles_are_step_lines_inside_the_plot() -> None:
    plot = svg.profiles_plot({"reference": [0.0, 0.5, 1.0], "baseline": [0.5, 0.5, 1.0]}, [0.0, 0.5, 1.0])
    assert plot is not None and len(plot.series) == 2
    xs = [float(p.split(",")[0]) for s in plot.series for line in s.lines for p in line.split()]
    assert min(xs) >= plot.left and max(xs) <= plot.left + plot.plot_width
    assert len(plot.series[0].lines[0].split()) == 5  # 3 points and 2 steps
