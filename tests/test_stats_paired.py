"""Paired comparisons: McNemar and Holm against statsmodels/scipy, error rates under the
null in simulation, interval coverage, verdict wording, unmatched tasks."""

from __future__ import annotations

import numpy as np
import pytest
from stats_helpers import covered, make_table

from sharpen.stats.compare import compare_runs
from sharpen.stats.mcnemar import EXACT_BELOW, mcnemar, newcombe_interval
from sharpen.stats.multiple import holm
from sharpen.stats.paired import compare_pair
from sharpen.stats.rounding import interval_text

REPS = 1000


@pytest.mark.parametrize(("b", "c"), [(0, 0), (0, 5), (3, 9), (12, 12), (10, 14), (20, 5), (40, 61), (7, 30)])
def test_mcnemar_agrees_with_statsmodels(b: int, c: int) -> None:
    from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

    ours = mcnemar(b, c)
    exact = b + c < EXACT_BELOW
    ref = sm_mcnemar([[30, b], [c, 30]], exact=exact, correction=True)
    assert ours.method == ("exact-binomial" if exact else "chi2-continuity")
    assert ours.p_value == pytest.approx(float(ref.pvalue), rel=1e-9, abs=1e-15)
    if not exact:
        assert ours.statistic == pytest.approx(float(ref.statistic))


def test_exact_mcnemar_is_scipys_binomial_test() -> None:
    from scipy.stats import binomtest

    for b, c in [(1, 6), (2, 10), (0, 24), (11, 13)]:
        assert mcnemar(b, c).p_value == pytest.approx(binomtest(c, b + c, 0.5).pvalue, rel=1e-9)


def test_holm_agrees_with_statsmodels() -> None:
    from statsmodels.stats.multitest import multipletests

    ps = [0.01, 0.04, 0.03, 0.005, 0.5, 0.049]
    _, ref, _, _ = multipletests(ps, method="holm")
    assert holm(ps) == pytest.approx(list(ref))


def test_mcnemar_rejects_about_5_percent_under_the_null() -> None:
    rng = np.random.default_rng(11)
    rejected = 0
    for _ in range(REPS):
        rates = rng.beta(1, 1, 200)  # A and B equally good on every task
        ya = (rng.random(200) < rates).astype(int)
        yb = (rng.random(200) < rates).astype(int)
        cmp = compare_pair(make_table(np.ones(200, int), ya), make_table(np.ones(200, int), yb), rng)
        assert cmp.method in ("mcnemar-chi2", "mcnemar-exact")
        rejected += cmp.p_value < 0.05
    assert 0.03 <= rejected / REPS <= 0.07


@pytest.mark.parametrize(("tasks", "epochs"), [(60, 3), (30, 2)])
def test_paired_bootstrap_rejects_about_5_percent_under_the_null(tasks: int, epochs: int) -> None:
    rng = np.random.default_rng(12)
    rejected = covers = agree = 0
    n = np.full(tasks, epochs)
    for _ in range(REPS):
        rates = rng.beta(1, 1, tasks)
        a = make_table(n, rng.binomial(epochs, rates))
        b = make_table(n, rng.binomial(epochs, rates))
        cmp = compare_pair(a, b, rng, n_boot=1000)
        assert cmp.method == "paired-bootstrap" and cmp.ci is not None
        significant = cmp.p_value < 0.05
        excludes_zero = not covered(cmp.ci.low, cmp.ci.high, 0.0)
        rejected += significant
        covers += not excludes_zero
        agree += significant == excludes_zero
    assert 0.03 <= rejected / REPS <= 0.07
    assert 0.93 <= covers / REPS <= 0.97
    assert agree / REPS >= 0.99  # the p-value inverts the interval


