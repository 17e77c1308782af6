"""Statistics over stored trajectories: evaluation you can trust.

One concept per module:

- :mod:`~sharpen.stats.intervals` — :class:`Interval`, Wilson, normal/t quantiles
- :mod:`~sharpen.stats.taskdata` — :class:`TaskTable`, a run reduced to one row per task
- :mod:`~sharpen.stats.passk` — pass@k and pass^k estimators
- :mod:`~sharpen.stats.clustered` — means of per-task values with cluster-robust SEs
- :mod:`~sharpen.stats.bootstrap` — the bootstrap over clusters
- :mod:`~sharpen.stats.accuracy` — mean success, pass@k, pass^k with intervals
- :mod:`~sharpen.stats.mcnemar` — McNemar's test, Newcombe's paired interval
- :mod:`~sharpen.stats.paired` — paired comparison of two runs, verdict in words
- :mod:`~sharpen.stats.multiple` — Holm's adjustment
- :mod:`~sharpen.stats.power` — tasks × epochs needed, smallest detectable effect
- :mod:`~sharpen.stats.cost` — cost per task / per success, Pareto frontier
- :mod:`~sharpen.stats.plot` — the frontier as PNG and SVG (matplotlib, optional)
- :mod:`~sharpen.stats.reliability` — consistency, robustness, calibration, safety
- :mod:`~sharpen.stats.validity` — null-agent ceiling, reference-agent floor
- :mod:`~sharpen.stats.irt` / :mod:`~sharpen.stats.irt_runs` — 1PL/2PL item response
  theory, and its fit over stored runs for report and compare
- :mod:`~sharpen.stats.estimate` — :class:`~sharpen.stats.estimate.Estimate`, a statistic
  with its interval
- :mod:`~sharpen.stats.itemboot` / :mod:`~sharpen.stats.weighted` — the bootstrap over items
  or clusters as weights, and κ, α, ρ, AUROC written as functions of weights
- :mod:`~sharpen.stats.agreement` — agreement of two raters (κ, α, ρ with BCa intervals)
- :mod:`~sharpen.stats.judge_validity` — a judge against the verifier: accuracy, κ, AUROC,
  flip rate, length bias, self-consistency
- :mod:`~sharpen.stats.judged` / :mod:`~sharpen.stats.judge_compare` — judge scores per
  criterion, and paired across runs
- :mod:`~sharpen.stats.report` / :mod:`~sharpen.stats.compare` — what the CLI prints

docs/evaluation.md defines every number.
"""

from sharpen.stats.intervals import Interval, wilson, wilson_interval
from sharpen.stats.passk import pass_at_k, pass_hat_k

__all__ = ["Interval", "pass_at_k", "pass_hat_k", "wilson", "wilson_interval"]
