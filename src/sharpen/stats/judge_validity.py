"""Is a judge valid? Its agreement with the verifier, its order and length biases, its
consistency with itself. Defined in docs/evaluation.md ("Agreement between judges, verifiers
and people"); in short:

- :func:`verifier_validity` — the judge against the verifier's verdicts on the same
  trajectories: accuracy (Wilson), Cohen's κ and, when the judge gives a numeric score, AUROC
  (BCa over trajectories or their clusters);
- :func:`flip_rate` — a pairwise judge run in both orders: the share of pairs whose winner
  changes with the order (Wilson), and the share of decisive verdicts that went to whichever
  candidate was shown first (0.5 = no position bias);
- :func:`length_bias` — Spearman's ρ of score and trajectory length *within* each verifier
  verdict, combined over the two verdicts weighted by their sizes (BCa): a judge that prefers
  long trajectories among equally correct ones shows ρ > 0 here, while the overall ρ mixes
  that with "longer trajectories are more often correct";
- :func:`self_consistency` — repeated samples of the judge on the same item: Krippendorff's α
  with the repeats as raters, and the mean share of agreeing sample pairs per item (BCa).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
from pydantic import BaseModel

from sharpen.stats.bootstrap import DEFAULT_REPS
from sharpen.stats.estimate import (
    Estimate,
    boot_estimates,
    cluster_array,
    is_missing,
    proportion,
    stack,
)
from sharpen.stats.itemboot import Stat
from sharpen.stats.weighted import AlphaLevel, alpha_stat, auroc_stat, kappa_stat, spearman_stat


class VerifierValidity(BaseModel):
    """A judge's verdicts (or scores) against the verifier's on the same trajectories."""

    n: int
    """Trajectories both judged."""
    n_clusters: int
    """Independent units the bootstrap resampled."""
    base_rate: float | None
    """Share the verifier passed."""
    judge_rate: float | None
    """Share the judge passed (``None`` for scores without a threshold)."""
    threshold: float | None
    """Scores at or above this count as a judge pass (``None``: labels, or no threshold)."""
    accuracy: Estimate | None
    """Share of trajectories where judge and verifier agree (Wilson; ``wilson-deff`` with
    clusters); ``None`` for scores without a threshold."""
    kappa: Estimate | None
    """Cohen's κ of judge pass/fail and verdict: agreement beyond what the two base rates
    give by chance (accuracy alone rewards a judge that passes everything when most pass)."""
    auroc: Estimate | None
    """How well the judge's score ranks passed above failed trajectories (numeric scores
    only; 0.5 = chance)."""


def _binary(values: Sequence[object]) -> bool:
    return all(isinstance(v, bool | np.bool_) or v in (0, 1) for v in values)


def verifier_validity(judge: Sequence[bool | float | None], verdicts: Sequence[bool | None], *,
                      threshold: float | None = None, n_boot: int = DEFAULT_REPS, seed: int = 0,
                      clusters: Sequence[Hashable] | None = None,
                      level: float = 0.95) -> VerifierValidity:
    """The judge's labels (booleans, or 0/1) or numeric scores against the verifier's
    ``verdicts``; a trajectory missing either (``None``) is left out. Numeric scores get an
    AUROC, and with ``threshold`` also accuracy and κ of ``score >= threshold``."""
    if len(judge) != len(verdicts):
        raise ValueError(f"{len(judge)} judge values for {len(verdicts)} verdicts")
    keep = np.array([not (is_missing(j) or v is None) for j, v in zip(judge, verdicts, strict=True)])
    js = [j for j, k in zip(judge, keep, strict=True) if k]
    y = np.array([bool(v) for v, k in zip(verdicts, keep, strict=True) if k], dtype=bool)
    codes = cluster_array(clusters, keep)
    scores = None if _binary(js) else np.array(js, dtype=float)
    if scores is None:
        pred: np.ndarray | None = np.array([bool(j) for j in js], dtype=bool)
    else:
        pred = None if threshold is None else scores >= threshold
    n = len(y)
    stats: list[Stat] = []
    if pred is not None:
        stats.append(kappa_stat(pred.astype(np.int64), y.astype(np.int64), 2))
    if scores is not None:
        stats.append(auroc_stat(scores, y))
    est, g = boot_estimates(stack(*stats), n, [n] * len(stats), codes, n_boot=n_boot, seed=seed,
                            level=level) if stats else ([], 0)
    kappa = est.pop(0) if pred is not None else None
    return VerifierValidity(
        n=n, n_clusters=g, base_rate=float(y.mean()) if n else None,
        judge_rate=float(pred.mean()) if pred is not None and n else None,
        threshold=threshold if scores is not None else None,
        accuracy=proportion(pred == y, codes, level) if pred is not None else None,
        kappa=kappa, auroc=est[0] if scores is not None else None)


class FlipRate(BaseModel):
    """A pairwise judge asked twice per pair, the candidates' order swapped."""

    n: int
    """Pairs with a verdict in both orders."""
    flips: int
    """Pairs whose winner changed with the order."""
    rate: Estimate
    """``flips / n`` (Wilson; ``wilson-deff`` with clusters)."""
    first_shown: float | None
    """Share of decisive verdicts (not ties) that picked the candidate shown first: 0.5 = no
    position bias."""


