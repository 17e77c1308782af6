"""Predicting success from stage metrics (TRAJEVAL's pass@1 predictor), with its
cross-validated error.

The features of a counted attempt are, per stage in the run's order, its ``steps``, ``tokens``
and ``seconds``, and — when any trajectory of the run has a reference — its ``precision`` and
``recall`` (an undefined one, no action or no reference action in the stage, is 0). The model
is scikit-learn's ``LogisticRegression`` on standardised features (``StandardScaler``), scored
by stratified k-fold cross-validation (``k = min(5, solved, failed)``, shuffled with seed 0):
every attempt is predicted once by a model fitted without it. Reported: the out-of-fold
accuracy with a Wilson 95% interval, next to the majority-class accuracy it has to beat; the
out-of-fold AUROC with the Hanley & McNeil (1982) 95% interval (zero-width at an AUROC of
exactly 0 or 1, where it understates the uncertainty: read it with ``n``); and the
coefficients of the
model fitted on every attempt (per standard deviation of the feature). With fewer than 2
solved or 2 failed attempts there is nothing to cross-validate: the status says "not enough
data" and no number is given. Without scikit-learn installed the status says so.

It describes a run rather than forecasting one: the features are of whole episodes, and an
episode ends when it is solved, so a stage's step count already carries the outcome.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from sharpen.stats.intervals import Interval, wilson

if TYPE_CHECKING:
    from sharpen.diagnose.stages import StageReport

FOLDS = 5
"""Folds of the cross-validation (fewer when a class has fewer members)."""

MAX_FIT = 5000
"""Counted attempts the predictor is fitted and cross-validated on at most: a larger run is
sampled (seeded, without replacement), which keeps a 100,000-trajectory diagnosis from
spending most of its time in the fits, while the accuracy's interval over 5,000 attempts is
already within ±1.4 points."""


class Prediction(BaseModel):
    """How well stage metrics predict success in one run."""

    status: Literal["ok", "not enough data", "unavailable"]
    reason: str = ""
    """Why there is no prediction (empty when ``status`` is ``ok``)."""
    n: int = 0
    """Counted attempts used."""
    sampled: bool = False
    """Whether ``n`` is a seeded sample of :data:`MAX_FIT` of the run's counted attempts."""
    solved: int = 0
    failed: int = 0
    folds: int = 0
    features: list[str] = Field(default_factory=list)
    accuracy: float | None = None
    """Out-of-fold accuracy (threshold 0.5)."""
    accuracy_ci: Interval | None = None
    majority: float | None = None
    """Accuracy of always predicting the more common class."""
    auroc: float | None = None
    """Out-of-fold AUROC."""
    auroc_ci: tuple[float, float] | None = None
    """Hanley & McNeil 95% interval of the AUROC, clipped to [0, 1]."""
    coefficients: dict[str, float] = Field(default_factory=dict)
    """Per feature, the log-odds change per standard deviation (model fitted on all)."""


def features(report: StageReport) -> tuple[list[str], list[list[float]], list[bool]]:
    """Feature names, the counted attempts' feature rows and their success labels."""
    with_ref = report.with_reference > 0
    names = [f"{s}.{f}" for s in report.order
             for f in ("steps", "tokens", "seconds", *(("precision", "recall") if with_ref else ()))]
    rows: list[list[float]] = []
    labels: list[bool] = []
    for t in report.per_trajectory:
        if t.success is None:
            continue
        by = {m.stage: m for m in t.stages}
        row: list[float] = []
        for s in report.order:
            m = by.get(s)
            row += [float(m.steps), float(m.tokens), m.seconds] if m else [0.0, 0.0, 0.0]
            if with_ref:
                row += [(m.precision or 0.0), (m.recall or 0.0)] if m else [0.0, 0.0]
        rows.append(row)
        labels.append(t.success)
    return names, rows, labels


def hanley_mcneil(auc: float, positives: int, negatives: int) -> tuple[float, float]:
    """The 95% interval of an AUROC from its Hanley & McNeil standard error."""
    q1, q2 = auc / (2 - auc), 2 * auc * auc / (1 + auc)
    var = (auc * (1 - auc) + (positives - 1) * (q1 - auc * auc)
           + (negatives - 1) * (q2 - auc * auc)) / (positives * negatives)
    half = 1.959963984540054 * math.sqrt(max(var, 0.0))
    return max(0.0, auc - half), min(1.0, auc + half)


def predict_success(report: StageReport) -> Prediction:
    """The cross-validated success predictor of ``report``'s counted attempts."""
    names, rows, labels = features(report)
    sampled = len(labels) > MAX_FIT
    if sampled:
        import random

        keep = sorted(random.Random(0).sample(range(len(labels)), MAX_FIT))
        rows, labels = [rows[i] for i in keep], [labels[i] for i in keep]
    solved = sum(labels)
    failed = len(labels) - solved
    base = Prediction(status="not enough data", n=len(labels), solved=solved, failed=failed,
                      features=names, sampled=sampled)
    folds = min(FOLDS, solved, failed)
    if folds < 2:
        return base.model_copy(update={"reason": (
            f"{solved} solved and {failed} failed attempts: cross-validation needs at least 2 "
            "of each")})
    try:
        import numpy as np
        from sklearn.linear_model import LogisticRegression  # type: ignore[import-untyped]
        from sklearn.model_selection import (  # type: ignore[import-untyped]
            StratifiedKFold,
            cross_val_predict,
        )
        from sklearn.pipeline import make_pipeline  # type: ignore[import-untyped]
        from sklearn.preprocessing import StandardScaler  # type: ignore[import-untyped]
    except ImportError:
        return base.model_copy(update={"status": "unavailable", "reason": (
            "scikit-learn is not installed (pip install scikit-learn)")})
    from sharpen.stats.agreement import auroc

    x = np.asarray(rows, dtype=float)
    y = np.asarray(labels, dtype=int)
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=0)
    proba = cross_val_predict(model, x, y, cv=cv, method="predict_proba")[:, 1]
    right = int(((proba >= 0.5).astype(int) == y).sum())
    auc = auroc(proba.tolist(), labels)
    model.fit(x, y)
    coef = model[-1].coef_[0]
    return base.model_copy(update={
        "status": "ok", "folds": folds, "accuracy": right / len(labels),
        "accuracy_ci": wilson(right, len(labels)), "majority": max(solved, failed) / len(labels),
        "auroc": auc, "auroc_ci": hanley_mcneil(auc, solved, failed),
        "coefficients": {n: float(c) for n, c in zip(names, coef, strict=True)}})
