"""pass@k and pass^k: the unbiased estimators, their stable forms, and undefined cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sharpen.stats.passk import pass_at_k, pass_hat_k, per_task_table


def naive_pass_at_k(n: int, c: int, k: int) -> float:
    return 1 - math.comb(n - c, k) / math.comb(n, k)


@pytest.mark.parametrize("n", [1, 2, 5, 10, 37])
def test_pass_at_k_equals_the_binomial_formula(n: int) -> None:
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(naive_pass_at_k(n, c, k), abs=1e-12)
            assert pass_hat_k(n, c, k) == pytest.approx(math.comb(c, k) / math.comb(n, k), abs=1e-12)


def test_pass_at_k_is_stable_where_binomials_overflow() -> None:
    # C(2000, 1000) overflows a float; the product form does not.
    value = pass_at_k(2000, 3, 1000)
    assert value == pytest.approx(1 - (1000 / 2000) * (999 / 1999) * (998 / 1998), rel=1e-12)
    assert 0.0 <= pass_hat_k(2000, 1500, 1000) <= 1.0


def test_fewer_valid_trials_than_k_is_undefined_not_guessed() -> None:
    assert pass_at_k(2, 2, 3) is None
    assert pass_hat_k(2, 2, 3) is None
    assert pass_at_k(0, 0, 1) is None


def test_pass_at_1_and_pass_hat_1_are_the_success_rate() -> None:
    assert pass_at_k(8, 3, 1) == pytest.approx(3 / 8)
    assert pass_hat_k(8, 3, 1) == pytest.approx(3 / 8)


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_hat_k(3, 1, 0)


def test_per_task_table_matches_the_scalar_functions() -> None:
    n = np.array([1, 3, 3, 5, 2])
    c = np.array([0, 1, 3, 2, 2])
    for kind, fn in (("at", pass_at_k), ("hat", pass_hat_k)):
        values, defined = per_task_table(n, c, 5, kind=kind)
        for t in range(len(n)):
            for k in range(1, 6):
                want = fn(int(n[t]), int(c[t]), k)
                assert defined[t, k - 1] == (want is not None)
                assert values[t, k - 1] == pytest.approx(want or 0.0)


def test_unbiased_in_simulation() -> None:
    """The mean of the estimator over many draws equals 1 − (1 − p)^k (and p^k)."""
    rng = np.random.default_rng(3)
    p, n, k = 0.3, 6, 3
    c = rng.binomial(n, p, 20_000)
    at, _ = per_task_table(np.full(len(c), n), c, k, kind="at")
    hat, _ = per_task_table(np.full(len(c), n), c, k, kind="hat")
    assert at[:, k - 1].mean() == pytest.approx(1 - (1 - p) ** k, abs=0.01)
    assert hat[:, k - 1].mean() == pytest.approx(p**k, abs=0.005)
