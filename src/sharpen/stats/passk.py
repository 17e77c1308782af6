"""pass@k and pass^k: per-task estimators from ``n`` valid trials of which ``c`` succeeded.

- **pass@k** — the chance that at least one of ``k`` trials drawn without replacement from
  the task's ``n`` succeeds. The unbiased estimator (Chen et al., 2021) is
  ``1 - C(n-c, k) / C(n, k)``, computed in the numerically stable product form
  ``1 - prod_{i=n-c+1}^{n} (1 - k/i)`` (no huge binomial coefficients).
- **pass^k** — the chance that all ``k`` trials succeed (reliability, Yao et al., 2024):
  ``C(c, k) / C(n, k) = prod_{i=0}^{k-1} (c-i)/(n-i)``.

Both are **undefined** (``None``) when ``n < k``: sharpen never extrapolates a task to more
trials than it has. Per-task values are averaged over the tasks where they are defined (see
:mod:`sharpen.stats.accuracy`).
"""

from __future__ import annotations

import numpy as np


def _check(n: int, c: int, k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if not 0 <= c <= n:
        raise ValueError(f"c={c} must lie in [0, n={n}]")


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """Unbiased pass@k of one task with ``c`` successes in ``n`` valid trials; ``None`` when
    ``n < k``."""
    _check(n, c, k)
    if n < k:
        return None
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def pass_hat_k(n: int, c: int, k: int) -> float | None:
    """Unbiased pass^k (all ``k`` succeed) of one task; ``None`` when ``n < k``."""
    _check(n, c, k)
    if n < k:
        return None
    prod = 1.0
    for i in range(k):
        prod *= (c - i) / (n - i)
        if prod == 0.0:
            break
    return prod


def per_task_table(
    n: np.ndarray, c: np.ndarray, k_max: int, *, kind: str = "at"
) -> tuple[np.ndarray, np.ndarray]:
    """Per-task pass@k (``kind="at"``) or pass^k (``kind="hat"``) for ``k = 1..k_max``.

    Returns ``(values, defined)``, both of shape ``(len(n), k_max)``: ``values[t, k-1]`` is the
    estimate for task ``t`` (0 where undefined) and ``defined[t, k-1]`` says whether
    ``n[t] >= k``. Each distinct ``(n, c)`` pair is computed once, so the cost does not grow
    with the number of tasks beyond one lookup each.
    """
    fn = pass_at_k if kind == "at" else pass_hat_k
    n = np.asarray(n, dtype=np.int64)
    c = np.asarray(c, dtype=np.int64)
    values = np.zeros((len(n), k_max))
    defined = np.zeros((len(n), k_max), dtype=bool)
    if len(n) == 0 or k_max < 1:
        return values, defined
    pairs, inverse = np.unique(np.stack([n, c], axis=1), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    table = np.zeros((len(pairs), k_max))
    ok = np.zeros((len(pairs), k_max), dtype=bool)
    for j, (nj, cj) in enumerate(pairs):
        for k in range(1, min(int(nj), k_max) + 1):
            v = fn(int(nj), int(cj), k)
            assert v is not None
            table[j, k - 1] = v
            ok[j, k - 1] = True
    return table[inverse], ok[inverse]
