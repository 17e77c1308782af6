"""Agreement between judges, verifiers and people: is a judge's score worth reporting?

Point statistics (each equal to its reference implementation to 1e-9,
tests/test_stats_agreement.py):

- :func:`cohen_kappa` — Cohen's κ, unweighted or linear / quadratic weighted
  (``sklearn.metrics.cohen_kappa_score``); undefined (``nan``, as sklearn) when the expected
  disagreement is 0 — both raters used one and the same label throughout;
- :func:`krippendorff_alpha` — Krippendorff's α, any number of raters, missing ratings
  (``krippendorff.alpha``); ``nan`` with fewer than two distinct values;
- :func:`spearman` (``scipy.stats.spearmanr``), :func:`accuracy` (share of equal labels),
  :func:`auroc` (``sklearn.metrics.roc_auc_score``; ties count half).

Interval versions resample *items* (trajectories) — or clusters of items (``clusters=``: one
key per item, e.g. the task, when a task's trajectories are alike) — with the BCa bootstrap
of :mod:`sharpen.stats.itemboot`; every statistic of one call comes from the same replicates.
A proportion of independent items (accuracy, flip rate) gets the Wilson interval instead,
and with clusters the Wilson interval at the effective sample size
(:func:`sharpen.stats.clustered.clustered_interval`). docs/evaluation.md ("Agreement
between judges, verifiers and people") gives the measured coverage of every interval.

Missing labels (``None`` or ``nan``) drop the item from pairwise statistics; ``n`` says how
many items each statistic used.

The judge-specific checks (:func:`verifier_validity`, :func:`flip_rate`, :func:`length_bias`,
:func:`self_consistency`) live in :mod:`sharpen.stats.judge_validity` and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel

from sharpen.stats.bootstrap import DEFAULT_REPS
from sharpen.stats.estimate import Estimate, boot_estimates, cluster_array, is_missing, stack
from sharpen.stats.itemboot import Stat, point
from sharpen.stats.judge_validity import (
    FlipRate,
    LengthBias,
    SelfConsistency,
    VerifierValidity,
    flip_rate,
    length_bias,
    self_consistency,
    verifier_validity,
)
from sharpen.stats.weighted import (
    AlphaLevel,
    KappaWeights,
    alpha_stat,
    auroc_stat,
    kappa_stat,
    match_stat,
    spearman_stat,
)

__all__ = [
    "Agreement", "Estimate", "FlipRate", "LengthBias", "Scale", "SelfConsistency",
    "VerifierValidity", "accuracy", "agreement", "auroc", "cohen_kappa", "flip_rate",
    "krippendorff_alpha", "length_bias", "self_consistency", "spearman", "verifier_validity",
]

Scale = Literal["nominal", "ordinal", "interval"]
"""What the labels are: categories, ordered grades, or numbers on an interval scale."""


def _codes(a: Sequence[Hashable], b: Sequence[Hashable], labels: Sequence[Hashable] | None,
           ) -> tuple[np.ndarray, np.ndarray, list[Hashable]]:
    if len(a) != len(b):
        raise ValueError(f"a has {len(a)} labels, b has {len(b)}")
    order = list(labels) if labels is not None else sorted(set(a) | set(b))  # type: ignore[type-var]
    index = {v: i for i, v in enumerate(order)}
    unknown = (set(a) | set(b)) - set(index)
    if unknown:
        raise ValueError(f"labels {sorted(map(repr, unknown))} are not in labels={order!r}")
    return (np.array([index[v] for v in a], dtype=np.int64),
            np.array([index[v] for v in b], dtype=np.int64), order)


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable], *,
                weights: KappaWeights | None = None, labels: Sequence[Hashable] | None = None) -> float:
    """Cohen's κ of two raters' labels of the same items (``sklearn.metrics.cohen_kappa_score``).

    ``weights`` ``"linear"`` / ``"quadratic"`` weigh a disagreement by the distance of the
    labels' positions in ``labels`` (default: the sorted distinct labels). ``nan`` when κ is
    0/0 — both raters gave every item one and the same label — as sklearn returns (without its
    warning). A label missing from ``labels`` raises ``ValueError`` (sklearn drops the item)."""
    ca, cb, order = _codes(a, b, labels)
    return float(point(kappa_stat(ca, cb, len(order), weights), len(ca))[0])


def krippendorff_alpha(ratings: np.ndarray | Sequence[Sequence[float]],
                       level: AlphaLevel = "nominal") -> float:
    """Krippendorff's α of ``ratings`` (raters × items, ``nan`` = missing) at ``level``, by
    the ``krippendorff`` package; ``nan`` with fewer than two distinct values (the package
    raises there) or no item rated twice."""
    import krippendorff

    r = np.asarray(ratings, dtype=float)
    if len(np.unique(r[~np.isnan(r)])) < 2 or not np.any((~np.isnan(r)).sum(axis=0) >= 2):
        return float("nan")
    with np.errstate(invalid="ignore", divide="ignore"):
        return float(krippendorff.alpha(reliability_data=r, level_of_measurement=level))


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's ρ (``scipy.stats.spearmanr``, midranks for ties); ``nan`` when either is
    constant."""
    if len(set(a)) < 2 or len(set(b)) < 2:
        return float("nan")
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


