"""Small server-side SVG charts (no JavaScript). Every label is XML-escaped; colours are
presentation attributes, so the strict CSP (no inline styles) does not affect them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

W, H, PAD = 520, 260, 44


def _frame(title: str, body: list[str], x_label: str, y_label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {W} {H}" '
        f'width="{W}" height="{H}" role="img" aria-label="{escape(title)}">'
        f'<title>{escape(title)}</title>'
        f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - 10}" y2="{H - PAD}" stroke="#888"/>'
        f'<line x1="{PAD}" y1="10" x2="{PAD}" y2="{H - PAD}" stroke="#888"/>'
        f'<text x="{(W + PAD) / 2}" y="{H - 8}" text-anchor="middle" font-size="12">{escape(x_label)}</text>'
        f'<text x="12" y="{H / 2}" text-anchor="middle" font-size="12" '
        f'transform="rotate(-90 12 {H / 2})">{escape(y_label)}</text>'
        + "".join(body) + "</svg>"
    )


def _x_scale(lo: float, hi: float) -> Callable[[float], float]:
    """The x pixel of a value in ``[lo, hi]`` (all at the left edge when ``lo == hi``)."""
    span = (hi - lo) or 1.0
    return lambda x: PAD + 16 + (x - lo) / span * (W - PAD - 46)


def _y(rate: float) -> float:
    return H - PAD - rate * (H - PAD - 14)


def bars(title: str, items: Sequence[tuple[str, float, float, float]],
         y_label: str = "success") -> str:
    """Bar chart of rates in [0, 1] with interval whiskers: ``(label, rate, low, high)``."""
    body: list[str] = []
    n = max(1, len(items))
    slot = (W - PAD - 20) / n
    for i, (label, rate, low, high) in enumerate(items):
        x = PAD + 10 + i * slot
        bw = slot * 0.6
        body.append(f'<rect x="{x:.1f}" y="{_y(rate):.1f}" width="{bw:.1f}" '
                    f'height="{H - PAD - _y(rate):.1f}" fill="#4a7bd0"><title>{escape(label)}: '
                    f'{rate:.0%} ({low:.0%}–{high:.0%})</title></rect>')
        cx = x + bw / 2
        body.append(f'<line x1="{cx:.1f}" y1="{_y(low):.1f}" x2="{cx:.1f}" y2="{_y(high):.1f}" '
                    'stroke="#222"/>')
        body.append(f'<text x="{cx:.1f}" y="{H - PAD + 14}" text-anchor="middle" '
                    f'font-size="11">{escape(label[:14])}</text>')
        body.append(f'<text x="{cx:.1f}" y="{_y(rate) - 4:.1f}" text-anchor="middle" '
                    f'font-size="11">{rate:.0%}</text>')
    for tick in (0.0, 0.5, 1.0):
        body.append(f'<text x="{PAD - 4}" y="{_y(tick) + 4:.1f}" text-anchor="end" '
                    f'font-size="10">{tick:.0%}</text>')
    return _frame(title, body, "", y_label)


def scatter(title: str, points: Sequence[tuple[str, float, float]], x_label: str,
            line: bool = False) -> str:
    """Scatter of ``(label, x, rate)``; ``line`` joins the points in order (a curve)."""
    if not points:
        return ""
    xs = [p[1] for p in points]
    lo, hi = min(xs), max(xs)
    px = _x_scale(lo, hi)

    body: list[str] = []
    if line and len(points) > 1:
        path = " ".join(f"{px(x):.1f},{_y(r):.1f}" for _, x, r in points)
        body.append(f'<polyline points="{path}" fill="none" stroke="#4a7bd0"/>')
    for label, x, rate in points:
        body.append(f'<circle cx="{px(x):.1f}" cy="{_y(rate):.1f}" r="5" fill="#d0564a">'
                    f'<title>{escape(label)}: {rate:.0%} at {x:.4g}</title></circle>')
        body.append(f'<text x="{px(x) + 7:.1f}" y="{_y(rate) - 6:.1f}" font-size="10">'
                    f'{escape(label[:16])}</text>')
    for tick in (0.0, 0.5, 1.0):
        body.append(f'<text x="{PAD - 4}" y="{_y(tick) + 4:.1f}" text-anchor="end" '
                    f'font-size="10">{tick:.0%}</text>')
    for end in (lo, hi):
        body.append(f'<text x="{px(end):.1f}" y="{H - PAD + 14}" text-anchor="middle" '
                    f'font-size="10">{end:.4g}</text>')
    return _frame(title, body, x_label, "success")


def curve(title: str, points: Sequence[tuple[float, float]], x_label: str, y_label: str) -> str:
    """A line through ``(x, y)`` points in order, on the points' own y range (a loss or a
    reward, not a rate); ``""`` for fewer than two points."""
    if len(points) < 2:
        return ""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    px, yspan = _x_scale(x0, x1), (y1 - y0) or 1.0

    def py(y: float) -> float:
        return H - PAD - (y - y0) / yspan * (H - PAD - 14)

    path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
    body = [f'<polyline points="{path}" fill="none" stroke="#4a7bd0"/>']
    body += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="#d0564a">'
             f'<title>{escape(x_label)} {x:.4g}: {escape(y_label)} {y:.4g}</title></circle>'
             for x, y in points]
    body += [f'<text x="{PAD - 4}" y="{py(y) + 4:.1f}" text-anchor="end" font-size="10">{y:.3g}</text>'
             for y in (y0, y1)]
    body += [f'<text x="{px(x):.1f}" y="{H - PAD + 14}" text-anchor="middle" font-size="10">{x:.4g}</text>'
             for x in (x0, x1)]
    return _frame(title, body, x_label, y_label)
