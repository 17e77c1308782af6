"""Confidence intervals for proportions."""

from __future__ import annotations

import math

Z95 = 1.959963984540054  # the 0.975 quantile of the standard normal


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; ``(0.0, 1.0)`` when ``n == 0``.

    Wilson stays inside [0, 1] and keeps near-nominal coverage at small n and extreme rates,
    where the normal (Wald) interval collapses to zero width.
    """
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= n:
        raise ValueError(f"successes={successes} must lie in [0, n={n}]")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)
