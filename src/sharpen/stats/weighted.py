"""Agreement statistics as functions of item weights (:data:`sharpen.stats.itemboot.Stat`).

Each builder takes the data once (labels already coded as integers ``0..L-1`` by the
caller) and returns ``stat(W)`` for a weight matrix ``W`` of shape ``(B, N)``; row ``r`` is
the statistic on the data with item ``i`` counted ``W[r, i]`` times. With every weight 1 each
equals the reference implementation it is tested against (tests/test_stats_agreement.py):

- :func:`kappa_stat` — ``sklearn.metrics.cohen_kappa_score`` (unweighted, linear, quadratic);
- :func:`alpha_stat` — ``krippendorff.alpha`` (nominal, ordinal, interval, ratio);
- :func:`spearman_stat` — ``scipy.stats.spearmanr`` (midranks for ties);
- :func:`auroc_stat` — ``sklearn.metrics.roc_auc_score`` (ties count half: Mann–Whitney);
- :func:`match_stat` — the share of items where two codes are equal.

A statistic that is undefined on a replicate (0/0) is ``nan`` there.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from sharpen.stats.itemboot import Stat, level_sums

KappaWeights = Literal["linear", "quadratic"]
"""Disagreement weights of a weighted κ: ``|i − j|`` or ``(i − j)²`` for label indices."""

AlphaLevel = Literal["nominal", "ordinal", "interval", "ratio"]
"""Krippendorff's levels of measurement."""


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def kappa_weight_matrix(n_labels: int, weights: KappaWeights | None) -> np.ndarray:
    """The ``L × L`` disagreement weights of Cohen's κ (0 on the diagonal)."""
    i = np.arange(n_labels, dtype=float)
    d = i[:, None] - i[None, :]
    if weights is None:
        return np.asarray(d != 0, dtype=float)
    return np.asarray(np.abs(d) if weights == "linear" else d * d, dtype=float)


def kappa_stat(a: np.ndarray, b: np.ndarray, n_labels: int, weights: KappaWeights | None = None) -> Stat:
    """Cohen's κ of label codes ``a`` and ``b``: ``1 − Σ w·O / Σ w·E`` over the confusion
    matrix ``O`` and its independence expectation ``E = rowsum ⊗ colsum / n``."""
    pair = np.asarray(a, dtype=np.int64) * n_labels + np.asarray(b, dtype=np.int64)
    wm = kappa_weight_matrix(n_labels, weights)

    def stat(w: np.ndarray) -> np.ndarray:
        conf = level_sums(w, pair, n_labels * n_labels).reshape(-1, n_labels, n_labels)
        n = conf.sum(axis=(1, 2))
        rows, cols = conf.sum(axis=2), conf.sum(axis=1)
        observed = np.einsum("ij,rij->r", wm, conf)
        expected = np.einsum("ij,ri,rj->r", wm, rows, cols)
        return 1.0 - _ratio(observed * n, expected)

    return stat


def match_stat(a: np.ndarray, b: np.ndarray) -> Stat:
    """The weighted share of items with ``a == b``."""
    same = (np.asarray(a) == np.asarray(b)).astype(float)

    def stat(w: np.ndarray) -> np.ndarray:
        return _ratio(w @ same, w.sum(axis=1))

    return stat


def _alpha_distance(level: AlphaLevel, values: np.ndarray, n_c: np.ndarray) -> np.ndarray:
    """``δ²(c, k)`` for the value domain ``values``: ``(V, V)``, or ``(B, V, V)`` for ordinal
    (its distance depends on the marginal counts ``n_c`` of shape ``(B, V)``)."""
    v = values.astype(float)
    diff = v[:, None] - v[None, :]
    if level == "nominal":
        return np.asarray(diff != 0, dtype=float)
    if level == "interval":
        return np.asarray(diff * diff, dtype=float)
    if level == "ratio":
        s = v[:, None] + v[None, :]
        # ((c − k) / (c + k))²; 0/0 only at c = k = 0, where the distance is 0.
        return np.where(s != 0, diff * diff / np.where(s != 0, s * s, 1.0), 0.0)
    lo = np.minimum.outer(np.arange(len(v)), np.arange(len(v)))
    hi = np.maximum.outer(np.arange(len(v)), np.arange(len(v)))
    cum = np.concatenate([np.zeros((len(n_c), 1)), np.cumsum(n_c, axis=1)], axis=1)
    between = cum[:, hi + 1] - cum[:, lo]  # Σ_{g = lo..hi} n_g
    return np.asarray((between - (n_c[:, lo] + n_c[:, hi]) / 2) ** 2, dtype=float)


