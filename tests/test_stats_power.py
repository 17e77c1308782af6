"""Power: the conservative formula, pilot estimates, and a simulation check that the planned
number of tasks reaches the planned power."""

from __future__ import annotations

import numpy as np
import pytest
from stats_helpers import make_table

from sharpen.stats.paired import compare_pair
from sharpen.stats.power import conservative_model, pilot_model, plan, z_sum


def test_conservative_model_is_the_two_proportion_formula() -> None:
    m = conservative_model()
    assert m.diff_variance(1) == pytest.approx(0.5)
    assert m.diff_variance(10) == pytest.approx(0.5)  # epochs not credited
    assert z_sum() == pytest.approx(1.959964 + 0.841621, abs=1e-5)
    assert m.tasks_needed(0.10, 1) == 393  # ceil(2.8016² · 0.5 / 0.01)
    assert m.mde(393, 1) == pytest.approx(0.10, abs=0.001)


def test_plan_judges_a_design() -> None:
    p = plan(conservative_model(), 0.10, tasks=20, epochs=3)
    assert [r.epochs for r in p.rows] == [1, 2, 3, 5, 10]
    assert p.enough is False and p.mde == pytest.approx(z_sum() * np.sqrt(0.5 / 20))
    assert plan(conservative_model(), 0.5, tasks=20, epochs=1).enough is True


def test_pilot_model_estimates_the_intra_task_correlation() -> None:
    """Task rates ~ Beta(1, 1): ICC = 1/(a + b + 1) = 1/3."""
    rng = np.random.default_rng(1)
    c = rng.binomial(5, rng.beta(1, 1, 3000))
    m = pilot_model(make_table(np.full(3000, 5), c, run_id="pilot"))
    assert m.icc == pytest.approx(1 / 3, abs=0.04)
    assert m.p == pytest.approx(0.5, abs=0.02)
    assert m.source == "pilot run pilot" and m.pilot_tasks == 3000 and m.pilot_epochs == 5
    # more epochs help when the ICC is below 1
    assert m.tasks_needed(0.1, 5) < m.tasks_needed(0.1, 1)


def test_one_epoch_pilot_credits_no_epochs() -> None:
    m = pilot_model(make_table(np.ones(50, int), np.r_[np.ones(10, int), np.zeros(40, int)]))
    assert m.icc == 1.0 and "one epoch" in m.note
    assert m.p == pytest.approx(11 / 52)  # (c + 1) / (n + 2)
    assert m.tasks_needed(0.1, 1) == m.tasks_needed(0.1, 10)


def test_planned_tasks_reach_the_planned_power() -> None:
    """A pilot of agent A plans the tasks to detect +15 points with 3 epochs; simulated
    comparisons with an agent whose tasks are independently 15 points better detect it
    about 80% of the time."""
    rng = np.random.default_rng(2)
    pilot = make_table(np.full(4000, 3), rng.binomial(3, rng.beta(2, 2, 4000)))
    tasks = pilot_model(pilot).tasks_needed(0.15, 3)
    assert 60 <= tasks <= 110
    detected, reps = 0, 400
    n = np.full(tasks, 3)
    for _ in range(reps):
        a = make_table(n, rng.binomial(3, rng.beta(2, 2, tasks)))
        b = make_table(n, rng.binomial(3, rng.beta(2.6, 1.4, tasks)))  # mean 0.65
        cmp = compare_pair(a, b, rng, n_boot=1000)
        detected += cmp.significant and cmp.direction == "better"
    assert 0.72 <= detected / reps <= 0.90


def test_small_pilot_credits_no_epochs() -> None:
    """12 tasks × 3 epochs with 3 successes: an ICC of ~0 from so little is noise."""
    c = np.r_[np.ones(3, int), np.zeros(9, int)]
    m = pilot_model(make_table(np.full(12, 3), c))
    assert m.icc == 1.0 and "pilot too small" in m.note
