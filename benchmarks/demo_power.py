"""How likely is ``sharpen demo`` to show a gain from Reflexion with test feedback, per size?

The demo's improvement is a ``reflexion`` child with memory ``result``: its first attempt is
the seed's own (answered from the embedded model's memo), so on the deterministic embedded
model it never loses a task the seed solves, and it gains every task where the seed fails
and a retry that sees the failed tests succeeds. Per task that happens with probability
``r = (1 - base) * fix``: ``base`` the seed's success rate, ``fix`` the share of the seed's
failures a retry fixes. The demo shows the gain when

1. the child passes its gate: at least one fix among the ``train`` training tasks (all of
   them are the minibatch), probability ``1 - (1 - r) ** train``; and
2. the held-out comparison is significant: with no task lost, exact McNemar (two-sided,
   α = 0.05, ``stats.mcnemar``) needs ``c_min`` = 6 fixes among the ``test`` tasks,
   probability ``P(Binomial(test, r) >= c_min)``.

``base`` and ``fix`` are what every measurement so far counted (listed in ``EVIDENCE``,
each with its source); the table gives both the probability at the pooled rates and its
mean over their Jeffreys posteriors (Beta(k + ½, n − k + ½), independent), which carries
the uncertainty of rates measured on a few hundred tasks. The time column is a model,
``tasks × (t_plain + (1 − base) × retries × t_retry)``, with per-episode times measured by
a demo run (``--t-plain``, ``--t-retry``, ``--retries``: seconds per first attempt, per
retry, and retries per failed task) — an estimate, not a measurement. The values below are
the timing pilot's (task seed 2, see ``EVIDENCE``): its store's runs gave 1.36 s per plain
episode (84.5 s for the seed's 62), 2.21 s per retry (276 s for the child's 125 steps beyond
one per task) and 2.98 retries per failed task (125 for 42).

    python benchmarks/demo_power.py --t-plain 1.36 --t-retry 2.21 --retries 2.98
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from scipy.stats import binom

from sharpen.stats.mcnemar import mcnemar

EVIDENCE = {
    # (successes, tasks) of the seed spec, one attempt.
    "base": [
        (13, 50, "task seed 0, first 50 test tasks (benchmarks/results/reflexion_memory.md)"),
        (46, 120, "task seed 3, 120 test tasks (benchmarks/results/reflexion_feedback.md)"),
        (37, 100, "task seed 4, the demo's 100 test tasks (README)"),
        (5, 12, "task seed 4, the demo's 12 train tasks (README)"),
        (20, 62, "task seed 2, a timing pilot of the demo at 24 train / 8 val / 30 test, "
                 "memories [result] (2026-12-01 00:59 UTC; seed 3/8 val, 6/24 train, 11/30 test)"),
    ],
    # (seed failures fixed, seed failures) by reflexion, 4 trials, memory result at 200 chars.
    "fix": [
        (5, 37, "task seed 0 (benchmarks/results/reflexion_memory.md, --result-chars 200)"),
        (10, 74, "task seed 3 (benchmarks/results/reflexion_feedback.md)"),
        (0, 7, "task seed 4, the demo's gate on 12 train tasks (README)"),
        (4, 42, "task seed 2, the timing pilot (1/18 train, 1/5 val, 2/19 test)"),
    ],
}
ALPHA = 0.05
DRAWS = 20_000
OUT = Path(__file__).resolve().parent / "results" / "demo_power.md"


def c_min(alpha: float = ALPHA) -> int:
    """Fewest fixes (none lost) for which exact McNemar gives p < ``alpha``."""
    return next(c for c in range(1, 100) if mcnemar(0, c).p_value < alpha)


def chances(r: np.ndarray, train: int, test: int) -> tuple[np.ndarray, np.ndarray]:
    """(P gate passes, P test is significant) at per-task fix probability ``r``."""
    gate = 1.0 - (1.0 - r) ** train
    shows = binom.sf(c_min() - 1, test, r)
    return gate, shows


def pooled(kind: str) -> tuple[int, int]:
    return sum(k for k, _, _ in EVIDENCE[kind]), sum(n for _, n, _ in EVIDENCE[kind])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="12x100,24x100,24x120,30x100,30x120,36x120,24x150",
                    help="designs as TRAINxTEST, comma-separated")
    ap.add_argument("--val", type=int, default=8, help="validation tasks (time only)")
    ap.add_argument("--t-plain", type=float, required=True, help="seconds per first attempt")
    ap.add_argument("--t-retry", type=float, required=True, help="seconds per retry")
    ap.add_argument("--retries", type=float, required=True, help="retries per failed task")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    (kb, nb), (kf, nf) = pooled("base"), pooled("fix")
    rng = np.random.default_rng(0)
    base_draws = rng.beta(kb + 0.5, nb - kb + 0.5, DRAWS)
    fix_draws = rng.beta(kf + 0.5, nf - kf + 0.5, DRAWS)
    r_point = (1 - kb / nb) * (kf / nf)
    r_draws = (1 - base_draws) * fix_draws
    lines = [
        "# `sharpen demo`: the chance it shows Reflexion with test feedback, per size", "",
        f"`python benchmarks/demo_power.py --t-plain {args.t_plain} --t-retry {args.t_retry} "
        f"--retries {args.retries} --val {args.val}` (definitions in the script's docstring).", "",
        f"Pooled evidence: seed success {kb}/{nb} = {kb / nb:.1%}; failures fixed {kf}/{nf} = "
        f"{kf / nf:.1%}; per-task fix probability r = {r_point:.4f}. The exact test needs "
        f"{c_min()} fixes with none lost.", "",
        "| train (= gate minibatch) | test | P(gate) | P(test significant) | P(both) at pooled rates "
        "| P(both), posterior mean | estimated minutes |",
        "|---|---|---|---|---|---|---|",
    ]
    for size in args.sizes.split(","):
        train, test = (int(x) for x in size.split("x"))
        g, s = chances(np.array(r_point), train, test)
        gd, sd = chances(r_draws, train, test)
        tasks = train + args.val + test
        minutes = tasks * (args.t_plain + (1 - kb / nb) * args.retries * args.t_retry) / 60
        lines.append(f"| {train} | {test} | {float(g):.2f} | {float(s):.2f} | {float(g * s):.2f} "
                     f"| {float(np.mean(gd * sd)):.2f} | {minutes:.1f} |")
    lines += ["", "Evidence:", ""]
    lines += [f"- {kind}: {k}/{n}, {src}" for kind in EVIDENCE for k, n, src in EVIDENCE[kind]]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
