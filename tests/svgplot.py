"""Line charts as SVG files, for the benchmarks' results: no plotting library needed.

    svgplot.lines(path, title, x_label, y_label, {"kernel": [(x, y), ...], "fibre": [...]})

Axes start at zero, ticks are round numbers (1, 2 or 5 times a power of ten), each series has
its own colour and a legend entry; the file is plain SVG 1.1 that browsers and GitHub render.
"""

from __future__ import annotations

import math
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 720, 420
LEFT, RIGHT, TOP, BOTTOM = 80, 170, 40, 50
#: Colour-blind-safe (Okabe-Ito).
COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"]


def nice_step(span: float, ticks: int = 6) -> float:
    """A round tick step that cuts `span` into about `ticks` pieces."""
    if span <= 0:
        return 1.0
    raw = span / ticks
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag


def label(v: float) -> str:
    if v == 0:
        return "0"
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:g}{suffix}"
    return f"{v:g}"


def lines(path: str, title: str, x_label: str, y_label: str, series: dict[str, list[tuple[float, float]]]) -> None:
    points = [p for s in series.values() for p in s]
    x_max = max((x for x, _ in points), default=1.0) or 1.0
    y_max = max((y for _, y in points), default=1.0) or 1.0
    xs, ys = nice_step(x_max), nice_step(y_max)
    x_top, y_top = math.ceil(x_max / xs) * xs, math.ceil(y_max / ys) * ys
    pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + x / x_top * pw

    def py(y: float) -> float:
        return TOP + ph - y / y_top * ph

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{WIDTH / 2}" y="22" text-anchor="middle" font-size="14">{escape(title)}</text>',
    ]
    i = 0
    while i * xs <= x_top + 1e-9:
        x = px(i * xs)
        out.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{TOP + ph}" stroke="#ddd"/>')
        out.append(f'<text x="{x:.1f}" y="{TOP + ph + 16}" text-anchor="middle">{label(i * xs)}</text>')
        i += 1
    i = 0
    while i * ys <= y_top + 1e-9:
        y = py(i * ys)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + pw}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{label(i * ys)}</text>')
        i += 1
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>')
    out.append(f'<text x="{LEFT + pw / 2}" y="{HEIGHT - 10}" text-anchor="middle">{escape(x_label)}</text>')
    out.append(f'<text transform="translate(18 {TOP + ph / 2}) rotate(-90)" text-anchor="middle">'
               f'{escape(y_label)}</text>')
    for n, (name, pts) in enumerate(series.items()):
        colour = COLOURS[n % len(COLOURS)]
        d = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in sorted(pts))
        out.append(f'<polyline points="{d}" fill="none" stroke="{colour}" stroke-width="2"/>')
        ly = TOP + 10 + 20 * n
        out.append(f'<line x1="{LEFT + pw + 12}" y1="{ly}" x2="{LEFT + pw + 32}" y2="{ly}" '
                   f'stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{LEFT + pw + 38}" y="{ly + 4}">{escape(name)}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