def flip_rate(first_order_winner: Sequence[Hashable | None],
              second_order_winner: Sequence[Hashable | None], *, a: Hashable = "A",
              b: Hashable = "B", clusters: Sequence[Hashable] | None = None,
              level: float = 0.95) -> FlipRate:
    """Order sensitivity of a pairwise judge. Both sequences name the winner in the *same*
    terms (``a``, ``b``, anything else is a tie): ``a`` was shown first in the first order,
    ``b`` in the second. A pair missing either verdict (``None``) is left out."""
    if len(first_order_winner) != len(second_order_winner):
        raise ValueError("first_order_winner and second_order_winner differ in length")
    keep = np.array([not (is_missing(x) or is_missing(y))
                     for x, y in zip(first_order_winner, second_order_winner, strict=True)])
    pairs = [(x, y) for (x, y), k in zip(zip(first_order_winner, second_order_winner, strict=True),
                                         keep, strict=True) if k]
    flips = np.array([x != y for x, y in pairs], dtype=bool)
    decisive = sum(x in (a, b) for x, _ in pairs) + sum(y in (a, b) for _, y in pairs)
    shown_first = sum(x == a for x, _ in pairs) + sum(y == b for _, y in pairs)
    return FlipRate(n=len(pairs), flips=int(flips.sum()),
                    rate=proportion(flips, cluster_array(clusters, keep), level),
                    first_shown=shown_first / decisive if decisive else None)


class LengthBias(BaseModel):
    """Does the judge's score follow trajectory length among equally correct trajectories?"""

    n: int
    """Trajectories with a score, a length and a verdict."""
    n_clusters: int
    """Independent units the bootstrap resampled."""
    within: Estimate
    """``Σ_v n_v ρ_v / Σ_v n_v`` over the verdicts ``v`` whose ρ is defined: the size-weighted
    mean of the within-verdict Spearman correlations of score and length."""
    passed: Estimate
    """ρ of score and length among trajectories the verifier passed."""
    failed: Estimate
    """ρ among those it failed."""
    overall: Estimate
    """ρ over all trajectories, ignoring the verdict (for contrast)."""


def _within(scores: np.ndarray, lengths: np.ndarray, y: np.ndarray) -> Stat:
    parts = [(np.flatnonzero(y == v), spearman_stat(scores[y == v], lengths[y == v])) for v in (True, False)]

    def stat(w: np.ndarray) -> np.ndarray:
        num = np.zeros(len(w))
        den = np.zeros(len(w))
        rhos = []
        for idx, sp in parts:
            sw = w[:, idx]
            rho = sp(sw) if len(idx) else np.full(len(w), np.nan)
            ok = ~np.isnan(rho)
            num += np.where(ok, sw.sum(axis=1) * np.nan_to_num(rho), 0.0)
            den += np.where(ok, sw.sum(axis=1), 0.0)
            rhos.append(rho)
        with np.errstate(invalid="ignore", divide="ignore"):
            within = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
        return np.stack([within, *rhos], axis=1)

    return stat


