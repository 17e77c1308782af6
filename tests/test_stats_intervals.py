"""Intervals over tasks: agreement with statsmodels and coverage in simulation.

Every simulation draws Bernoulli tasks of known rates (1,000 repetitions, a seeded numpy
Generator) and checks that the nominal 95% interval covers the truth 93–97% of the time.
Task rates are drawn from a Beta distribution each repetition; the truth is that
distribution's mean (tasks are a sample from a population of tasks).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import beta as beta_fn
from stats_helpers import covered, make_table

from sharpen.stats.accuracy import accuracy, success_metric
from sharpen.stats.clustered import cluster_codes, clustered_interval, clustered_mean
from sharpen.stats.intervals import t_quantile, wilson, wilson_interval, z_quantile

REPS = 1000


@pytest.mark.parametrize(("x", "n"), [(0, 10), (1, 10), (5, 10), (10, 10), (3, 57), (0, 1), (120, 200)])
def test_wilson_agrees_with_statsmodels(x: int, n: int) -> None:
    from statsmodels.stats.proportion import proportion_confint

    lo, hi = proportion_confint(x, n, alpha=0.05, method="wilson")
    ours = wilson(x, n)
    assert (ours.low, ours.high) == pytest.approx((lo, hi), abs=1e-12)
    lo90, hi90 = proportion_confint(x, n, alpha=0.10, method="wilson")
    assert wilson(x, n, level=0.90).low == pytest.approx(lo90, abs=1e-12)
    assert wilson(x, n, level=0.90).high == pytest.approx(hi90, abs=1e-12)


def test_quantiles_agree_with_scipy() -> None:
    from scipy import stats

    assert z_quantile(0.975) == pytest.approx(stats.norm.ppf(0.975), abs=1e-12)
    for df in (1, 2, 5, 29, 1000):
        assert t_quantile(0.975, df) == pytest.approx(stats.t.ppf(0.975, df), rel=1e-10)


def test_clustered_se_agrees_with_statsmodels_cluster_robust_ols() -> None:
    import statsmodels.api as sm

    rng = np.random.default_rng(0)
    values = rng.random(40)
    groups = np.repeat(np.arange(10), 4)
    fit = sm.OLS(values, np.ones(40)).fit(cov_type="cluster", cov_kwds={"groups": groups})
    est = clustered_mean(values, groups)
    assert est.mean == pytest.approx(fit.params[0])
    assert est.se == pytest.approx(fit.bse[0], rel=1e-10)
    # One task per cluster: the usual standard error of the mean.
    single = clustered_mean(values)
    assert single.se == pytest.approx(values.std(ddof=1) / np.sqrt(40), rel=1e-10)


def test_wilson_coverage_one_trial_per_task() -> None:
    rng = np.random.default_rng(101)
    hits = 0
    for _ in range(REPS):
        rates = rng.beta(3, 7, 50)  # population mean 0.3
        y = (rng.random(50) < rates).astype(int)
        m = success_metric(make_table(np.ones(50, int), y))
        assert m.ci is not None and m.ci.method == "wilson"
        hits += covered(m.ci.low, m.ci.high, 0.3)
    assert 0.93 <= hits / REPS <= 0.97


@pytest.mark.parametrize(("a", "b", "tasks", "epochs"), [(1, 2, 60, 4), (0.3, 3, 60, 4), (2, 2, 30, 10)])
def test_clustered_coverage_with_epochs(a: float, b: float, tasks: int, epochs: int) -> None:
    """Epochs of one task are correlated (same rate): the interval must still cover."""
    rng = np.random.default_rng(202)
    truth = a / (a + b)
    hits = 0
    for _ in range(REPS):
        c = rng.binomial(epochs, rng.beta(a, b, tasks))
        m = success_metric(make_table(np.full(tasks, epochs), c))
        assert m.ci is not None and m.ci.method == "wilson-deff"
        hits += covered(m.ci.low, m.ci.high, truth)
    assert 0.93 <= hits / REPS <= 0.97


def test_treating_epochs_as_independent_would_undercover() -> None:
    """The reason for clustering: Wilson over all attempts pretends epochs are independent."""
    rng = np.random.default_rng(303)
    naive = clustered = 0
    for _ in range(REPS):
        c = rng.binomial(5, rng.beta(0.5, 0.5, 40))
        lo, hi = wilson_interval(int(c.sum()), 200)
        naive += covered(lo, hi, 0.5)
        m = success_metric(make_table(np.full(40, 5), c))
        clustered += covered(m.ci.low, m.ci.high, 0.5)
    assert naive / REPS < 0.85
    assert 0.93 <= clustered / REPS <= 0.97


def test_clustered_ses_widen_when_clusters_are_correlated() -> None:
    """Tasks of one cluster share most of their difficulty: SEs over clusters are wider than
    SEs over tasks, and only they keep 95% coverage."""
    rng = np.random.default_rng(404)
    by_cluster = by_task = 0
    ratios = []
    keys = [f"c{g}" for g in range(40) for _ in range(3)]
    codes = cluster_codes(keys)
    for _ in range(REPS):
        shared = np.repeat(rng.beta(2, 3, 40), 3)
        rates = 0.8 * shared + 0.2 * rng.beta(2, 3, 120)  # population mean 0.4
        c = rng.binomial(2, rates)
        est_c, est_t = clustered_mean(c / 2, codes), clustered_mean(c / 2)
        ratios.append(est_c.se / est_t.se)
        ci_c, ci_t = clustered_interval(est_c), clustered_interval(est_t)
        by_cluster += covered(ci_c.low, ci_c.high, 0.4)
        by_task += covered(ci_t.low, ci_t.high, 0.4)
    assert np.mean(ratios) > 1.1
    assert 0.93 <= by_cluster / REPS <= 0.97
    assert by_task / REPS < 0.93
    # The report picks the cluster key up from TaskSpec.metadata["cluster"].
    table = make_table(np.full(120, 2), c, clusters=keys)
    m = success_metric(table)
    assert m.ci is not None and m.ci.method == "wilson-deff"
    assert accuracy(table).n_clusters == 40 and accuracy(table).cluster_key == "cluster"


def test_pass_at_k_and_pass_hat_k_coverage() -> None:
    """pass@k (k = 2..5) and pass^2 over 60 tasks × 5 trials cover E[1−(1−p)^k] / E[p^k]."""
    rng = np.random.default_rng(505)
    a, b = 1.0, 2.0
    at = {k: 1 - beta_fn(a, b + k) / beta_fn(a, b) for k in range(2, 6)}
    hat = {2: beta_fn(a + 2, b) / beta_fn(a, b)}
    hits = dict.fromkeys([*(f"@{k}" for k in at), "^2"], 0)
    for _ in range(REPS):
        c = rng.binomial(5, rng.beta(a, b, 60))
        acc = accuracy(make_table(np.full(60, 5), c))
        for m in acc.pass_at_k[1:]:
            hits[f"@{m.k}"] += covered(m.ci.low, m.ci.high, at[m.k])
        m2 = acc.pass_hat_k[1]
        hits["^2"] += covered(m2.ci.low, m2.ci.high, hat[2])
    for name, h in hits.items():
        assert 0.93 <= h / REPS <= 0.97, (name, h / REPS)


def test_all_zero_runs_get_a_cluster_count_wilson_not_a_point() -> None:
    m = success_metric(make_table(np.full(20, 5), np.zeros(20, int)))
    assert m.value == 0.0 and m.ci is not None
    # 20 tasks (t quantile, 19 df), not 100 attempts
    assert m.ci.high == pytest.approx(wilson_interval(0, 20, t_quantile(0.975, 19))[1])


def test_undefined_pass_at_k_tasks_are_left_out_and_counted() -> None:
    acc = accuracy(make_table([1, 3, 3, 2], [1, 2, 0, 1]))
    assert acc.trials_max == 3 and acc.trials_min == 1
    p3 = acc.pass_at_k[2]
    assert p3.n_tasks == 2 and p3.n_undefined == 2
    assert p3.value == pytest.approx(0.5)  # task 2/3 successes → 1.0; 0/3 → 0.0
    p2 = acc.pass_at_k[1]
    assert p2.n_tasks == 3 and p2.n_undefined == 1


def test_unscored_tasks_are_excluded_and_counted() -> None:
    table = make_table([2, 0, 2], [1, 0, 2])
    acc = accuracy(table)
    assert acc.n_tasks == 2 and acc.n_unscored == 1
    assert acc.success.value == pytest.approx(0.75)
