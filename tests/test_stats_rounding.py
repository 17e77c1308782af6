"""Printed statistics are rounded conservatively: p-values up, interval ends outward, in the
helper and in every verdict, table and summary that prints them."""

from __future__ import annotations

import re

import numpy as np
import pytest
from rich.console import Console
from stats_helpers import make_table

from sharpen.runner.summary import RunSummary
from sharpen.stats.paired import compare_pair, with_verdict
from sharpen.stats.rounding import interval_ends, interval_text, p_cell, p_text, round_down, round_up


@pytest.mark.parametrize(("p", "cell"), [
    (0.0012, "0.002"), (0.001, "0.001"), (0.0009999, "< 0.001"), (0.0625, "0.063"),
    (0.0129, "0.013"), (0.05, "0.050"), (0.0500001, "0.051"), (1.0, "1.000"),
])
def test_a_p_value_is_rounded_up(p: float, cell: str) -> None:
    assert p_cell(p) == cell
    assert float(cell.strip("< ")) >= p or cell.startswith("<")


def test_a_bound_keeps_its_sign_and_is_rounded_up() -> None:
    assert p_text(0.0012, bound=True) == "p ≤ 0.002"  # never "p ≤ 0.001"
    assert p_text(0.0012) == "p = 0.002"
    assert p_text(0.0004, bound=True) == "p < 0.001"


def test_interval_ends_are_rounded_outward_without_float_artefacts() -> None:
    assert interval_text(0.0214, 0.10301) == "[2.1, 10.4]"
    assert interval_text(0.07, 0.3) == "[7.0, 30.0]"  # 0.07 × 100 is not 7.000000000000001
    assert interval_text(-0.0314, 0.0001, signed=True) == "[-3.2, +0.1]"
    assert interval_text(-0.0001, 0.0, signed=True) == "[-0.1, +0.0]"
    assert round_up(-0.04, 1, 1.0) == 0.0 and str(round_up(-0.04, 1)) == "0.0"  # no "-0.0"
    assert round_down(0.123456, 3) == 0.123 and round_up(0.123456, 3) == 0.124
    rng = np.random.default_rng(1)
    for low, high in rng.uniform(-1, 1, size=(200, 2)):
        lo, hi = interval_ends(min(low, high), max(low, high))
        assert lo <= 100 * min(low, high) + 1e-9 and hi >= 100 * max(low, high) - 1e-9


def _printed_interval(text: str) -> tuple[float, float]:
    m = re.search(r"\[(-?[\d.]+), (-?[\d.]+)\]", text)
    assert m, text
    return float(m[1]), float(m[2])


def test_a_verdict_prints_a_bound_of_0_0012_as_0_002_and_its_interval_outward() -> None:
    rng = np.random.default_rng(0)
    a = make_table(np.ones(100, int), np.r_[np.ones(30, int), np.zeros(70, int)])
    b = make_table(np.ones(100, int), np.r_[np.ones(55, int), np.zeros(45, int)])
    cmp = compare_pair(a, b, rng)
    bound = with_verdict(cmp.model_copy(update={"p_upper_bound": True}), 0.0012, family=1)
    assert bound.verdict.endswith("p ≤ 0.002"), bound.verdict
    lo, hi = _printed_interval(bound.verdict)
    assert cmp.ci is not None and lo <= 100 * cmp.ci.low and hi >= 100 * cmp.ci.high
    worse = compare_pair(b, a, rng)  # the interval of A − B, still outward
    assert worse.direction == "worse" and worse.ci is not None
    lo, hi = _printed_interval(worse.verdict)
    assert lo <= -100 * worse.ci.high and hi >= -100 * worse.ci.low


def test_the_run_summary_prints_its_wilson_interval_outward() -> None:
    summary = RunSummary(run_id="r", n_tasks=7, n_trajectories=7, n_counted=7, n_success=3,
                         success_rate=3 / 7, ci_low=0.1589, ci_high=0.7491, errors={},
                         invalid_actions=0, infra_retries=0, input_tokens=0, output_tokens=0,
                         cost_usd=0.0, wall_seconds=0.0)
    console = Console(width=120, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(summary.table())
    assert "95% Wilson CI 15.8%–75.0%" in console.export_text()