def length_bias(scores: Sequence[float | None], lengths: Sequence[float], verdicts: Sequence[bool | None],
                *, n_boot: int = DEFAULT_REPS, seed: int = 0, clusters: Sequence[Hashable] | None = None,
                level: float = 0.95) -> LengthBias:
    """Spearman's ρ of judge ``scores`` and trajectory ``lengths`` (tokens, steps: any
    monotone measure) within each verifier verdict, combined (see :class:`LengthBias`);
    BCa over trajectories or ``clusters``."""
    if not len(scores) == len(lengths) == len(verdicts):
        raise ValueError("scores, lengths and verdicts differ in length")
    keep = np.array([not (is_missing(s) or is_missing(n) or v is None)
                     for s, n, v in zip(scores, lengths, verdicts, strict=True)])
    s = np.array([x for x, k in zip(scores, keep, strict=True) if k], dtype=float)
    ln = np.array([x for x, k in zip(lengths, keep, strict=True) if k], dtype=float)
    y = np.array([bool(v) for v, k in zip(verdicts, keep, strict=True) if k], dtype=bool)
    n, npass = len(y), int(y.sum())
    est, g = boot_estimates(stack(_within(s, ln, y), spearman_stat(s, ln)), n,
                            [n, npass, n - npass, n], cluster_array(clusters, keep), n_boot=n_boot,
                            seed=seed, level=level)
    return LengthBias(n=n, n_clusters=g, within=est[0], passed=est[1], failed=est[2], overall=est[3])


class SelfConsistency(BaseModel):
    """Repeated samples of a judge on the same items."""

    n: int
    """Items with at least two samples."""
    repeats: int
    """Samples per item asked for (columns of the input)."""
    alpha: Estimate
    """Krippendorff's α with the repeats as raters (1 = the judge always says the same)."""
    pairwise_agreement: Estimate
    """Mean over items of the share of sample pairs with the same label."""


def _pair_share(x: np.ndarray) -> Stat:
    m = x.sum(axis=1)
    ok = m >= 2
    share = np.where(ok, (x * (x - 1)).sum(axis=1) / np.where(ok, m * (m - 1), 1.0), 0.0)

    def stat(w: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            den = w @ ok.astype(float)
            return np.where(den > 0, (w @ share) / np.where(den > 0, den, 1.0), np.nan)

    return stat


def self_consistency(samples: Sequence[Sequence[Hashable | None]], *, scale: AlphaLevel = "nominal",
                     n_boot: int = DEFAULT_REPS, seed: int = 0,
                     clusters: Sequence[Hashable] | None = None, level: float = 0.95) -> SelfConsistency:
    """How often the judge agrees with itself: ``samples`` is items × repeats (``None`` = a
    sample that failed). α at ``scale`` (numbers unless nominal) and the mean pairwise exact
    agreement, BCa over items or ``clusters``; items with fewer than two samples are left out."""
    rows = [list(r) for r in samples]
    repeats = max((len(r) for r in rows), default=0)
    present = [[v for v in r if not is_missing(v)] for r in rows]
    keep = np.array([len(p) >= 2 for p in present], dtype=bool)
    kept = [r for r, k in zip(rows, keep, strict=True) if k]
    distinct = sorted({v for p in present for v in p})  # type: ignore[type-var]
    index = {v: i for i, v in enumerate(distinct)}
    ratings = np.full((repeats, len(kept)), np.nan)
    for j, r in enumerate(kept):
        for i, v in enumerate(r):
            if not is_missing(v):
                ratings[i, j] = float(v) if scale in ("interval", "ratio") else index[v]  # type: ignore[arg-type]
    counts = np.stack([np.bincount([index[v] for v in r if not is_missing(v)], minlength=len(distinct))
                       for r in kept]) if kept else np.zeros((0, max(len(distinct), 1)))
    n = len(kept)
    est, _ = boot_estimates(stack(alpha_stat(ratings, scale), _pair_share(counts.astype(float))), n,
                            [n, n], cluster_array(clusters, keep), n_boot=n_boot, seed=seed, level=level)
    return SelfConsistency(n=n, repeats=repeats, alpha=est[0], pairwise_agreement=est[1])
