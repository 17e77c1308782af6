"""Does showing the proposer the detectors' diagnosis help? A pre-registered paired check.

Why this script exists
----------------------
Issue 22, item 9: proposers can take the diagnosis of their minibatch's failures as context
(``--proposer-arg diagnosis=true``: what the built-in detectors found, with counts, and each
shown failure's findings; :mod:`sharpen.improvement.diagnosis`). This script measures whether
that changes what an improvement run achieves on held-out tasks, with the design fixed and
committed before the run; the results file names the commit.

Protocol (fixed before the run)
-------------------------------
- Environment and seed spec: ``sharpen demo``'s (generated ``code`` tasks, easy, one
  submission each; the embedded SmolLM2-135M, temperature 0, 200 tokens, free decoding).
  Task seed ``--task-seed`` (7): none of its train, val or test tasks is among the first 200
  of each split of task seeds 0–6 (checked at the start; the run stops if one is).
- Proposer: ``evolve`` on the ``instructions`` component, ``merge_prob: 0`` (no merges, so
  every proposal is an LLM rewrite), written by the same embedded model (constrained
  decoding: JSON edits). Two arms that differ only in ``diagnosis``: **off** (the default,
  arg absent) and **on** (``diagnosis: true``).
- Pairs: engine seeds 0..``--seeds``-1 (3). For each seed both arms run with the same tasks,
  minibatches, budget and engine seed (parent choice, minibatches and the proposer's
  sampling seeds are drawn from the same RNG; the prompts differ, so the replies may).
  Sizes: ``--train`` 12, ``--val`` 6, ``--test`` 30 tasks, minibatch 4, ``--budget`` 30
  rollouts on train + val per arm (the engine's default gate and acceptance rules).
- Outcome: each arm's winner (best on validation; the seed spec when nothing was accepted)
  scored on the held-out test tasks, one attempt per task (the experiment protocol's test
  evaluation; no proposer sees them).
- Primary metric and test: test success of **on** minus **off**, over the pooled
  (seed, test task) pairs (3 × 30 = 90), exact McNemar, two-sided, α = 0.05, with the
  Newcombe 95% interval of the difference. "Diagnosis helps" is claimed only if p < 0.05
  and the interval lies above zero. Pairs share tasks across seeds, so the pooled test
  treats them as independent; with three seeds this is stated, not corrected.
- Secondary, reported without a claim: per seed, each arm's winner against the seed spec
  (``compare_pair``), proposals, invalid proposals, children gated out and accepted, and
  the share of the seed spec's failed test attempts in which any detector found something
  (how much the diagnosis has to say on this environment at all).
- Power: low, and said so in advance. Even if every pair were independent, the conservative
  power model (``sharpen.stats.power.conservative_model``: p = 0.5, pairing not credited)
  gives a minimum detectable difference of 21 points at 90 pairs (α = 0.05, 80% power;
  printed by this script). Pairs are not independent (three seeds share the test tasks, and
  a seed's two winners are often close specs), so the real power is lower still.
- Pilot (timing only, task seed 0, one seed, 8 train / 6 val / 10 test, budget 24; not part
  of the result): 4.6 minutes for both arms; both arms accepted a child (minibatch gates of
  4 tasks pass on one task's noise), and **none** of the seed spec's 8 failed test attempts
  had any detector finding — on this environment (one submission, wrong code is a failed
  test, not a loop or a limit hit) the diagnosis mostly reads "no check found ...".
- Prediction: no detectable difference (the primary test not confirmed): the diagnosis has
  almost nothing to say on this environment, and the 135M proposer's rewrites are noise
  that the small gate lets through or not by chance.
- The size is not changed after the run. It was fixed from the pilot so that the run
  finishes on this shared two-core machine within the time the task allowed (about 21
  minutes estimated).

Written to ``benchmarks/results/diagnosis_context.md``:

    python benchmarks/diagnosis_context.py
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from machine_info import cpu_name, version
from preregistered import fresh_tasks, protocol_commit

from sharpen.cli.demo_cmd import DEMO_ENV, DEMO_SPEC
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.improvement.budget import Budget
from sharpen.improvement.diagnosis import diagnose_minibatch
from sharpen.improvement.engine import EngineConfig
from sharpen.improvement.experiment import Experiment, ExperimentConfig, ExperimentResult
from sharpen.improvement.models import SharedModels
from sharpen.stats.mcnemar import mcnemar, newcombe_interval
from sharpen.stats.power import conservative_model
from sharpen.stats.report import load_table
from sharpen.store import Store

HERE = Path(__file__).resolve().parent
USED_SEEDS = (0, 1, 2, 3, 4, 5, 6)


def proposer(diagnosis: bool) -> PluginRef:
    """The arm's proposer: ``diagnosis`` absent (off, the default) or true (on)."""
    args: dict = {"components": ["instructions"], "merge_prob": 0.0}
    if diagnosis:
        args["diagnosis"] = True
    return PluginRef(name="evolve", args=args)