def test_newcombe_interval_covers_the_true_paired_difference() -> None:
    """B is 10 points better on every task (below 0.9); one trial each."""
    rng = np.random.default_rng(13)
    truth = 0.095  # E[min(p + 0.1, 1) − p] for p ~ U(0, 1): 0.1 − ∫_0.9^1 (p − 0.9) dp
    hits = 0
    for _ in range(REPS):
        p = rng.random(100)
        ya = (rng.random(100) < p).astype(int)
        yb = (rng.random(100) < np.minimum(p + 0.1, 1)).astype(int)
        cmp = compare_pair(make_table(np.ones(100, int), ya), make_table(np.ones(100, int), yb), rng)
        hits += covered(cmp.ci.low, cmp.ci.high, truth)
    assert 0.93 <= hits / REPS <= 0.97


def test_newcombe_handles_the_edges() -> None:
    lo, hi = newcombe_interval(0, 0, 0, 50)  # nobody succeeds: difference 0
    assert lo < 0 < hi
    lo, hi = newcombe_interval(0, 20, 0, 0)  # first always, second never
    assert 0.7 < lo <= hi == 1.0


def test_verdict_better_and_worse_in_words() -> None:
    rng = np.random.default_rng(0)
    a = make_table(np.ones(100, int), np.r_[np.ones(30, int), np.zeros(70, int)])
    b = make_table(np.ones(100, int), np.r_[np.ones(55, int), np.zeros(45, int)])
    better = compare_pair(a, b, rng)
    assert better.direction == "better" and better.significant
    assert better.verdict.startswith("B is better by 25.0 points, 95% CI [")
    assert better.verdict.endswith("p < 0.001")
    worse = compare_pair(b, a, rng)
    assert worse.direction == "worse"
    assert worse.verdict.startswith("B is worse by 25.0 points, 95% CI [")
    lo, hi = worse.verdict.split("[")[1].split("]")[0].split(", ")
    assert 0 < float(lo) < 25 < float(hi)  # the interval of A − B, in points


def test_p_value_format_in_the_verdict() -> None:
    rng = np.random.default_rng(0)
    # 2 vs 12 discordant pairs: exact McNemar p = 0.0129
    ca = np.r_[np.ones(2, int), np.zeros(12, int), np.ones(20, int), np.zeros(66, int)]
    cb = np.r_[np.zeros(2, int), np.ones(12, int), np.ones(20, int), np.zeros(66, int)]
    cmp = compare_pair(make_table(np.ones(100, int), ca), make_table(np.ones(100, int), cb), rng)
    assert cmp.method == "mcnemar-exact" and cmp.discordant == (2, 12)
    assert cmp.verdict.startswith("B is better by 10.0 points, 95% CI [")
    assert cmp.verdict.endswith(f"p = {cmp.p_value:.3f}") and cmp.verdict.endswith("p = 0.013")


def test_no_detectable_difference_names_the_smallest_detectable_effect() -> None:
    rng = np.random.default_rng(0)
    y = np.r_[np.ones(5, int), np.zeros(15, int)]
    cmp = compare_pair(make_table(np.ones(20, int), y), make_table(np.ones(20, int), y), rng)
    assert not cmp.significant and cmp.direction == "none"
    # identical runs: the SE is floored at one discordant task out of 20 → 2.8/20 = 14 points
    assert cmp.verdict == ("no detectable difference; with these tasks the smallest detectable "
                           "effect is 14 points")


