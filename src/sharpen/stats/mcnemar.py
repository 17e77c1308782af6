"""McNemar's test and Newcombe's interval: paired binary outcomes, one trial per task.

Two runs on the same ``n`` tasks, one valid trial each, form a 2×2 table of pairs::

                  B succeeds   B fails
    A succeeds        a           b
    A fails           c           d

Only the discordant pairs ``b`` and ``c`` carry evidence about ``p_B − p_A = (c − b)/n``.

- :func:`mcnemar` tests ``H0: p_A = p_B``. With fewer than :data:`EXACT_BELOW` discordant
  pairs it is the exact two-sided binomial test of ``c`` out of ``b + c`` at 1/2
  (``min(1, 2·P(X ≤ min(b, c)))``); otherwise the chi-square test with continuity correction,
  ``(|b − c| − 1)² / (b + c)`` on 1 degree of freedom. Both equal statsmodels'
  ``mcnemar(table, exact=..., correction=True)``.
- :func:`newcombe_interval` is Newcombe's (1998) hybrid score interval for the difference of
  paired proportions (his method 10): Wilson intervals of both margins combined with the
  observed correlation ``φ`` of the pairs. It stays inside [-1, 1] and keeps near-nominal
  coverage where the Wald interval fails (few discordant pairs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from sharpen.stats.intervals import wilson_interval, z_quantile

EXACT_BELOW = 25
"""Discordant pairs below which McNemar's test is exact (binomial)."""


@dataclass(frozen=True)
class McNemarResult:
    """The outcome of :func:`mcnemar`."""

    b: int
    """Pairs where A succeeded and B failed."""
    c: int
    """Pairs where A failed and B succeeded."""
    statistic: float
    """``min(b, c)`` for the exact test, the chi-square statistic otherwise."""
    p_value: float
    """Two-sided p-value."""
    method: Literal["exact-binomial", "chi2-continuity"]
    """Which version was used."""


def mcnemar(b: int, c: int) -> McNemarResult:
    """McNemar's test of ``b`` (A only) against ``c`` (B only) discordant pairs."""
    if b < 0 or c < 0:
        raise ValueError("discordant counts must be non-negative")
    m = b + c
    if m < EXACT_BELOW:
        if m == 0:
            return McNemarResult(b, c, 0.0, 1.0, "exact-binomial")
        from scipy.special import bdtr

        k = min(b, c)
        p = min(1.0, 2.0 * float(bdtr(k, m, 0.5)))
        return McNemarResult(b, c, float(k), p, "exact-binomial")
    stat = (abs(b - c) - 1.0) ** 2 / m
    p = math.erfc(math.sqrt(stat / 2.0))  # chi-square survival function, 1 df
    return McNemarResult(b, c, stat, p, "chi2-continuity")


def newcombe_interval(
    both: int, first_only: int, second_only: int, neither: int, level: float = 0.95
) -> tuple[float, float]:
    """Newcombe's hybrid score interval for ``p_first − p_second`` from paired counts:
    ``both`` succeed, only the first, only the second, ``neither``."""
    n = both + first_only + second_only + neither
    if n == 0:
        return -1.0, 1.0
    z = z_quantile(0.5 + level / 2)
    s1, s2 = both + first_only, both + second_only
    p1, p2 = s1 / n, s2 / n
    l1, u1 = wilson_interval(s1, n, z)
    l2, u2 = wilson_interval(s2, n, z)
    denom = float(s1) * (n - s1) * s2 * (n - s2)
    phi = 0.0
    if denom > 0:
        phi = (both * neither - first_only * second_only) / math.sqrt(denom)
    theta = p1 - p2
    dl = (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2
    du = (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2
    return max(-1.0, theta - math.sqrt(max(dl, 0.0))), min(1.0, theta + math.sqrt(max(du, 0.0)))
