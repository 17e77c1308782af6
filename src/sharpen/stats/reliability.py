"""The reliability profile of a run: consistency, robustness, predictability, safety.

Each metric is defined in docs/evaluation.md ("Reliability"); here in short:

- **consistency** — over tasks with at least two valid trials: the share whose trials all
  agree (all succeed or all fail), the mean per-task variance of success (unbiased,
  ``c(n−c)/(n(n−1))``) and the intra-task correlation (ICC) of :mod:`sharpen.stats.power`.
  Not available with one epoch.
- **robustness** — only under perturbations the environment *declares*: a task whose
  ``TaskSpec.metadata["perturbation"]`` names one (``"paraphrase"``, ``"tool_order"``,
  ``"tool_failure"``, ...) is a perturbed variant; ``metadata["base_task"]`` may name the
  original's task id. Per perturbation: success on the variants, success on their originals
  (paired by ``base_task`` where given, else all unperturbed tasks) and the drop in points.
  Without declared perturbations: "not declared" — sharpen never invents them.
- **predictability** — calibration of the agent's stated confidence, where outcomes carry
  ``Outcome.components["confidence"]`` in [0, 1]: expected calibration error (10 equal-width
  bins, weighted by bin size) and Brier score over valid trials. Otherwise "not available".
- **safety** — the share of attempts that received at least one feedback record with source
  ``safety``, and the number of such records.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel

from sharpen.stats.power import icc_estimate
from sharpen.stats.taskdata import TaskTable
from sharpen.store.aggregate import CalibrationBin


class Consistency(BaseModel):
    """Agreement of a task's epochs with each other."""

    available: bool
    """Whether any task has two or more valid trials."""
    tasks: int
    """Tasks with two or more valid trials."""
    all_agree: float | None
    """Share of those tasks whose valid trials all agree."""
    mean_task_variance: float | None
    """Mean unbiased per-task variance of success, ``c(n−c)/(n(n−1))`` (0 = deterministic)."""
    icc: float | None
    """Intra-task correlation: share of outcome variance that is between tasks (estimated,
    however small the run; ``None`` when nothing varies)."""


class PerturbationResult(BaseModel):
    """Success under one declared perturbation."""

    name: str
    """Perturbation name from ``metadata["perturbation"]``."""
    tasks: int
    """Perturbed tasks scored."""
    rate: float
    """Mean success on them."""
    base_rate: float | None
    """Mean success on their originals (``None`` if none were run)."""
    drop: float | None
    """``base_rate − rate`` (positive = worse under perturbation)."""
    paired: bool
    """Whether originals were matched one to one through ``metadata["base_task"]``."""


class Robustness(BaseModel):
    """Success under declared perturbations."""

    declared: bool
    """Whether any task declares a perturbation."""
    perturbations: list[PerturbationResult]
    """One entry per declared perturbation name."""


class Calibration(BaseModel):
    """How well stated confidence predicts success."""

    available: bool
    """Whether any valid trial stated a confidence."""
    n: int
    """Valid trials with a stated confidence."""
    ece: float | None
    """Expected calibration error (0 = perfectly calibrated)."""
    brier: float | None
    """Mean squared error of confidence against success (0 best; 0.25 = always 50%)."""
    mean_confidence: float | None
    """Mean stated confidence."""
    accuracy: float | None
    """Success rate of those trials."""


class Safety(BaseModel):
    """Safety feedback received."""

    attempts: int
    """Attempts in the run."""
    flagged: int
    """Attempts with at least one ``safety`` feedback record."""
    records: int
    """``safety`` feedback records."""
    rate: float | None
    """``flagged / attempts``."""


class Reliability(BaseModel):
    """The four reliability views of one run."""

    consistency: Consistency
    """Agreement across epochs."""
    robustness: Robustness
    """Success under declared perturbations."""
    calibration: Calibration
    """Predictability: calibration of stated confidence."""
    safety: Safety
    """Safety feedback received."""


def consistency(table: TaskTable) -> Consistency:
    """:class:`Consistency` over tasks with two or more valid trials."""
    multi = table.n >= 2
    k = int(multi.sum())
    if k == 0:
        return Consistency(available=False, tasks=0, all_agree=None, mean_task_variance=None, icc=None)
    n, c = table.n[multi], table.c[multi]
    agree = (c == 0) | (c == n)
    var = c * (n - c) / (n * (n - 1))
    valid = table.valid
    return Consistency(available=True, tasks=k, all_agree=float(agree.mean()),
                       mean_task_variance=float(var.mean()),
                       icc=icc_estimate(table.n[valid], table.c[valid]))


def robustness(table: TaskTable) -> Robustness:
    """:class:`Robustness` under the perturbations tasks declare."""
    kinds = table.perturbations()
    valid = table.valid
    rates = table.rates
    if not any(k is not None for k in kinds):
        return Robustness(declared=False, perturbations=[])
    by_id = {tid: i for i, tid in enumerate(table.task_id) if kinds[i] is None and valid[i]}
    base_mask = np.array([k is None for k in kinds]) & valid
    results = []
    for name in sorted({k for k in kinds if k is not None}):
        idx = [i for i, k in enumerate(kinds) if k == name and valid[i]]
        if not idx:
            continue
        pairs = [(i, by_id.get(str(table.metadata[i].get("base_task")))) for i in idx]
        paired = all(j is not None for _, j in pairs)
        rate = float(np.mean(rates[idx]))
        base: float | None
        if paired:
            base = float(np.mean([rates[j] for _, j in pairs]))
        else:
            base = float(rates[base_mask].mean()) if base_mask.any() else None
        results.append(PerturbationResult(name=name, tasks=len(idx), rate=rate, base_rate=base,
                                          drop=None if base is None else base - rate, paired=paired))
    return Robustness(declared=True, perturbations=results)


def calibration(bins: list[CalibrationBin]) -> Calibration:
    """:class:`Calibration` from the calibration bins of a run: ECE
    ``Σ_b (n_b/N)·|success_b − confidence_b|`` over the non-empty bins, Brier
    ``Σ (p − y)² / N``."""
    total = sum(b.n for b in bins)
    if total == 0:
        return Calibration(available=False, n=0, ece=None, brier=None, mean_confidence=None,
                           accuracy=None)
    ece = sum(abs(b.successes - b.confidence_sum) / total for b in bins if b.n)
    return Calibration(
        available=True, n=total, ece=float(ece),
        brier=float(sum(b.squared_error_sum for b in bins) / total),
        mean_confidence=float(sum(b.confidence_sum for b in bins) / total),
        accuracy=float(sum(b.successes for b in bins) / total),
    )


def reliability(table: TaskTable) -> Reliability:
    """The full :class:`Reliability` profile of ``table``."""
    attempts = int(table.attempts.sum())
    return Reliability(
        consistency=consistency(table),
        robustness=robustness(table),
        calibration=calibration(table.calibration),
        safety=Safety(attempts=attempts, flagged=table.safety_trajectories,
                      records=table.safety_records,
                      rate=table.safety_trajectories / attempts if attempts else None),
    )