def test_a_verdict_that_follows_the_test_says_when_the_interval_excludes_zero() -> None:
    """5 tasks fixed, none broken, of 50: the exact McNemar p is 2/32 = 0.0625, while
    Newcombe's interval excludes 0 — the words must not hide the table's interval."""
    rng = np.random.default_rng(0)
    a = np.r_[np.ones(13, int), np.zeros(37, int)]
    b = np.r_[np.ones(18, int), np.zeros(32, int)]
    cmp = compare_pair(make_table(np.ones(50, int), a), make_table(np.ones(50, int), b), rng)
    assert cmp.method == "mcnemar-exact" and cmp.discordant == (0, 5)
    assert not cmp.significant and cmp.p_value == pytest.approx(0.0625) and cmp.ci.low > 0
    assert cmp.verdict.startswith("no detectable difference; with these tasks the smallest")
    # p = 0.0625 prints 0.063 (rounded up, never 0.062), the interval outward
    assert cmp.verdict.endswith(f"the 95% CI {interval_text(cmp.ci.low, cmp.ci.high)} of B − A "
                                "excludes 0 but the test does not (p = 0.063, α = 0.05): at this "
                                "margin the verdict follows the test")
    # An interval that spans 0 adds nothing to the words.
    c = np.r_[np.ones(15, int), np.zeros(35, int)]
    cmp = compare_pair(make_table(np.ones(50, int), a), make_table(np.ones(50, int), c), rng)
    assert cmp.ci.low < 0 and "excludes 0" not in cmp.verdict


def test_unmatched_and_unscored_tasks_are_reported_not_compared() -> None:
    rng = np.random.default_rng(0)
    a = make_table([1, 1, 1, 0], [1, 0, 1, 0])
    b = make_table([1, 1, 1, 1, 1], [1, 1, 1, 1, 0])
    cmp = compare_pair(a, b, rng)
    assert cmp.matched_tasks == 3
    assert cmp.only_a == [] and cmp.only_b == ["t/3", "t/4"]  # t/3 is unscored in A


def test_compare_runs_applies_holm_and_flags_worse() -> None:
    from datetime import UTC, datetime

    from sharpen.core.agent_spec import AgentSpec
    from sharpen.core.manifest import RunManifest
    from sharpen.core.registry import PluginRef
    from sharpen.store import RunRecord

    def rec(rid: str) -> RunRecord:
        spec = AgentSpec(name=rid)
        m = RunManifest(run_id=rid, env=PluginRef(name="code"), agent_hash=spec.hash(),
                        task_ids=[], epochs=1, seed=0, config_hash="x")
        return RunRecord(manifest=m, agent=spec, status="finished", created_at=datetime.now(UTC))

    ones = np.ones(100, int)
    base = make_table(ones, np.r_[np.ones(50, int), np.zeros(50, int)], run_id="a")
    worse = make_table(ones, np.r_[np.ones(30, int), np.zeros(70, int)], run_id="b")
    same = make_table(ones, np.r_[np.ones(49, int), np.zeros(51, int)], run_id="c")
    rep = compare_runs([rec("a"), rec("b"), rec("c")], [base, worse, same])
    assert rep.holm and [c.label_b for c in rep.comparisons] == ["B", "C"]
    b, c = rep.comparisons
    assert holm([b.p_value, c.p_value]) == pytest.approx([b.p_adjusted, c.p_adjusted])
    assert b.direction == "worse" and "(Holm-adjusted)" in b.verdict
    assert c.direction == "none" and rep.any_worse


def test_one_cluster_is_no_evidence() -> None:
    rng = np.random.default_rng(0)
    a = make_table([3, 3], [0, 0], clusters=["x", "x"])
    b = make_table([3, 3], [3, 3], clusters=["x", "x"])
    cmp = compare_pair(a, b, rng)
    assert cmp.n_clusters == 1 and cmp.p_value == 1.0 and not cmp.significant
    assert cmp.ci is not None and cmp.ci.method == "none"


def test_bootstrap_p_value_at_its_resolution_is_an_upper_bound() -> None:
    rng = np.random.default_rng(0)
    n = np.full(200, 3)
    a = make_table(n, np.zeros(200, int))
    b = make_table(n, np.full(200, 2))
    cmp = compare_pair(a, b, rng, n_boot=500)
    assert cmp.method == "paired-bootstrap" and cmp.p_upper_bound
    assert cmp.verdict.startswith("B is better by 66.7 points")
    assert f"p ≤ {cmp.p_value:.3f}" in cmp.verdict or "p < 0.001" in cmp.verdict
