"""Training the embedded model in its weights with `sharpen train` — STaR, Re-ReST and GRPO —
does any of them raise success on tasks it never saw? A pre-registered check.

Protocol (fixed in this docstring and committed, with the power table it cites, before the
run; run once; results go to ``benchmarks/results/self_training.md`` as they come out):

- Environment and agent: ``sharpen demo``'s (generated ``code`` tasks, easy, one submission;
  SmolLM2-135M, 200 tokens per reply, two steps, greedy), task seed ``--task-seed`` (11):
  ``--train`` (80) train, 8 val and ``--test`` (200) test tasks. None of them is among the
  first 200 train, val or test tasks of the task seeds earlier measurements used (0–7, 21;
  checked at start).
- Start model U: the embedded model de-quantized to a float32 checkpoint and written back as
  float32 GGUF (``sharpen checkpoint`` / ``sharpen gguf``), shared by the three trainings, so
  U's test run is one run and every method starts from the same weights.
- Methods (``sharpen train METHOD code``, each from U, seed 0, on the CPU, full fine-tuning):
  - ``star``: one round, 4 attempts per train task at temperature 0.8, keep verified
    successes, SFT 2 epochs, learning rate 3e-5, batch 4 (the method's defaults; the setting
    of ``star_finetune.py``, whose result is this check's pilot);
  - ``rerest``: the same sampling and SFT, plus each failed attempt's environment feedback to
    the current model as reflector for a corrected attempt, kept only when the environment
    verifies it (the method's defaults);
  - ``grpo``: TRL's GRPOTrainer, rewards from the code verifier, 4 generations per task,
    one task per step, up to 80 steps (320 samples, star's sampling budget), learning rate
    1e-6, temperature 0.8, 200 completion tokens (the method's defaults otherwise).
  Each training is capped at ``--max-seconds`` (2400) of its own wall time; what stopped it
  is reported.
- Evaluation: the 200 test tasks, greedy, the same seeds for every model: U and the three
  trained models T_star, T_rerest, T_grpo.
- Primary: each T against U, exact McNemar; the family of three is tested with Holm's
  procedure at α = 0.05. Reported: the paired difference with its Newcombe 95% interval
  (unadjusted), the discordant counts, p and the Holm decision; wall time and tokens per
  task for each.
- Power (``python benchmarks/self_training.py --power``, table in
  ``benchmarks/results/self_training_power.md``): at the pilot's discordance (14 gained and
  6 lost per 100 tasks: ``star_finetune.md``, +8.0 [−0.6, +16.4]), 200 test tasks give
  power 0.67 for one comparison at α = 0.05 and 0.49 at Holm's first step (α/3).
- Prediction: ``star`` +8 points (as the pilot), not certain to reach significance (power
  above); ``rerest`` at least as good as ``star``, within a few points (the reflector is the
  135M model itself, which fixed about one failure in eight in the Reflexion checks); ``grpo``
  within ±4 points of U (a few dozen policy-gradient steps at learning rate 1e-6). The issue's
  target — at least one method's interval excludes zero — we expect with probability about
  one half.

Usage::

    python benchmarks/self_training.py --power   # the power table (seconds)
    python benchmarks/self_training.py           # the check: about two hours on two cores

Needs the ``train`` and ``local`` extras.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from machine_info import cores, cpu_name, version
from preregistered import comparison_table, fresh_tasks, protocol_commit
from scipy.stats import binom

from sharpen.cli.demo_cmd import DEMO_ENV, DEMO_SPEC
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.stats.mcnemar import mcnemar
from sharpen.stats.paired import PairedComparison
from sharpen.store import Store
from sharpen.train.checkpoint import write_checkpoint, write_gguf
from sharpen.train.engine import train
from sharpen.train.method import TrainBudget

HERE = Path(__file__).resolve().parent
USED_SEEDS = (0, 1, 2, 3, 4, 5, 6, 7, 21)
PILOT = (14, 6, 100)  # star_finetune.md: tasks gained, lost, of 100
METHODS: dict[str, dict[str, object]] = {
    "star": {},
    "rerest": {},
    "grpo": {"steps": 80, "num_generations": 4, "tasks_per_step": 1},
}
FAMILY_ALPHA = 0.05


def power(n: int, p_gain: float, p_loss: float, alpha: float) -> float:
    """P(exact McNemar p < alpha with more gains than losses) on ``n`` tasks whose outcomes
    change for the better with probability ``p_gain`` and for the worse with ``p_loss``."""
    p_disc, share = p_gain + p_loss, p_gain / (p_gain + p_loss)
    total = 0.0
    for d in range(n + 1):
        w = float(binom.pmf(d, n, p_disc))
        if w < 1e-12:
            continue
        total += w * sum(float(binom.pmf(g, d, share)) for g in range(d + 1)
                         if g > d - g and mcnemar(d - g, g).p_value < alpha)
    return total


def power_page() -> list[str]:
    gained, lost, n0 = PILOT
    rows = ["| test tasks | effect (gained / lost per 100) | power at α = 0.05 | "
            "power at α/3 (Holm's first step) |", "|---|---|---|---|"]
    for n in (100, 150, 200, 250, 300):
        for up, down in ((gained, lost), (12, 6), (10, 6)):
            pg, pl = up / n0, down / n0
            rows.append(f"| {n} | +{up - down} ({up} / {down}) | {power(n, pg, pl, FAMILY_ALPHA):.2f} | "
                        f"{power(n, pg, pl, FAMILY_ALPHA / 3):.2f} |")
    return ["# `self_training.py`: power of the pre-registered check, per size", "",
            "`python benchmarks/self_training.py --power` — exact McNemar, one-sided in the "
            "direction of a gain; the pilot is `star_finetune.md` (14 gained, 6 lost of 100).", "",
            *rows, ""]


def holm(ps: list[float], alpha: float) -> list[bool]:
    """Holm's step-down decisions for the p-values ``ps`` at family level ``alpha``."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    reject = [False] * len(ps)
    for rank, i in enumerate(order):
        if ps[i] >= alpha / (len(ps) - rank):
            break
        reject[i] = True
    return reject