def accuracy(predicted: Sequence[Hashable], truth: Sequence[Hashable]) -> float:
    """The share of items whose ``predicted`` label equals ``truth`` (``nan`` when empty)."""
    if len(predicted) != len(truth):
        raise ValueError(f"{len(predicted)} predictions for {len(truth)} labels")
    if not predicted:
        return float("nan")
    return sum(p == t for p, t in zip(predicted, truth, strict=True)) / len(predicted)


def auroc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """Area under the ROC curve of ``scores`` for the items whose label is true: the chance a
    random positive scores above a random negative, ties counting half (Mann–Whitney;
    ``sklearn.metrics.roc_auc_score``). ``nan`` when one class is absent."""
    return float(point(auroc_stat(np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)),
                       len(scores))[0])


def _native(x: Hashable) -> Hashable:
    """A numpy scalar as the Python scalar it holds (labels are reported as JSON values)."""
    return x.item() if isinstance(x, np.generic) else x


class Agreement(BaseModel):
    """Two raters (judge and person, two judges, ...) on the same items."""

    scale: Scale
    """What the labels are."""
    n: int
    """Items both rated."""
    n_clusters: int
    """Independent units the bootstrap resampled."""
    labels: list[str | int | float | bool]
    """The label order of ``confusion`` (sorted distinct labels)."""
    confusion: list[list[int]]
    """``confusion[i][j]``: items ``a`` labelled ``labels[i]`` and ``b`` ``labels[j]``."""
    raw_agreement: Estimate
    """Share of items with the same label."""
    kappa: Estimate
    """Cohen's κ: unweighted for nominal labels, quadratic-weighted (over label positions)
    for ordinal and interval labels."""
    kappa_weights: KappaWeights | None
    """The weights ``kappa`` used."""
    alpha: Estimate
    """Krippendorff's α at the scale's level (interval α uses the values themselves)."""
    spearman: Estimate | None
    """Spearman's ρ (ordinal and interval labels only)."""


def agreement(a: Sequence[Hashable], b: Sequence[Hashable], *, scale: Scale = "nominal",
              n_boot: int = DEFAULT_REPS, seed: int = 0, clusters: Sequence[Hashable] | None = None,
              level: float = 0.95) -> Agreement:
    """How well ``a`` and ``b`` (labels of the same items, ``None`` = missing) agree; BCa
    intervals by the bootstrap over items, or over ``clusters`` (one key per item).
    Ordinal and interval labels must be numbers."""
    if len(a) != len(b):
        raise ValueError(f"a has {len(a)} labels, b has {len(b)}")
    keep = np.array([not (is_missing(x) or is_missing(y)) for x, y in zip(a, b, strict=True)], dtype=bool)
    ka = [_native(x) for x, k in zip(a, keep, strict=True) if k]
    kb = [_native(y) for y, k in zip(b, keep, strict=True) if k]
    ca, cb, order = _codes(ka, kb, None)
    n, nl = len(ca), len(order)
    weights: KappaWeights | None = None if scale == "nominal" else "quadratic"
    # α sees label positions for nominal/ordinal (only their order matters), values for interval.
    values = np.array(order, dtype=float) if scale == "interval" else np.arange(nl, dtype=float)
    stats: list[Stat] = [match_stat(ca, cb), kappa_stat(ca, cb, nl, weights),
                         alpha_stat(np.stack([values[ca], values[cb]]), scale)]
    if scale != "nominal":
        stats.append(spearman_stat(values[ca], values[cb]))
    est, g = boot_estimates(stack(*stats), n, [n] * len(stats), cluster_array(clusters, keep),
                            n_boot=n_boot, seed=seed, level=level)
    conf = np.bincount(ca * nl + cb, minlength=nl * nl).reshape(nl, nl) if n else np.zeros((0, 0))
    return Agreement(scale=scale, n=n, n_clusters=g, labels=order,  # type: ignore[arg-type]
                     confusion=conf.astype(int).tolist(), raw_agreement=est[0], kappa=est[1],
                     kappa_weights=weights, alpha=est[2], spearman=est[3] if len(est) > 3 else None)