def alpha_stat(ratings: np.ndarray, level: AlphaLevel = "nominal") -> Stat:
    """Krippendorff's α of ``ratings`` (raters × items, ``nan`` = missing), items weighted.

    Unit ``u`` with value counts ``x_u`` (``m_u`` values, ``m_u ≥ 2``) adds
    ``(x_u x_uᵀ − diag x_u) / (m_u − 1)`` to the coincidence matrix ``O``; with ``n_c`` its
    row sums and ``n = Σ n_c``, ``α = 1 − (n − 1) Σ O·δ² / Σ n_c n_k δ²`` — the package's
    formula. Units with fewer than two values are not pairable and weigh nothing. The value
    domain is the sorted distinct values of the whole data (a replicate may miss some)."""
    r = np.asarray(ratings, dtype=float)
    if r.ndim != 2:
        raise ValueError("ratings must be raters × items")
    values = np.unique(r[~np.isnan(r)])
    x = (r.T[:, :, None] == values[None, None, :]).sum(axis=1).astype(float)  # (N, V)
    m = x.sum(axis=1)
    pairable = m >= 2
    nv = len(values)
    coinc = x[:, :, None] * x[:, None, :]
    coinc[:, np.arange(nv), np.arange(nv)] -= x
    coinc /= np.where(pairable, m - 1, 1.0)[:, None, None]
    coinc[~pairable] = 0.0
    flat = coinc.reshape(len(m), -1)

    def stat(w: np.ndarray) -> np.ndarray:
        o = (w @ flat).reshape(-1, nv, nv)
        n_c = o.sum(axis=2)
        n = n_c.sum(axis=1)
        d = _alpha_distance(level, values, n_c)
        dd = d if d.ndim == 3 else d[None, :, :]
        observed = (o * dd).sum(axis=(1, 2))
        expected = np.einsum("rc,rk,rck->r", n_c, n_c, np.broadcast_to(dd, o.shape))
        return 1.0 - _ratio((n - 1) * observed, expected)

    return stat


def _midranks(w: np.ndarray, codes: np.ndarray, n_levels: int) -> np.ndarray:
    """Per replicate, the midrank of each item in the weighted sample (up to a constant
    shift, which no correlation sees), shape ``(B, N)``."""
    c = level_sums(w, codes, n_levels)
    rank = np.cumsum(c, axis=1) - c / 2
    return np.take_along_axis(rank, np.broadcast_to(codes, w.shape), axis=1)


def spearman_stat(a: np.ndarray, b: np.ndarray) -> Stat:
    """Spearman's ρ of ``a`` and ``b``: the weighted Pearson correlation of their midranks."""
    ua, ca = np.unique(np.asarray(a, dtype=float), return_inverse=True)
    ub, cb = np.unique(np.asarray(b, dtype=float), return_inverse=True)

    def stat(w: np.ndarray) -> np.ndarray:
        ra, rb = _midranks(w, ca, len(ua)), _midranks(w, cb, len(ub))
        tot = w.sum(axis=1, keepdims=True)
        ra = ra - (w * ra).sum(axis=1, keepdims=True) / tot
        rb = rb - (w * rb).sum(axis=1, keepdims=True) / tot
        cov = (w * ra * rb).sum(axis=1)
        var = (w * ra * ra).sum(axis=1) * (w * rb * rb).sum(axis=1)
        # A constant variable has variance 0 up to rounding: call it 0 (ρ undefined).
        scale = (tot[:, 0] ** 3) * 1e-12
        return _ratio(cov, np.sqrt(np.where(var > scale * scale, var, 0.0)))

    return stat


def auroc_stat(scores: np.ndarray, positive: np.ndarray) -> Stat:
    """The area under the ROC curve of ``scores`` for the ``positive`` items: the weighted
    share of (positive, negative) pairs the score orders correctly, ties counting half."""
    levels, codes = np.unique(np.asarray(scores, dtype=float), return_inverse=True)
    pos = np.asarray(positive, dtype=bool).astype(float)
    g = len(levels)

    def stat(w: np.ndarray) -> np.ndarray:
        p = level_sums(w, codes, g, pos)
        q = level_sums(w, codes, g, 1.0 - pos)
        below = np.cumsum(q, axis=1) - q
        wins = (p * (below + q / 2)).sum(axis=1)
        return _ratio(wins, p.sum(axis=1) * q.sum(axis=1))

    return stat