def config(a: argparse.Namespace, seed: int, diagnosis: bool) -> ExperimentConfig:
    return ExperimentConfig(
        env=DEMO_ENV, seed_spec=DEMO_SPEC, proposer=proposer(diagnosis),
        engine=EngineConfig(budget=Budget(rollouts=a.budget), minibatch=a.minibatch, seed=seed),
        train=a.train, val=a.val, test=a.test, task_seed=a.task_seed)


def _wins(store: Store, run_id: str) -> dict[str, int]:
    table = load_table(store, run_id)
    return {h: int(c) for h, c in zip(table.task_hash, table.c, strict=True)}


async def main(a: argparse.Namespace) -> str:
    started = datetime.now(UTC)
    load = os.getloadavg()[0]
    if a.check_fresh:
        env = REGISTRY.create("env", DEMO_ENV)
        for split, n in (("train", a.train), ("val", a.val), ("test", a.test)):
            fresh_tasks(env, split, n, a.task_seed, USED_SEEDS)
    models = SharedModels()
    rows: list[tuple[int, bool, ExperimentResult, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{Path(tmp) / 'bench.db'}")
        for seed in range(a.seeds):
            for diagnosis in (False, True):
                cfg = config(a, seed, diagnosis)
                t0 = time.perf_counter()
                result = await Experiment(cfg, store, Path(tmp) / cfg.experiment_id(), models=models,
                                          on_event=lambda m, s=seed, d=diagnosis: print(
                                              f"seed {s} diagnosis {'on' if d else 'off'}: {m}",
                                              flush=True)).run()
                rows.append((seed, diagnosis, result, time.perf_counter() - t0))
        base = rows[0][2]
        failed = [t for t in store.iter_trajectories(base.baseline_run)
                  if t.outcome and t.outcome.counts and not t.outcome.success]
        seen = diagnose_minibatch(failed)
        failed_any = sum(bool(seen.of(t)) for t in failed)
        hits = {c.detector: c.failed for c in seen.counts if c.failed}
        pooled = {"both": 0, "off_only": 0, "on_only": 0, "neither": 0}
        per_seed = []
        for seed in range(a.seeds):
            off = next(r for s, d, r, _ in rows if s == seed and not d).results[0]
            on = next(r for s, d, r, _ in rows if s == seed and d).results[0]
            w_off, w_on = _wins(store, off.test_run), _wins(store, on.test_run)
            for h in w_off:
                key = ("both" if w_off[h] and w_on[h] else "off_only" if w_off[h] else
                       "on_only" if w_on[h] else "neither")
                pooled[key] += 1
            per_seed.append((seed, off, on))
    n = sum(pooled.values())
    test = mcnemar(pooled["off_only"], pooled["on_only"])
    lo, hi = newcombe_interval(pooled["both"], pooled["on_only"], pooled["off_only"], pooled["neither"], 0.95)
    diff = (pooled["on_only"] - pooled["off_only"]) / n
    confirmed = test.p_value < 0.05 and lo > 0
    mde = conservative_model().mde(n, 1)
    rng_note = "(pooled over seeds; pairs share tasks across seeds)"
    lines = [
        "# Diagnosis as proposer context: a pre-registered paired check",
        "",
        f"`python benchmarks/diagnosis_context.py --seeds {a.seeds} --train {a.train} --val {a.val} "
        f"--test {a.test} --budget {a.budget} --minibatch {a.minibatch} --task-seed {a.task_seed}` — "
        f"protocol in the script's docstring, fixed at commit {protocol_commit('diagnosis_context.py')} "
        f"before the run; run {started:%Y-%m-%d %H:%M} UTC, {cpu_name()}, "
        f"{len(os.sched_getaffinity(0))} CPU(s), load average {load:.1f} at the start and "
        f"{os.getloadavg()[0]:.1f} at the end; sharpen {version('sharpen')}, llama-cpp-python "
        f"{version('llama-cpp-python')}.",
        "",
        "`sharpen demo`'s environment and seed spec (SmolLM2-135M); proposer `evolve` on "
        "`instructions`, no merges, written by the same model; arms differ only in "
        "`diagnosis` (off: arg absent; on: `diagnosis: true`).",
        "",
        f"Seed spec on the {a.test} test tasks: {base.baseline_test_success:.1%}. Its failed test "
        f"attempts with any detector finding: {failed_any} of {len(failed)}"
        + (f" ({', '.join(f'{k} {v}' for k, v in hits.items())})" if hits else "") + ".",
        "",
        "| seed | arm | proposals | invalid | gated out | accepted | winner val | winner test "
        "| winner vs seed spec, pts [95% CI] | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    walls = {(s, d): w for s, d, _, w in rows}
    for seed, off, on in per_seed:
        for arm, r in (("off", off), ("on", on)):
            c = r.comparison
            lines.append(
                f"| {seed} | {arm} | {r.account.proposals} | {r.account.invalid} | {r.account.gated_out} "
                f"| {r.account.accepted} | {r.val_score:.1%} | {r.test_success or r.test_score:.1%} "
                f"| {100 * (c.difference or 0):+.1f} [{100 * c.ci.low:+.1f}, {100 * c.ci.high:+.1f}] "
                f"| {walls[(seed, arm == 'on')]:.0f} |")
    lines += [
        "",
        f"Primary {rng_note}: {n} (seed, test task) pairs; both solved {pooled['both']}, only off "
        f"{pooled['off_only']}, only on {pooled['on_only']}, neither {pooled['neither']}. "
        f"Difference on − off {100 * diff:+.1f} points, Newcombe 95% CI [{100 * lo:+.1f}, "
        f"{100 * hi:+.1f}], exact McNemar p = {test.p_value:.3g}.",
        "",
        "Primary hypothesis (diagnosis on better than off): "
        f"**{'confirmed' if confirmed else 'not confirmed'}**. "
        f"Conservative minimum detectable difference at {n} pairs (α = 0.05, 80% power, "
        f"`sharpen.stats.power.conservative_model`): {100 * mde:.0f} points.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--train", type=int, default=12)
    ap.add_argument("--val", type=int, default=6)
    ap.add_argument("--test", type=int, default=30)
    ap.add_argument("--budget", type=int, default=30)
    ap.add_argument("--minibatch", type=int, default=4)
    ap.add_argument("--task-seed", type=int, default=7)
    ap.add_argument("--no-check-fresh", dest="check_fresh", action="store_false",
                    help="skip the freshness check (the timing pilot on a used task seed)")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "diagnosis_context.md")
    a = ap.parse_args()
    page = asyncio.run(main(a))
    a.out.write_text(page)
    print(page)
