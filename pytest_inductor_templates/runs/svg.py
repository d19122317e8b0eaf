"""Charts as inline SVG, drawn by hand for the HTML pages (no plotting dependency): a strip chart of values with
their bands per row on a log scale, and a scatter of two ratios. Neither torch nor pytest is imported here.

Up to ``DOTS`` points a row, each point is its own element with a tooltip; beyond, a row's points are one path
(dots as zero-length round-capped segments) and a box of its quartiles, so that 2,500 samples stay cheap to paint.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

DOTS = 300  # points a row drawn one by one (with a tooltip each)
WIDTH, LEFT, RIGHT, ROW, TOP, BOTTOM = 760, 150, 20, 34, 16, 36


@dataclass(frozen=True)
class Point:
    """One value with its band (a 95% interval; None where it has none) and what it is, for its tooltip."""

    value: float
    low: float | None = None
    high: float | None = None
    label: str = ""
    colour: str = "#2b6cb0"


def _ticks(low: float, high: float) -> list[float]:
    """Ticks of a log axis over [low, high]: the decades, with 2 and 5 between them over a span of few decades."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    steps = (1, 2, 5) if last - first <= 2 else (1,)
    ticks = [step * 10.0**e for e in range(first, last + 1) for step in steps]
    return [t for t in ticks if low <= t <= high] or [low, high]


def _number(value: float, unit: str) -> str:
    return f"{value:.3g}{unit}"


class LogAxis:
    """x = position of a positive value on a log scale spanning the plot's width."""

    def __init__(self, values: Sequence[float], mark: float | None) -> None:
        found = [v for v in values if v > 0] + ([mark] if mark else [])
        low, high = (min(found), max(found)) if found else (0.5, 2.0)
        if high / low < 4:  # at least a factor of 4 across, centred on the values
            middle = math.sqrt(high * low)
            low, high = middle / 2, middle * 2
        self.low, self.high = low / 1.15, high * 1.15
        self.span = math.log(self.high / self.low)

    def x(self, value: float) -> float:
        value = min(max(value, self.low), self.high)
        return LEFT + (WIDTH - LEFT - RIGHT) * math.log(value / self.low) / self.span


def _axis(axis: LogAxis, height: float, unit: str, mark: float | None, title: str) -> list[str]:
    parts = []
    for tick in _ticks(axis.low, axis.high):
        x = axis.x(tick)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{height - BOTTOM}" class="grid"/>')
        parts.append(f'<text x="{x:.1f}" y="{height - BOTTOM + 14}" class="tick">{_number(tick, unit)}</text>')
    if mark is not None:
        x = axis.x(mark)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{height - BOTTOM}" class="mark"/>')
        parts.append(f'<text x="{x + 3:.1f}" y="{TOP - 4}" class="mark-label">{_number(mark, unit)}</text>')
    parts.append(
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2:.0f}" y="{height - 4}" class="axis-title">{escape(title)}</text>'
    )
    return parts


def _box(points: list[Point], axis: LogAxis, y: float) -> list[str]:
    """Quartiles (the box), 5th to 95th percentile (the whiskers), the median (a bar)."""
    values = sorted(p.value for p in points)
    if len(values) < 2:
        return []
    cuts = statistics.quantiles(values, n=20, method="inclusive")  # 5%, 10%, ..., 95%
    p5, q1, median, q3, p95 = cuts[0], cuts[4], cuts[9], cuts[14], cuts[18]
    x1, x3 = axis.x(q1), axis.x(q3)
    return [
        f'<line x1="{axis.x(p5):.1f}" x2="{axis.x(p95):.1f}" y1="{y:.1f}" y2="{y:.1f}" class="whisker"/>',
        f'<rect x="{x1:.1f}" y="{y - 9:.1f}" width="{max(x3 - x1, 1):.1f}" height="18" class="box"/>',
        f'<line x1="{axis.x(median):.1f}" x2="{axis.x(median):.1f}" y1="{y - 9:.1f}" y2="{y + 9:.1f}" class="median"/>',
    ]


