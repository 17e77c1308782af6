"""Coverage of the 95% bootstrap intervals of the agreement statistics (sharpen.stats.agreement).

Each setting draws many small synthetic datasets (100 items, and 40) from a population whose value of
the statistic is known — computed once on 2,000,000 items drawn the same way — computes the
interval on each dataset, and counts how often it contains the population value. BCa (what
sharpen reports) and the plain percentile interval are read off the same replicates.

    .venv/bin/python benchmarks/agreement_coverage.py [--sims 1000] [--n 100 40] [--boot 2000]

prints a table and writes benchmarks/results/agreement_coverage.md. tests/test_stats_agreement.py
runs the same settings at 100 items (BCa) and requires 93–97% (marked slow).

Populations (each item a trajectory):

- ``kappa-nominal`` — a latent class ``z`` ∈ {0, 1, 2} with probabilities (0.5, 0.3, 0.2);
  the judge reports ``z`` with probability 0.7, the person with 0.8, otherwise each draws a
  label from the same probabilities. Cohen's κ of judge and person.
- ``kappa-high`` — the same with both raters right 95% of the time (κ near its upper bound).
- ``kappa-quadratic`` — a latent quality ``x ~ N(0, 1)``; judge and person see
  ``x + N(0, 0.6²)`` and ``x + N(0, 0.4²)`` and grade it 0–4 (cuts at −1.5, −0.5, 0.5, 1.5).
  Quadratic-weighted κ.
- ``spearman`` — the same grades; Spearman's ρ.
- ``alpha-nominal`` — three raters of the latent-class model (0.7, 0.8, 0.6), each rating
  missing with probability 0.1. Krippendorff's α, nominal.
- ``alpha-interval`` — three raters of the latent-quality model (noise 0.6, 0.4, 0.8), 10%
  missing. α, interval.
- ``auroc`` — a verdict ``y ~ Bernoulli(0.4)``; the judge's score is ``y + N(0, 1)`` rounded
  to one decimal (ties occur). AUROC.
- ``kappa-clustered`` — ``kappa-nominal`` where 25 tasks × 4 trajectories share their latent
  class with probability 0.6 (trajectories of a task are alike); bootstrap over tasks.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sharpen.stats.itemboot import BootMethod, Stat, bootstrap, point
from sharpen.stats.weighted import alpha_stat, auroc_stat, kappa_stat, spearman_stat

ROOT = Path(__file__).resolve().parent
POPULATION = 2_000_000
CLASS_P = np.array([0.5, 0.3, 0.2])
CUTS = np.array([-1.5, -0.5, 0.5, 1.5])


@dataclass(frozen=True)
class Setting:
    """A population: ``draw(rng, n) -> (stat, clusters)`` for a dataset of ``n`` items."""

    name: str
    draw: Callable[[np.random.Generator, int], tuple[Stat, np.ndarray | None]]


def _rater_classes(rng: np.random.Generator, z: np.ndarray, accuracy: float) -> np.ndarray:
    noise = rng.choice(len(CLASS_P), size=len(z), p=CLASS_P)
    return np.where(rng.random(len(z)) < accuracy, z, noise)


def _grades(rng: np.random.Generator, x: np.ndarray, noise: float) -> np.ndarray:
    return np.searchsorted(CUTS, x + rng.normal(0, noise, len(x)))


def _missing(rng: np.random.Generator, r: np.ndarray, p: float = 0.1) -> np.ndarray:
    out = r.astype(float)
    out[rng.random(r.shape) < p] = np.nan
    return out


def kappa_nominal(rng: np.random.Generator, n: int) -> tuple[Stat, None]:
    z = rng.choice(3, size=n, p=CLASS_P)
    return kappa_stat(_rater_classes(rng, z, 0.7), _rater_classes(rng, z, 0.8), 3), None


def kappa_high(rng: np.random.Generator, n: int) -> tuple[Stat, None]:
    z = rng.choice(3, size=n, p=CLASS_P)
    return kappa_stat(_rater_classes(rng, z, 0.95), _rater_classes(rng, z, 0.95), 3), None


def kappa_quadratic(rng: np.random.Generator, n: int) -> tuple[Stat, None]:
    x = rng.normal(size=n)
    return kappa_stat(_grades(rng, x, 0.6), _grades(rng, x, 0.4), 5, "quadratic"), None


def spearman(rng: np.random.Generator, n: int) -> tuple[Stat, None]:
    x = rng.normal(size=n)
    return spearman_stat(_grades(rng, x, 0.6), _grades(rng, x, 0.4)), None


def alpha_nominal(rng: np.random.Generator, n: int) -> tuple[Stat, None]:
    z = rng.choice(3, size=n, p=CLASS_P)
    r = np.stack([_rater_classes(rng, z, q) for q in (0.7, 0.8, 0.6)])
    return alpha_stat(_missing(rng, r), "nominal"), None


def alpha_interval(rng: np.random.Generator, n: int) -> tuple[Stat, None]:
    x = rng.normal(size=n)
    r = np.stack([_grades(rng, x, s) for s in (0.6, 0.4, 0.8)])
    return alpha_stat(_missing(rng, r), "interval"), None


def auroc(rng: np.random.Generator, n: int) -> tuple[Stat, None]:
    y = rng.random(n) < 0.4
    return auroc_stat(np.round(y + rng.normal(size=n), 1), y), None


def kappa_clustered(rng: np.random.Generator, n: int) -> tuple[Stat, np.ndarray]:
    per = 4
    tasks = np.repeat(np.arange(n // per), per)
    shared = rng.choice(3, size=n // per, p=CLASS_P)[tasks]
    own = rng.choice(3, size=len(tasks), p=CLASS_P)
    z = np.where(rng.random(len(tasks)) < 0.6, shared, own)
    return kappa_stat(_rater_classes(rng, z, 0.7), _rater_classes(rng, z, 0.8), 3), tasks


SETTINGS = [Setting("kappa-nominal", kappa_nominal), Setting("kappa-high", kappa_high),
            Setting("kappa-quadratic", kappa_quadratic),
            Setting("spearman", spearman), Setting("alpha-nominal", alpha_nominal),
            Setting("alpha-interval", alpha_interval), Setting("auroc", auroc),
            Setting("kappa-clustered", kappa_clustered)]


def population_value(setting: Setting, seed: int = 12345) -> float:
    """The statistic on :data:`POPULATION` items (in chunks of weights: one replicate row)."""
    stat, _ = setting.draw(np.random.default_rng(seed), POPULATION)
    return float(point(stat, POPULATION)[0])


def coverage(setting: Setting, *, sims: int, n: int, n_boot: int, seed: int,
             methods: tuple[BootMethod, ...] = ("bca",)) -> dict[BootMethod, float]:
    """Share of ``sims`` datasets whose interval contains the population value, per method;
    a dataset without an interval (undefined statistic) counts as not covering."""
    truth = population_value(setting)
    rng = np.random.default_rng(seed)
    hits = dict.fromkeys(methods, 0)
    for s in range(sims):
        stat, clusters = setting.draw(rng, n)
        for m in methods:
            r = bootstrap(stat, n, clusters=clusters, n_boot=n_boot, seed=seed + s, method=m)
            hits[m] += int(r.low[0] <= truth <= r.high[0])
    return {m: h / sims for m, h in hits.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--n", type=int, nargs="+", default=[100, 40], help="items per dataset")
    ap.add_argument("--boot", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=20)
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "agreement_coverage.md")
    args = ap.parse_args(argv)
    rows = []
    for setting in SETTINGS:
        truth = population_value(setting)
        for n in args.n:
            t0 = time.perf_counter()
            cov = coverage(setting, sims=args.sims, n=n, n_boot=args.boot, seed=args.seed,
                           methods=("bca", "percentile"))
            rows.append((setting.name, n, truth, cov["bca"], cov["percentile"]))
            print(f"{setting.name:16s} n={n:<4d} truth {truth:.4f}  BCa {cov['bca']:.1%}  "
                  f"percentile {cov['percentile']:.1%}  ({time.perf_counter() - t0:.0f} s)", flush=True)
    cmd = "benchmarks/agreement_coverage.py " + " ".join(argv if argv is not None else sys.argv[1:])
    lines = [
        "# Coverage of the agreement statistics' 95% bootstrap intervals", "",
        f"Command: `.venv/bin/python {cmd.strip()}` — {args.sims} simulated datasets per setting "
        f"and size, {args.boot} bootstrap replicates each, seed {args.seed}; the population value "
        f"is the statistic on {POPULATION:,} items drawn the same way. Populations are described "
        "in the script's docstring. The standard error of a coverage estimate near 95% is "
        f"{100 * np.sqrt(0.95 * 0.05 / args.sims):.1f} points. A dataset whose interval is "
        "undefined counts as not covering.", "",
        "| setting | items | population value | BCa (reported) | plain percentile |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {name} | {n} | {t:.4f} | {b:.1%} | {p:.1%} |" for name, n, t, b, p in rows]
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