async def main(args: argparse.Namespace) -> None:
    started, load = datetime.now(UTC), os.getloadavg()[0]
    env = REGISTRY.create("env", DEMO_ENV)
    for split, n in (("train", args.train), ("val", 8), ("test", args.test)):
        fresh_tasks(env, split, n, args.task_seed, USED_SEEDS)
    results: list[tuple[str, str, str, PairedComparison]] = []
    facts: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        store = Store(f"sqlite:///{tmp / 'bench.db'}")
        base = write_checkpoint(tmp / "base")
        base_gguf = write_gguf(base, tmp / "base.gguf")
        for name, method_args in METHODS.items():
            t0 = time.perf_counter()
            report = await train(
                PluginRef(name=name, args=method_args), DEMO_ENV, DEMO_SPEC, store,
                folder=tmp / "train", train=args.train, val=8, test=args.test,
                task_seed=args.task_seed, seed=0, budget=TrainBudget(max_seconds=args.max_seconds),
                base=(base, base_gguf), on_line=lambda m, n=name: print(f"[{n}] {m}", flush=True))
            v = report.verdict
            results.append(("U", f"T_{name}", "primary", v.comparison))
            facts[name] = {"wall_s": round(time.perf_counter() - t0), "stopped_by": report.result.stopped_by,
                           "samples": report.result.samples, "train_s": round(report.result.seconds),
                           "base_success": v.base_success, "trained_success": v.trained_success,
                           "base_tokens_per_task": round(v.base_tokens_per_task),
                           "trained_tokens_per_task": round(v.trained_tokens_per_task),
                           "extra": report.result.extra}
            print(f"{name}: {report.verdict_text}", flush=True)
    ps = [c.p_value if c.p_value is not None else 1.0 for *_, c in results]
    decisions = holm(ps, FAMILY_ALPHA)
    page = [
        "# Training the embedded model in its weights (`sharpen train`): a pre-registered check", "",
        f"`python benchmarks/self_training.py --train {args.train} --test {args.test} --task-seed "
        f"{args.task_seed} --max-seconds {args.max_seconds}` — protocol in the script's docstring, "
        f"fixed at commit {protocol_commit('self_training.py')}; run {started:%Y-%m-%d %H:%M} UTC, "
        f"{cpu_name()}, {cores()} CPU(s), load average {load:.1f} at the start and "
        f"{os.getloadavg()[0]:.1f} at the end; sharpen {version('sharpen')}, trl {version('trl')}, "
        f"transformers {version('transformers')}, torch {version('torch')}.", "",
        *comparison_table(results, "each trained model better than U"), "",
        "| method | Holm decision (family α = 0.05) | wall s | training s | stopped by | samples | "
        "tokens per task, U → T |", "|---|---|---|---|---|---|---|",
        *[f"| {name} | {'reject' if d else 'keep'} H0 | {f['wall_s']} | {f['train_s']} | "
          f"{f['stopped_by']} | {f['samples']} | {f['base_tokens_per_task']} → "
          f"{f['trained_tokens_per_task']} |" for (name, f), d in zip(facts.items(), decisions, strict=True)],
        "", "```json", json.dumps(facts, indent=1, default=str), "```", ""]
    out = HERE / "results" / "self_training.md"
    out.write_text("\n".join(page))
    print(f"wrote {out}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--power", action="store_true", help="write the power table and stop")
    ap.add_argument("--train", type=int, default=80)
    ap.add_argument("--test", type=int, default=200)
    ap.add_argument("--task-seed", type=int, default=11)
    ap.add_argument("--max-seconds", type=float, default=2400)
    a = ap.parse_args()
    if a.power:
        target = HERE / "results" / "self_training_power.md"
        target.write_text("\n".join(power_page()))
        print(target.read_text())
    else:
        np.seterr(all="ignore")
        asyncio.run(main(a))