def strip_chart(
    rows: dict[str, list[Point]], title: str, unit: str = "x", mark: float | None = 1.0, caption: str = ""
) -> str:
    """Each row's points on one log axis, with their bands; ``mark`` (1x) drawn as a line. Rows of more than
    ``DOTS`` points get a box of their quartiles behind the dots."""
    shown = {name: points for name, points in rows.items() if points}
    if not shown:
        return ""
    values = [v for ps in shown.values() for p in ps for v in (p.value, p.low, p.high) if v is not None and v > 0]
    axis = LogAxis(values, mark)
    height = TOP + ROW * len(shown) + BOTTOM
    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{escape(title)}">']
    parts += _axis(axis, height, unit, mark, title)
    for index, (name, points) in enumerate(shown.items()):
        y = TOP + ROW * index + ROW / 2
        parts.append(f'<text x="{LEFT - 8}" y="{y + 4:.1f}" class="row-label">{escape(name)} ({len(points)})</text>')
        jitter = [(i * 7 % 11 - 5) for i in range(len(points))] if len(points) > 1 else [0]
        if len(points) > DOTS:
            parts += _box(points, axis, y)
            by_colour: dict[str, dict[str, None]] = {}  # a dot per pixel: the same pixel drawn once
            for p, j in zip(points, jitter, strict=True):
                by_colour.setdefault(p.colour, {})[f"M{axis.x(p.value):.0f} {y + j:.0f}h0"] = None
            parts += [f'<path d="{"".join(d)}" class="dots" style="stroke:{c}"/>' for c, d in by_colour.items()]
            continue
        for point, j in zip(points, jitter, strict=True):
            tip = escape(point.label or _number(point.value, unit))
            band = ""
            if point.low is not None and point.high is not None and point.low > 0:
                band = (f'<line x1="{axis.x(point.low):.1f}" x2="{axis.x(point.high):.1f}" y1="{y + j:.1f}" '
                        f'y2="{y + j:.1f}" class="band"/>')  # fmt: skip
            parts.append(
                f'<g><title>{tip}</title>{band}<circle cx="{axis.x(point.value):.1f}" cy="{y + j:.1f}" r="3.5" '
                f'fill="{point.colour}"/></g>'
            )
    parts.append("</svg>")
    svg = "".join(parts)
    return f"<figure>{svg}<figcaption>{escape(caption)}</figcaption></figure>" if caption else f"<figure>{svg}</figure>"


def scatter(points: dict[str, list[tuple[float, float, str]]], x_title: str, y_title: str, caption: str = "") -> str:
    """(x, y, label) points of each series on log axes, 1x marked on both; empty without points."""
    if not any(points.values()):
        return ""
    xs = [x for series in points.values() for x, _, _ in series]
    ys = [y for series in points.values() for _, y, _ in series]
    x_axis, y_axis = LogAxis(xs, 1.0), LogAxis(ys, 1.0)
    height = 320
    span = height - TOP - BOTTOM

    def y_of(value: float) -> float:
        return height - BOTTOM - span * (y_axis.x(value) - LEFT) / (WIDTH - LEFT - RIGHT)

    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{escape(y_title)}">']
    parts += _axis(x_axis, height, "x", 1.0, x_title)
    for tick in [*_ticks(y_axis.low, y_axis.high), 1.0]:
        y = y_of(tick)
        css = "mark" if tick == 1.0 else "grid"
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="{css}"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" class="row-label">{_number(tick, "x")}</text>')
    middle = f"{TOP + span / 2:.0f}"
    parts.append(
        f'<text x="12" y="{middle}" class="axis-title" transform="rotate(-90 12 {middle})">{escape(y_title)}</text>'
    )
    palette = ("#2b6cb0", "#c05621", "#2f855a", "#6b46c1", "#b83280", "#2c7a7b", "#975a16", "#4a5568", "#9b2c2c")
    for index, (name, series) in enumerate(points.items()):
        colour = palette[index % len(palette)]
        if len(series) > DOTS:  # a dot per pixel, no tooltips
            dots = dict.fromkeys(f"M{x_axis.x(x):.0f} {y_of(y):.0f}h0" for x, y, _ in series)
            parts.append(f'<path d="{"".join(dots)}" class="dots" style="stroke:{colour}"/>')
        for x, y, label in series if len(series) <= DOTS else ():
            parts.append(f'<circle cx="{x_axis.x(x):.1f}" cy="{y_of(y):.1f}" r="3.5" fill="{colour}">'
                         f"<title>{escape(name)}: {escape(label)}</title></circle>")  # fmt: skip
        parts.append(f'<text x="{WIDTH - RIGHT}" y="{TOP + 12 + 14 * index}" class="legend" fill="{colour}">'
                     f"{escape(name)}</text>")  # fmt: skip
    parts.append("</svg>")
    return f"<figure>{''.join(parts)}<figcaption>{escape(caption)}</figcaption></figure>"
