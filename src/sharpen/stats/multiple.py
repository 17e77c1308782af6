"""Multiple comparisons: Holm's step-down adjustment.

When ``m`` runs are each compared with one baseline, the chance that at least one "B is
better" is a fluke grows with ``m``. Holm (1979) controls that family-wise error rate at α
for any dependence between the tests and is uniformly more powerful than Bonferroni: sort
the p-values ``p_(1) ≤ … ≤ p_(m)``, adjust ``p̃_(i) = max_{j ≤ i} min(1, (m − j + 1)·p_(j))``,
and reject where ``p̃ < α``. Equals statsmodels' ``multipletests(method="holm")``.
"""

from __future__ import annotations

from collections.abc import Sequence


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the input order."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out
