"""Conservative rounding of printed statistics: a claim is never stronger in print than in fact.

- a **p-value** is rounded *up* (``0.0012`` prints ``0.002``, never ``0.001``), and one below
  ``0.001`` prints ``< 0.001``; a bound (a bootstrap p that only says ``p ≤ x``) keeps its ``≤``;
- an **interval** is rounded *outward*: its low end down, its high end up (``[2.14, 10.31]``
  points prints ``[2.1, 10.4]``), so the printed interval always contains the computed one.

Point estimates are rounded to nearest as usual. Every verdict, table and page that prints a
p-value or an interval end goes through these functions. Rounding is done in decimal on the
float's shortest representation, so ``0.07 × 100`` is ``7.0``, not ``7.000000000000001``
rounded up to ``7.1``.
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

P_DIGITS = 3
"""Decimals of a printed p-value."""
P_FLOOR = 0.001
"""Below this a p-value prints as ``< 0.001``."""


def _rounded(x: float, digits: int, mode: str, scale: float = 1.0) -> float:
    if not math.isfinite(x):
        return x
    value = Decimal(repr(float(x))) * Decimal(repr(float(scale)))
    return float(value.quantize(Decimal(1).scaleb(-digits), rounding=mode)) + 0.0  # no -0.0


def round_up(x: float, digits: int, scale: float = 1.0) -> float:
    """``x × scale`` rounded up (towards +∞) to ``digits`` decimals."""
    return _rounded(x, digits, ROUND_CEILING, scale)


def round_down(x: float, digits: int, scale: float = 1.0) -> float:
    """``x × scale`` rounded down (towards −∞) to ``digits`` decimals."""
    return _rounded(x, digits, ROUND_FLOOR, scale)


def p_cell(p: float, digits: int = P_DIGITS) -> str:
    """A p-value for a table cell: rounded up to ``digits`` decimals, or ``< 0.001``
    (never ``0.000``)."""
    if p < P_FLOOR:
        return f"< {P_FLOOR:g}"
    return f"{min(1.0, round_up(p, digits)):.{digits}f}"


def p_text(p: float, *, bound: bool = False, digits: int = P_DIGITS) -> str:
    """``p = 0.004``, ``p ≤ 0.002`` for an upper bound, or ``p < 0.001``; rounded up."""
    cell = p_cell(p, digits)
    if cell.startswith("<"):
        return f"p {cell}"
    return f"p ≤ {cell}" if bound else f"p = {cell}"


def interval_ends(low: float, high: float, *, scale: float = 100.0,
                  digits: int = 1) -> tuple[float, float]:
    """``(low, high) × scale`` rounded outward: low down, high up."""
    return round_down(low, digits, scale), round_up(high, digits, scale)


def interval_text(low: float, high: float, *, scale: float = 100.0, digits: int = 1,
                  signed: bool = False, sep: str = ", ", suffix: str = "",
                  brackets: bool = True) -> str:
    """An interval rounded outward, by default in points: ``[2.1, 10.4]``; ``signed`` writes
    ``+``/``-`` on both ends, ``suffix`` follows each end (``%``)."""
    lo, hi = interval_ends(low, high, scale=scale, digits=digits)
    fmt = f"{'+' if signed else ''}.{digits}f"
    text = f"{lo:{fmt}}{suffix}{sep}{hi:{fmt}}{suffix}"
    return f"[{text}]" if brackets else text
