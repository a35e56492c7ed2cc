"""Chart geometry for the leaderboard page: data in, pixel coordinates and tick labels out.

The templates draw the SVG; this module only decides where things go. Every coordinate it hands over
is a finite number formatted here, so no ``nan`` or ``inf`` can reach an SVG attribute: a missing or
non-finite point of a curve breaks its line (and its band) into separate pieces instead.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#7f7f7f",
    "#bcbd22",
)


def colour(i: int) -> str:
    """The i-th series colour; the legend and the chart use the same one."""
    return PALETTE[i % len(PALETTE)]


@dataclasses.dataclass(frozen=True)
class Tick:
    """A tick: its pixel position along its axis (finite, checked) and its label."""

    at: float
    label: str


@dataclasses.dataclass(frozen=True)
class Series:
    """One algorithm (or family): band polygons and line pieces, as SVG ``points`` strings."""

    name: str
    colour: str
    bands: tuple[str, ...]
    lines: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Plot:
    """Everything the ``plot`` template macro needs to draw one chart and its legend."""

    title: str
    width: int
    height: int
    left: int
    top: int
    plot_width: int
    plot_height: int
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    x_label: str
    y_label: str
    series: tuple[Series, ...]
    stroke_width: float
    #: what the shaded bands are (e.g. "pointwise 95% Student-t"); empty when there are none
    band_label: str = ""


def _finite(v: float) -> float:
    """A pixel coordinate, checked finite (a bug upstream must not become ``nan`` in an attribute)."""
    if not math.isfinite(v):
        raise ValueError(f"non-finite SVG coordinate {v!r}")
    return float(v)


def _num(v: float) -> str:
    return f"{_finite(v):.1f}"


def _xy(x: float, y: float) -> tuple[str, str]:
    return _num(x), _num(y)


def _floats(values: Iterable[Any]) -> np.ndarray:
    """Values as floats, with None (a missing point) as NaN."""
    return np.array([np.nan if v is None else float(v) for v in values], dtype=float)


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """Maximal [start, stop) stretches where ``mask`` is true."""
    out, start = [], None
    for i, ok in enumerate(mask):
        if ok and start is None:
            start = i
        elif not ok and start is not None:
            out.append((start, i))
            start = None
    if start is not None:
        out.append((start, len(mask)))
    return out


def _linear_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    return [lo + (hi - lo) * i / (n - 1) for i in range(n)]


def curves_plot(
    curves: Mapping[str, Any],
    title: str,
    fmt: Any,
    *,
    width: int = 640,
    height: int = 300,
) -> Plot | None:
    """Mean curves with shaded bands, one colour per algorithm, or None when no point is finite.

    ``curves`` maps a name to an object with ``x``, ``mean``, ``low``, ``high``, ``x_label``,
    ``y_label`` and optionally ``band`` (what the band is). When the final values of non-negative
    curves span more than 20x, the y axis is log(1 + y) so that a good algorithm is not flattened
    against the axis by a bad one; the axis label says so.
    """
    left, right, top, bottom = 64, 16, 22, 40
    data = {}
    for name, c in curves.items():
        x, mean, low, high = (_floats(getattr(c, k)) for k in ("x", "mean", "low", "high"))
        n = min(len(x), len(mean), len(low), len(high))
        x, mean, low, high = x[:n], mean[:n], low[:n], high[:n]
        line_ok = np.isfinite(x) & np.isfinite(mean)
        band_ok = np.isfinite(x) & np.isfinite(low) & np.isfinite(high)
        if line_ok.any() or band_ok.any():
            data[name] = (x, mean, low, high, line_ok, band_ok)
    if not data:
        return None
    xs = np.concatenate([d[0][d[4] | d[5]] for d in data.values()])
    ys = np.concatenate([np.concatenate([d[1][d[4]], d[2][d[5]], d[3][d[5]]]) for d in data.values()])
    finals = [d[1][d[4]][-1] for d in data.values() if d[4].any()]
    y_min, y_max = float(ys.min()), float(ys.max())
    log_scale = bool(finals) and y_min >= 0 and max(finals) > 20 * max(min(finals), 1e-9) and y_max > 10

    def ty(y: float) -> float:
        return math.log10(1 + y) if log_scale else y

    x0, x1 = float(xs.min()), float(xs.max())
    lo = min(0.0, y_min)
    hi = y_max if y_max > lo else lo + 1.0
    t0, t1 = ty(lo), ty(hi)
    pw, ph = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + (x - x0) / ((x1 - x0) or 1) * pw

    def py(y: float) -> float:
        return top + ph - (ty(y) - t0) / ((t1 - t0) or 1) * ph

    def points(xv: Sequence[float], yv: Sequence[float]) -> str:
        return " ".join(",".join(_xy(px(a), py(b))) for a, b in zip(xv, yv, strict=True))

    series = []
    for i, (name, (x, mean, low, high, line_ok, band_ok)) in enumerate(data.items()):
        bands = tuple(
            points([*x[a:b], *x[a:b][::-1]], [*high[a:b], *low[a:b][::-1]]) for a, b in _runs(band_ok)
        )
        lines = tuple(points(x[a:b], mean[a:b]) for a, b in _runs(line_ok))
        series.append(Series(str(name), colour(i), bands, lines))

    if log_scale:
        y_values = [0.0] + [10.0**k for k in range(1, int(math.log10(y_max)) + 1)]
    else:
        y_values = _linear_ticks(lo, hi)
    first = next(iter(curves.values()))
    bands_named = dict.fromkeys(str(getattr(curves[n], "band", "") or "") for n in data)
    return Plot(
        title=title,
        width=width,
        height=height,
        left=left,
        top=top,
        plot_width=pw,
        plot_height=ph,
        x_ticks=tuple(Tick(_finite(px(t)), fmt(t)) for t in _linear_ticks(x0, x1)),
        y_ticks=tuple(Tick(_finite(py(t)), fmt(t)) for t in y_values),
        x_label=str(first.x_label),
        y_label=str(first.y_label) + (" (log scale)" if log_scale else ""),
        series=tuple(series),
        stroke_width=1.8,
        band_label=" / ".join(b for b in bands_named if b),
    )


def profiles_plot(
    profiles: Mapping[str, Sequence[float]], taus: Sequence[float], *, width: int = 420, height: int = 240
) -> Plot | None:
    """Performance profiles: fraction of a family's runs within tau of the best, one step line per family.

    Non-finite fractions (there should be none) break the step line rather than reach the SVG.
    """
    if not profiles:
        return None
    left, right, top, bottom = 48, 12, 14, 36
    pw, ph = width - left - right, height - top - bottom

    def px(t: float) -> float:
        return left + t * pw

    def py(f: float) -> float:
        return top + ph - f * ph

    series = []
    for i, (family, fractions) in enumerate(profiles.items()):
        f = _floats(fractions)
        t = _floats(taus)[: len(f)]
        ok = np.isfinite(f) & np.isfinite(t)
        lines = []
        for a, b in _runs(ok):
            pts: list[str] = []
            for k in range(a, b):
                if k > a:  # a step: along at the previous height, then up
                    pts.append(",".join(_xy(px(t[k]), py(f[k - 1]))))
                pts.append(",".join(_xy(px(t[k]), py(f[k]))))
            lines.append(" ".join(pts))
        series.append(Series(str(family), colour(i), (), tuple(lines)))
    ticks = (0.0, 0.5, 1.0)
    return Plot(
        title="performance profiles",
        width=width,
        height=height,
        left=left,
        top=top,
        plot_width=pw,
        plot_height=ph,
        x_ticks=tuple(Tick(_finite(px(v)), f"{v:g}") for v in ticks),
        y_ticks=tuple(Tick(_finite(py(v)), f"{v:g}") for v in ticks),
        x_label="tau: shortfall from the best (normalised)",
        y_label="fraction of runs",
        series=tuple(series),
        stroke_width=2.0,
    )
