"""A reward model of the embedded model's own code attempts: does it order held-out pairs, and
does best-of-N with it beat best-of-N at random on held-out tasks?

Protocol (fixed in this docstring and committed before the run):

- Environment and agent: ``sharpen demo``'s (generated ``code`` tasks, easy, one submission;
  SmolLM2-135M, 200 tokens per reply, two steps), the start model the float32 GGUF of
  ``sharpen checkpoint`` (what ``sharpen train`` samples with), task seed ``--task-seed``
  (21). Splits: ``--train`` train, ``--val`` val and ``--test`` test tasks of that seed.
- Reward model: ``sharpen train reward-model``'s method (:class:`RewardModelMethod`, its
  defaults but ``max_length=384``): ``--attempts`` (4) episodes per train task at temperature
  1.0, verifier pairs (best vs worst, second best vs second worst; only pairs the verifier
  scores differently), TRL ``RewardTrainer`` (Bradley–Terry), full fine-tuning of the scalar
  head model, 1 epoch, learning rate 1e-5, batch 2, seed 0, CPU.
- Measure 1, held-out pair accuracy: the same sampling on the val tasks; the share of val
  pairs the reward model orders right (a tie is wrong), Wilson 95% interval. Chance is 0.5;
  it "orders held-out pairs" when the interval lies above 0.5.
- Measure 2, best-of-N on held-out tasks: ``--attempts`` episodes per test task at temperature
  1.0 (one run, epochs = N). Per task, the RM pick (:func:`best_of_n` on the ``reward_model``
  judge's scores; the verifier is never read) against the random pick. Primary: the paired
  difference per task between the RM pick's success (0/1) and the random pick's expected
  success (the share of the task's N attempts that succeeded: exactly what a uniform random
  pick scores on average), mean over tasks with its 95% t interval; "RM beats random" when the
  interval lies above zero. Secondary: one seeded random draw per task (seed 0) against the RM
  pick, exact McNemar with Newcombe's interval. Context, not tested: oracle best-of-N (any
  attempt succeeded) and first-attempt success.
- No prediction of the direction: a 135M reward model from a few dozen pairs may order
  nothing. The result is written whatever it is.

Usage::

    python benchmarks/reward_model.py            # defaults; its wall time goes in the results

Needs the ``train`` extra. Results go to ``benchmarks/results/reward_model.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from machine_info import cores, cpu_name, version
from preregistered import protocol_commit

from sharpen.cli.demo_cmd import DEMO_ENV, DEMO_SPEC
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.core.task import TaskSpec
from sharpen.judges.runner import JudgeSetup, judge_run
from sharpen.runner import RunConfig, Runner
from sharpen.stats.intervals import t_quantile
from sharpen.stats.mcnemar import mcnemar, newcombe_interval
from sharpen.store import Store
from sharpen.train.best_of_n import best_of_n, random_of_n
from sharpen.train.checkpoint import write_checkpoint, write_gguf
from sharpen.train.method import TrainContext
from sharpen.train.reward_model import RewardModelMethod

HERE = Path(__file__).resolve().parent
TEMPERATURE = 1.0


def context(tmp: Path, store: Store, tasks: dict[str, list[TaskSpec]], ckpt: Path,
            gguf: Path) -> TrainContext:
    """A context as ``sharpen train`` builds one (rollouts: the runner, guarded)."""
    ctx = TrainContext(env=DEMO_ENV, spec=DEMO_SPEC, train_tasks=tasks["train"],
                       val_tasks=tasks["val"], base_checkpoint=ckpt, base_gguf=gguf,
                       workdir=tmp / "rm", store=store)

    async def rollouts(tasks: Sequence[TaskSpec], *, model_path: Path, epochs: int = 1,
                       temperature: float | None = None, label: str = "", seed: int = 0) -> str:
        ctx.check_tasks(tasks)
        return await sample(store, list(tasks), model_path, epochs, temperature or 0.0, seed, label)

    ctx.rollouts = rollouts
    return ctx


async def sample(store: Store, tasks: list[TaskSpec], model_path: Path, epochs: int,
                 temperature: float, seed: int = 0, label: str = "") -> str:
    spec = DEMO_SPEC.model_copy(update={
        "model": PluginRef(name="local", args={"model_path": str(model_path)}),
        "params": {**DEMO_SPEC.params, "temperature": temperature}})
    config = RunConfig(env=DEMO_ENV, agent=spec, tasks=tasks, epochs=epochs, seed=seed,
                       labels={"role": label})
    return (await Runner(store, progress=False).run(config, resume=True)).run_id


async def main(args: argparse.Namespace) -> str:
    started, load = datetime.now(UTC), os.getloadavg()[0]
    env = REGISTRY.create("env", DEMO_ENV)
    tasks = {s: env.list_tasks(split=s, limit=n, seed=args.task_seed)
             for s, n in (("train", args.train), ("val", args.val), ("test", args.test))}
    wall: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        store = Store(f"sqlite:///{tmp / 'bench.db'}")
        t0 = time.perf_counter()
        ckpt = write_checkpoint(tmp / "base")
        gguf = write_gguf(ckpt, tmp / "base.gguf")
        wall["start model"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        method = RewardModelMethod(attempts=args.attempts, temperature=TEMPERATURE, max_length=384)
        result = await method.train(context(tmp, store, tasks, ckpt, gguf))
        wall["reward model (sampling, training, val pairs)"] = time.perf_counter() - t0
        x = result.extra
        print(f"reward model: {x['pairs']} train pairs, val accuracy {x['val_right']}/"
              f"{x['val_pairs']} [{x['val_low']:.2f}, {x['val_high']:.2f}]", flush=True)

        t0 = time.perf_counter()
        run = await sample(store, tasks["test"], gguf, args.attempts, TEMPERATURE, label="test")
        wall["test attempts"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        setup = JudgeSetup(judge=PluginRef(name="reward_model", args={"path": str(result.checkpoint)}),
                           model=PluginRef(name="local"))
        judged = await judge_run(store, run, setup)
        wall["judging"] = time.perf_counter() - t0
        picked, drawn = best_of_n(store, run), random_of_n(store, run, seed=0)
        rows = []
        for task, pick in picked.items():
            group = [t for t in store.iter_trajectories(run, with_steps=False, with_messages=False)
                     if t.task.hash() == task and t.outcome is not None and t.outcome.counts]
            wins = [bool(t.outcome and t.outcome.success) for t in sorted(group, key=lambda t: t.epoch)]
            rows.append((bool(pick.outcome and pick.outcome.success),
                         bool(drawn[task].outcome and drawn[task].outcome.success),
                         sum(wins) / len(wins), any(wins), wins[0]))
    n = len(rows)
    d = [rm - mean for rm, _, mean, _, _ in rows]
    mean_d = sum(d) / n
    sd = math.sqrt(sum((v - mean_d) ** 2 for v in d) / (n - 1)) if n > 1 else 0.0
    half = t_quantile(0.975, n - 1) * sd / math.sqrt(n) if n > 1 else math.inf
    both = sum(rm and rnd for rm, rnd, *_ in rows)
    rm_only = sum(rm and not rnd for rm, rnd, *_ in rows)
    rnd_only = sum(rnd and not rm for rm, rnd, *_ in rows)
    lo, hi = newcombe_interval(both, rm_only, rnd_only, n - both - rm_only - rnd_only)
    test = mcnemar(rm_only, rnd_only)
    beats = mean_d - half > 0
    names = ("RM pick", "random pick (seeded draw)", "random pick (expected)",
             "oracle (any attempt)", "first attempt")
    rate = {k: float(sum(r[i] for r in rows)) for i, k in enumerate(names)}
    above = x["val_low"] > 0.5
    page = [
        "# A reward model of the embedded model's code attempts: held-out pairs and best-of-N", "",
        f"`python benchmarks/reward_model.py --train {args.train} --val {args.val} --test {args.test} "
        f"--attempts {args.attempts} --task-seed {args.task_seed}` — protocol in the script's "
        f"docstring, fixed at commit {protocol_commit('reward_model.py')}; run {started:%Y-%m-%d %H:%M} "
        f"UTC, {cpu_name()}, {cores()} CPU(s), load average {load:.1f} at the start and "
        f"{os.getloadavg()[0]:.1f} at the end (the machine was shared); sharpen {version('sharpen')}, "
        f"trl {version('trl')}, transformers {version('transformers')}, torch {version('torch')}.", "",
        f"Reward model: {x['pairs']} verifier pairs from {result.samples} sampled episodes "
        f"(train and val), {x['steps']} optimiser steps. Wall: "
        + ", ".join(f"{k} {v:.0f} s" for k, v in wall.items()) + ".", "",
        "## Held-out pair accuracy", "",
        f"{x['val_right']} of {x['val_pairs']} val pairs ordered right: "
        f"{x['val_accuracy']:.1%}, Wilson 95% [{x['val_low']:.1%}, {x['val_high']:.1%}] — "
        f"{'above' if above else 'not above'} chance (0.5).", "",
        f"## Best-of-{args.attempts} on {n} held-out test tasks", "",
        f"Judged {judged.judged} attempts ({judged.errors} judge errors).", "",
        "| selection | tasks solved |", "|---|---|",
        *(f"| {k} | {v:.2f}/{n} = {v / n:.1%} |" for k, v in rate.items()), "",
        f"Primary (RM pick − random pick's expected success, per task): {100 * mean_d:+.1f} points, "
        f"95% t interval [{100 * (mean_d - half):+.1f}, {100 * (mean_d + half):+.1f}] — "
        f"**{'RM beats random' if beats else 'not shown better than random'}**.", "",
        f"Secondary (RM pick vs one seeded random draw): {rm_only} tasks only the RM pick solved, "
        f"{rnd_only} only the random one; difference {100 * (rm_only - rnd_only) / n:+.1f} points, "
        f"Newcombe 95% [{100 * lo:+.1f}, {100 * hi:+.1f}], exact McNemar p = {test.p_value:.3g}.",
    ]
    return "\n".join(page) + "\n"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", type=int, default=16)
    ap.add_argument("--val", type=int, default=16)
    ap.add_argument("--test", type=int, default=24)
    ap.add_argument("--attempts", type=int, default=4)
    ap.add_argument("--task-seed", type=int, default=21)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "reward_model.md")
    a = ap.parse_args()
    text = asyncio.run(main(a))
    a.out.parent.mkdir(exist_ok=True)
    a.out.write_text(text)
    print(text)
