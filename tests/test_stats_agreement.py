"""Agreement statistics (sharpen.stats.agreement): equality with sklearn, krippendorff and
scipy to 1e-9 on seeded synthetic data, Krippendorff's textbook example, degenerate cases,
the judge checks, and (slow) the coverage of the BCa intervals in simulation — the same
settings benchmarks/agreement_coverage.py runs and writes to
benchmarks/results/agreement_coverage.md."""

from __future__ import annotations

import importlib.util
import math
import sys
import warnings
from pathlib import Path
from types import ModuleType

import krippendorff
import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.metrics import cohen_kappa_score, confusion_matrix, roc_auc_score

from sharpen.stats.agreement import (
    accuracy,
    agreement,
    auroc,
    cohen_kappa,
    flip_rate,
    krippendorff_alpha,
    length_bias,
    self_consistency,
    spearman,
    verifier_validity,
)
from sharpen.stats.intervals import wilson
from sharpen.stats.itemboot import bootstrap, point
from sharpen.stats.weighted import alpha_stat, auroc_stat, kappa_stat, spearman_stat

ROOT = Path(__file__).resolve().parents[1]
LEVELS = ("nominal", "ordinal", "interval", "ratio")
NAN = float("nan")

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 observers
# × 12 units, values 1–5, missing data. The paper gives α = 0.743 (nominal), 0.815
# (ordinal), 0.849 (interval), 0.797 (ratio).
TEXTBOOK = [[1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
            [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
            [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
            [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN]]


def _raters(rng: np.random.Generator, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Two raters who agree more than chance on ``k`` labels."""
    a = rng.integers(0, k, n)
    return a, np.where(rng.random(n) < 0.6, a, rng.integers(0, k, n))


@pytest.mark.parametrize("n", [6, 41, 500])
@pytest.mark.parametrize("k", [2, 3, 5])
@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_cohen_kappa_equals_sklearn(n: int, k: int, weights: str | None) -> None:
    rng = np.random.default_rng(1000 * n + k)
    a, b = _raters(rng, n, k)
    labels = list(range(k))
    assert cohen_kappa(list(a), list(b), weights=weights, labels=labels) == pytest.approx(
        cohen_kappa_score(a, b, weights=weights, labels=labels), abs=1e-9)
    names = [f"grade-{v}" for v in range(k)]
    sa, sb = [names[v] for v in a], [names[v] for v in b]
    assert cohen_kappa(sa, sb, weights=weights) == pytest.approx(
        cohen_kappa_score(sa, sb, weights=weights), abs=1e-9)
    # The item-weighted form the bootstrap uses equals sklearn's sample_weight.
    w = rng.random(n) * 3
    got = kappa_stat(a, b, k, weights)(w[None, :])[0]
    assert got == pytest.approx(cohen_kappa_score(a, b, weights=weights, labels=labels, sample_weight=w),
                                abs=1e-9)


def test_cohen_kappa_degenerate_cases() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = cohen_kappa_score([1, 1, 1], [1, 1, 1])
    # One label throughout from both raters: κ is 0/0; nan, as sklearn.
    assert math.isnan(reference) and math.isnan(cohen_kappa([1, 1, 1], [1, 1, 1]))
    # One rater constant, the other not: no agreement beyond chance, 0 (as sklearn).
    assert cohen_kappa([1, 1, 1, 1], [1, 2, 1, 2]) == cohen_kappa_score([1, 1, 1, 1], [1, 2, 1, 2]) == 0.0
    assert cohen_kappa(["x", "y"], ["x", "y"]) == 1.0
    assert cohen_kappa([0, 1], [1, 0]) == pytest.approx(-1.0)
    # An unused label in labels changes nothing unweighted, but moves weighted distances.
    assert cohen_kappa([1, 3], [1, 3], labels=[1, 2, 3], weights="linear") == 1.0
    with pytest.raises(ValueError, match="not in labels"):
        cohen_kappa([1, 4], [1, 1], labels=[1, 2, 3])
    with pytest.raises(ValueError):
        cohen_kappa([1], [1, 2])


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("raters", "n"), [(2, 8), (3, 60), (5, 300)])
def test_krippendorff_alpha_equals_package(level: str, raters: int, n: int) -> None:
    rng = np.random.default_rng(raters * n)
    truth = rng.integers(1, 6, n)
    r = np.where(rng.random((raters, n)) < 0.7, truth, rng.integers(1, 6, (raters, n))).astype(float)
    r[rng.random(r.shape) < 0.15] = np.nan
    ref = krippendorff.alpha(reliability_data=r, level_of_measurement=level)
    assert krippendorff_alpha(r, level) == pytest.approx(ref, abs=1e-9)
    assert point(alpha_stat(r, level), n)[0] == pytest.approx(ref, abs=1e-9)
    # Integer item weights are duplicated units.
    w = rng.integers(0, 3, n)
    dup = np.repeat(np.arange(n), w)
    domain = np.unique(r[~np.isnan(r)])
    ref_w = krippendorff.alpha(reliability_data=r[:, dup], level_of_measurement=level, value_domain=domain)
    got = alpha_stat(r, level)(w[None, :].astype(float))[0]
    assert got == pytest.approx(ref_w, abs=1e-9)


def test_krippendorff_alpha_textbook_example() -> None:
    got = {lv: krippendorff_alpha(TEXTBOOK, lv) for lv in LEVELS}
    assert {lv: round(v, 3) for lv, v in got.items()} == {
        "nominal": 0.743, "ordinal": 0.815, "interval": 0.849, "ratio": 0.797}
    # What the package gives, pinned (nominal is 113/152 exactly).
    assert got["nominal"] == pytest.approx(0.743421052631579, abs=1e-12)
    assert got["ordinal"] == pytest.approx(0.8153875037548814, abs=1e-12)
    assert got["interval"] == pytest.approx(0.8491071428571428, abs=1e-12)
    assert got["ratio"] == pytest.approx(0.7974027747116121, abs=1e-12)
    for lv in LEVELS:
        assert point(alpha_stat(np.array(TEXTBOOK), lv), 12)[0] == pytest.approx(got[lv], abs=1e-12)


def test_krippendorff_alpha_degenerate_cases() -> None:
    assert math.isnan(krippendorff_alpha([[1, 1, 1], [1, 1, 1]]))  # one value: the package raises
    assert math.isnan(krippendorff_alpha([[1, 2, NAN], [NAN, NAN, 3]]))  # no unit rated twice
    assert krippendorff_alpha([[1, 2, 3], [1, 2, 3]], "interval") == 1.0


@pytest.mark.parametrize("n", [5, 50, 400])
def test_spearman_and_auroc_equal_scipy_and_sklearn(n: int) -> None:
    rng = np.random.default_rng(n)
    grade = rng.integers(0, 4, n)  # heavy ties
    score = np.round(grade + rng.normal(size=n), 1)
    assert spearman(list(grade), list(score)) == pytest.approx(spearmanr(grade, score).statistic, abs=1e-9)
    assert point(spearman_stat(grade, score), n)[0] == pytest.approx(spearmanr(grade, score).statistic,
                                                                      abs=1e-9)
    y = grade >= 2
    if 0 < y.sum() < n:
        assert auroc(list(score), list(y)) == pytest.approx(roc_auc_score(y, score), abs=1e-9)
        w = rng.random(n)
        assert auroc_stat(score, y)(w[None, :])[0] == pytest.approx(
            roc_auc_score(y, score, sample_weight=w), abs=1e-9)
    w = rng.integers(0, 3, n)
    dup = np.repeat(np.arange(n), w)
    assert spearman_stat(grade, score)(w[None, :].astype(float))[0] == pytest.approx(
        spearmanr(grade[dup], score[dup]).statistic, abs=1e-9)


def test_point_statistics_degenerate_cases() -> None:
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))
    assert math.isnan(point(spearman_stat(np.ones(4), np.arange(4.0)), 4)[0])
    assert math.isnan(auroc([0.1, 0.2], [True, True]))  # one class only
    assert auroc([0.5, 0.5, 0.5], [True, False, False]) == 0.5  # all tied: chance
    assert accuracy(["a", "b", "b"], ["a", "b", "a"]) == pytest.approx(2 / 3)
    assert math.isnan(accuracy([], []))


def test_agreement_matches_the_point_statistics_and_drops_missing() -> None:
    rng = np.random.default_rng(7)
    a, b = _raters(rng, 90, 5)
    la: list[int | None] = [int(x) + 1 for x in a]
    lb: list[int | None] = [int(x) + 1 for x in b]
    la[0], lb[5] = None, None
    r = agreement(la, lb, scale="ordinal", n_boot=500, seed=3)
    ka = [x for x, y in zip(la, lb, strict=True) if x is not None and y is not None]
    kb = [y for x, y in zip(la, lb, strict=True) if x is not None and y is not None]
    assert r.n == 88 and r.kappa.n == 88 and r.kappa_weights == "quadratic"
    assert r.labels == [1, 2, 3, 4, 5]
    assert r.confusion == confusion_matrix(ka, kb, labels=[1, 2, 3, 4, 5]).tolist()
    assert r.kappa.value == pytest.approx(cohen_kappa_score(ka, kb, weights="quadratic"), abs=1e-9)
    assert r.alpha.value == pytest.approx(
        krippendorff.alpha(reliability_data=[ka, kb], level_of_measurement="ordinal"), abs=1e-9)
    assert r.spearman is not None
    assert r.spearman.value == pytest.approx(spearmanr(ka, kb).statistic, abs=1e-9)
    assert r.raw_agreement.value == pytest.approx(np.mean(np.array(ka) == np.array(kb)))
    for e in (r.kappa, r.alpha, r.spearman, r.raw_agreement):
        assert e.method == "bootstrap-bca" and e.low is not None and e.high is not None
        assert e.low <= e.value <= e.high
    assert agreement(la, lb, scale="ordinal", n_boot=500, seed=3) == r  # seeded: deterministic
    nominal = agreement(la, lb, n_boot=200)
    assert nominal.spearman is None and nominal.kappa_weights is None
    assert nominal.kappa.value == pytest.approx(cohen_kappa_score(ka, kb), abs=1e-9)
    # Interval α uses the values themselves, not their positions.
    vals = {1: 0.0, 2: 1.0, 3: 2.0, 4: 10.0, 5: 11.0}
    iv = agreement([vals[x] for x in ka], [vals[y] for y in kb], scale="interval", n_boot=200)
    assert iv.alpha.value == pytest.approx(krippendorff.alpha(
        reliability_data=[[vals[x] for x in ka], [vals[y] for y in kb]],
        level_of_measurement="interval"), abs=1e-9)


def test_clusters_widen_the_interval_when_items_of_a_cluster_are_alike() -> None:
    rng = np.random.default_rng(11)
    # 30 tasks × 5 trajectories; the two raters' (dis)agreement is a property of the task.
    good = np.repeat(rng.random(30) < 0.6, 5)
    a = rng.integers(0, 3, 150)
    b = np.where(good, a, rng.integers(0, 3, 150))
    tasks = [f"t{i // 5}" for i in range(150)]
    flat = agreement(list(a), list(b), n_boot=1000)
    by_task = agreement(list(a), list(b), n_boot=1000, clusters=tasks)
    assert by_task.n_clusters == 30 and flat.n_clusters == 150
    assert by_task.kappa.value == flat.kappa.value
    width = (by_task.kappa.high - by_task.kappa.low) / (flat.kappa.high - flat.kappa.low)
    assert width > 1.5


def test_one_cluster_or_one_label_gives_no_interval() -> None:
    r = agreement([1, 2, 1], [1, 2, 2], clusters=["t", "t", "t"], n_boot=100)
    assert r.kappa.method == "none" and r.kappa.low is None and r.kappa.value is not None
    same = agreement(["x"] * 5, ["x"] * 5, n_boot=100)
    assert same.kappa.value is None and same.alpha.value is None and same.raw_agreement.value == 1.0
    assert same.kappa.text() == "undefined"
    one = bootstrap(kappa_stat(np.array([0, 1]), np.array([0, 1]), 2), 2, clusters=np.zeros(2))
    assert one.n_clusters == 1 and np.isnan(one.low).all()


def test_verifier_validity_labels_and_scores() -> None:
    rng = np.random.default_rng(5)
    n = 150
    y = rng.random(n) < 0.4
    score = np.round(y + rng.normal(size=n), 1)
    labels = [bool(s >= 0.5) for s in score]
    v = verifier_validity(labels, list(y), n_boot=500)
    assert v.n == n and v.auroc is None and v.threshold is None
    assert v.base_rate == pytest.approx(y.mean())
    assert v.kappa is not None and v.accuracy is not None
    assert v.kappa.value == pytest.approx(cohen_kappa_score(labels, y), abs=1e-9)
    hits = int(np.sum(np.array(labels) == y))
    ref = wilson(hits, n)
    assert (v.accuracy.value, v.accuracy.low, v.accuracy.high) == pytest.approx((hits / n, ref.low, ref.high))
    s = verifier_validity([float(x) for x in score], list(y), threshold=0.5, n_boot=500)
    assert s.auroc is not None and s.auroc.value == pytest.approx(roc_auc_score(y, score), abs=1e-9)
    assert s.kappa == v.kappa.model_copy(update={"low": s.kappa.low, "high": s.kappa.high})
    assert s.accuracy == v.accuracy
    assert s.auroc.low is not None and s.auroc.low > 0.5
    no_threshold = verifier_validity([float(x) for x in score], list(y), n_boot=200)
    assert no_threshold.accuracy is None and no_threshold.kappa is None and no_threshold.auroc is not None
    missing = verifier_validity([True, None, False, True], [True, True, None, False], n_boot=100)
    assert missing.n == 2
    clustered = verifier_validity(labels, list(y), n_boot=300, clusters=[i // 3 for i in range(n)])
    assert clustered.n_clusters == 50 and clustered.accuracy is not None
    assert clustered.accuracy.method == "wilson-deff"


def test_flip_rate_and_position_bias() -> None:
    first = ["A", "A", "B", "tie", "A", None, "B"]
    second = ["A", "B", "B", "A", "B", "A", "A"]
    r = flip_rate(first, second)
    assert r.n == 6 and r.flips == 4
    ref = wilson(4, 6)
    assert (r.rate.value, r.rate.low, r.rate.high) == (4 / 6, ref.low, ref.high)
    # Shown first: A in the first order (5 decisive A/B picks, 3 of them A), B in the
    # second (6 decisive, 3 of them B): 6 of 11.
    assert r.first_shown == pytest.approx(6 / 11)
    assert flip_rate(["tie"], ["tie"]).first_shown is None
    consistent = flip_rate(["A", "B"] * 10, ["A", "B"] * 10)
    assert consistent.rate.value == 0.0 and consistent.first_shown == 0.5


def test_length_bias_separates_length_from_correctness() -> None:
    rng = np.random.default_rng(9)
    n = 400
    length = rng.integers(50, 2000, n).astype(float)
    passed = rng.random(n) < length / 2000  # longer trajectories pass more often
    fair = passed + rng.normal(0, 0.5, n)  # a judge that sees only correctness
    r = length_bias(list(fair), list(length), list(passed), n_boot=1000)
    assert r.overall.low is not None and r.overall.low > 0  # the mixed ρ shows a "bias"...
    assert r.within.low is not None and r.within.low < 0 < r.within.high
    s_pass = spearmanr(fair[passed], length[passed]).statistic
    s_fail = spearmanr(fair[~passed], length[~passed]).statistic
    k = int(passed.sum())
    assert r.passed.value == pytest.approx(s_pass, abs=1e-9) and r.passed.n == k
    assert r.failed.value == pytest.approx(s_fail, abs=1e-9) and r.failed.n == n - k
    assert r.within.value == pytest.approx((k * s_pass + (n - k) * s_fail) / n, abs=1e-9)
    biased = fair + length / 1000  # prefers long trajectories among equally correct ones
    rb = length_bias(list(biased), list(length), list(passed), n_boot=1000)
    assert rb.within.low is not None and rb.within.low > 0.3


def test_self_consistency() -> None:
    rng = np.random.default_rng(4)
    truth = rng.integers(0, 3, 80)
    samples = np.where(rng.random((80, 5)) < 0.7, truth[:, None], rng.integers(0, 3, (80, 5)))
    rows: list[list[int | None]] = [[int(v) for v in r] for r in samples]
    rows[0] = [1, None, None, None, None]  # one sample: left out
    rows[1][2] = None
    r = self_consistency(rows, n_boot=500)
    ratings = np.array([[NAN if v is None else v for v in row] for row in rows[1:]], dtype=float).T
    assert r.n == 79 and r.repeats == 5
    assert r.alpha.value == pytest.approx(
        krippendorff.alpha(reliability_data=ratings, level_of_measurement="nominal"), abs=1e-9)

    def share(row: list[int | None]) -> float:
        vals = [v for v in row if v is not None]
        same = sum(vals[i] == vals[j] for i in range(len(vals)) for j in range(len(vals)) if i != j)
        return same / (len(vals) * (len(vals) - 1))

    assert r.pairwise_agreement.value == pytest.approx(np.mean([share(x) for x in rows[1:]]))
    assert r.alpha.low < r.alpha.value < r.alpha.high
    always = self_consistency([[x, x, x] for x in truth], n_boot=200)
    assert always.alpha.value == 1.0 and always.pairwise_agreement.value == 1.0
    graded = self_consistency([[1.0, 1.5, 2.0], [4.0, 4.5, 4.0], [9.0, 8.0, 9.5]], scale="interval",
                              n_boot=200)
    assert graded.alpha.value == pytest.approx(krippendorff.alpha(
        reliability_data=[[1.0, 4.0, 9.0], [1.5, 4.5, 8.0], [2.0, 4.0, 9.5]],
        level_of_measurement="interval"), abs=1e-9)


def _coverage_module() -> ModuleType:
    path = ROOT / "benchmarks" / "agreement_coverage.py"
    spec = importlib.util.spec_from_file_location("agreement_coverage", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_bca_coverage_in_simulation() -> None:
    """1,000 datasets of 100 items per setting, 2,000 replicates each (the benchmark's
    defaults and seed): every BCa interval of κ, α and AUROC covers the population value
    93–97% of the time. Spearman's ρ of tied grades is checked for not under-covering only:
    its interval is conservative there (97.1%, benchmarks/results/agreement_coverage.md)."""
    mod = _coverage_module()
    for setting in mod.SETTINGS:
        cov = mod.coverage(setting, sims=1000, n=100, n_boot=2000, seed=20)["bca"]
        if setting.name == "spearman":
            assert cov >= 0.93, (setting.name, cov)
        else:
            assert 0.93 <= cov <= 0.97, (setting.name, cov)


def _kappa_of_samples(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """Unweighted κ of 3-label codes along the last axis (for scipy's vectorised bootstrap)."""
    onehot = ((x * 3 + y)[..., None] == np.arange(9)).sum(axis=-2).astype(float)
    conf = onehot.reshape(*onehot.shape[:-1], 3, 3)
    n = conf.sum(axis=(-1, -2))
    po = np.trace(conf, axis1=-2, axis2=-1) / n
    pe = (conf.sum(-1) * conf.sum(-2)).sum(-1) / n**2
    return np.asarray((po - pe) / (1 - pe))


def test_item_bootstrap_agrees_with_scipy() -> None:
    """Item weights are resampled items: with many replicates our BCa (delete-one jackknife)
    and percentile intervals of κ match scipy.stats.bootstrap's up to Monte Carlo error — on
    data (κ near its bound of 1) where BCa and percentile differ by more than that."""
    from scipy.stats import bootstrap as scipy_bootstrap

    rng = np.random.default_rng(3)
    a = rng.integers(0, 3, 60)
    b = np.where(rng.random(60) < 0.93, a, rng.integers(0, 3, 60))
    lows = {}
    for method, name in (("bca", "BCa"), ("percentile", "percentile")):
        ref = scipy_bootstrap((a, b), _kappa_of_samples, paired=True, vectorized=True,
                              n_resamples=20000, method=name, random_state=1)
        ours = bootstrap(kappa_stat(a, b, 3), 60, n_boot=20000, seed=1, method=method)
        assert ours.value[0] == pytest.approx(float(_kappa_of_samples(a, b)), abs=1e-12)
        assert ours.low[0] == pytest.approx(ref.confidence_interval.low, abs=0.006)
        assert ours.high[0] == pytest.approx(ref.confidence_interval.high, abs=0.006)
        lows[method] = ours.low[0]
    assert lows["percentile"] - lows["bca"] > 0.015


def test_block_jackknife_above_the_cap_matches_the_full_jackknife(monkeypatch: pytest.MonkeyPatch) -> None:
    """Above JACKKNIFE_BLOCKS clusters the BCa acceleration comes from blocks of clusters;
    on 3,000 items it gives the interval the delete-one jackknife gives (at this size the
    acceleration itself moves the ends by well under 1e-3, so this guards the blocked path
    against breaking, not the value of the acceleration)."""
    import sharpen.stats.itemboot as itemboot

    rng = np.random.default_rng(8)
    y = rng.random(3000) < 0.3
    stat = auroc_stat(np.round(2 * y + rng.normal(size=3000), 1), y)
    blocked = bootstrap(stat, 3000, n_boot=1000, seed=2)
    monkeypatch.setattr(itemboot, "JACKKNIFE_BLOCKS", 10_000)
    full = bootstrap(stat, 3000, n_boot=1000, seed=2)
    assert blocked.low[0] < blocked.value[0] < blocked.high[0]
    assert (blocked.low[0], blocked.high[0]) == pytest.approx((full.low[0], full.high[0]), abs=2e-3)
