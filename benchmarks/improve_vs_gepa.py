"""GEPA vs sharpen's ``evolve``: same environment, model, splits and rollout budget, one run
(issue 5's acceptance benchmark).

What runs
---------
* **Environment**: ``code`` with generated tasks (``source=generated``, one submission).
  Train, val and test come from the environment's own splits (``split_tasks``, disjoint).
* **Model**: the embedded model (SmolLM2-135M, ``local``) is the task model *and* the
  reflection LM of both optimizers, with the same sampling params.
* **Seed spec**: temperature 0, 200 tokens a reply, two steps; its one component,
  ``instructions``, is what both optimizers evolve.
* **sharpen**: the :class:`~sharpen.improvement.engine.Engine` with the ``evolve`` proposer
  (reflective mutation + merge), gate on the minibatch, validation, Pareto parents.
* **GEPA** (PyPI ``gepa``, ``gepa.optimize``) with its default reflection prompt, Pareto
  candidate selection, round-robin components and merge, through :class:`SharpenAdapter`:
  a ``GEPAAdapter`` whose ``evaluate`` runs a candidate through sharpen's
  :class:`~sharpen.improvement.evaluate.Evaluator` — the same Runner, seeds (one per task) and
  scoring as sharpen's side — and whose ``make_reflective_dataset`` gives GEPA the same
  trimmed traces (task, replies, environment feedback) within the same token budget.
* **Budget**: rollouts on train + val, the same number for both, with the same stopping
  rule: no new iteration once ``spent + 2 × minibatch`` would exceed it (GEPA through a
  stop callback that counts the rollouts the adapter actually ran; a (spec, task) pair is
  run once on each side and then cached, as sharpen's engine does).
* **Held out**: after both are done, the seed and each winner (best on validation) are
  scored on the test split with the same seeds, outside the budget, and each winner is
  compared with the seed by :func:`sharpen.stats.paired.compare_pair` (paired 95% interval).
* **Rollouts to best**: rollouts spent when the winner was accepted (the seed's own
  validation pass when nothing beat it). GEPA keeps the first of candidates with equal
  validation scores, so for it this is when its best score was first reached; sharpen keeps
  the later one, so for it this is the winner's own acceptance.

Target (issue 5): sharpen's held-out gain ≥ GEPA's, with at most half the rollouts to best.

Run: ``python benchmarks/improve_vs_gepa.py`` (defaults: train 10, val 8, test 20, budget
60 rollouts, minibatch 3); ``--train/--val/--test/--budget/--minibatch`` scale it.
Writes ``benchmarks/results/improve_vs_gepa.md`` (and ``.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from sharpen.core.agent_spec import AgentSpec, Limits
from sharpen.core.messages import Message, Usage
from sharpen.core.registry import PluginRef
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Trajectory
from sharpen.improvement.budget import Budget
from sharpen.improvement.engine import Engine, EngineConfig
from sharpen.improvement.evaluate import Evaluation, Evaluator
from sharpen.improvement.experiment import ExperimentConfig, split_tasks
from sharpen.improvement.models import SharedModels
from sharpen.improvement.proposal import CHARS_PER_TOKEN
from sharpen.improvement.proposers.evolve import EvolveProposer
from sharpen.improvement.proposers.rewrite import clip
from sharpen.models.base import ChatModel
from sharpen.stats.paired import PairedComparison, compare_pair
from sharpen.stats.taskdata import TaskTable
from sharpen.store.aggregate import run_aggregate
from sharpen.store.store import Store

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
ENV = PluginRef(name="code", args={"source": "generated", "max_submissions": 1})
COMPONENT = "instructions"


def model_ref(threads: int) -> PluginRef:
    """The embedded model. One llama.cpp thread by default: on a shared two-core machine
    two threads spin on each other and run an order of magnitude slower."""
    return PluginRef(name="local", args={"n_threads": threads})


def seed_spec(threads: int) -> AgentSpec:
    """The starting spec of both optimizers."""
    return AgentSpec(name="seed", model=model_ref(threads), params={"temperature": 0.0, "max_tokens": 200},
                     limits=Limits(max_steps=2))


def _first_user(t: Trajectory) -> str:
    return next((m.content for m in t.messages if m.role == "user"), "") or ""


class SharpenAdapter:
    """A ``gepa.GEPAAdapter`` that plays a GEPA candidate (component name → text) as the seed
    spec with those components, through sharpen's Evaluator on the event loop ``loop``
    (GEPA runs in a worker thread and waits on it). Counts the rollouts it really ran and
    records a curve point (rollouts, best validation score) after each validation pass."""

    propose_new_texts = None

    def __init__(self, seed: AgentSpec, evaluator: Evaluator, loop: asyncio.AbstractEventLoop,
                 val: list[TaskSpec], reflection_tokens: int) -> None:
        self.seed = seed
        self.evaluator = evaluator
        self.loop = loop
        self.val_ids = sorted(t.hash() for t in val)
        self.reflection_tokens = reflection_tokens
        self.rollouts = 0
        self.usage = Usage()
        self.curve: list[tuple[int, float]] = []

    def spec(self, candidate: dict[str, str]) -> AgentSpec:
        """The AgentSpec a GEPA candidate stands for."""
        return self.seed.model_copy(update={"components": dict(candidate), "parents": []})

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def evaluate(self, batch: list[TaskSpec], candidate: dict[str, str], capture_traces: bool = False):
        from gepa.core.adapter import EvaluationBatch

        # GEPA pads a minibatch with repeats; each distinct task is played once, as sharpen does
        unique = list({t.hash(): t for t in batch}.values())
        ev: Evaluation = self._run(self.evaluator.evaluate(self.spec(candidate), unique, "gepa"))
        self.rollouts += ev.new_rollouts
        self.usage = self.usage + ev.new_usage
        where = {t.hash(): i for i, t in enumerate(unique)}
        index = [where[t.hash()] for t in batch]
        scores = [float(ev.records[i].success) for i in index]
        if sorted(t.hash() for t in batch) == self.val_ids:  # a full validation pass
            best = max([s for _, s in self.curve] + [sum(scores) / len(scores)])
            self.curve.append((self.rollouts, best))
        trajectories = None
        if capture_traces:
            played = self.evaluator.trajectories(ev)
            trajectories = [played[i] for i in index]
        return EvaluationBatch(outputs=[ev.records[i].trajectory_id for i in index], scores=scores,
                               trajectories=trajectories)

    def make_reflective_dataset(self, candidate: dict[str, str], eval_batch: Any,
                                components_to_update: list[str]) -> dict[str, list[dict[str, str]]]:
        """One record per trace (GEPA's Inputs / Generated Outputs / Feedback), failures
        first, each within an equal share of ``reflection_tokens``."""
        trajs = sorted(eval_batch.trajectories or [], key=lambda t: bool(t.outcome and t.outcome.success))
        share = self.reflection_tokens * CHARS_PER_TOKEN // max(1, len(trajs)) // 3
        records = []
        for t in trajs:
            replies = [m.content or "" for s in t.steps for m in s.messages if m.role == "assistant"]
            observations = [s.observation or "" for s in t.steps]
            verdict = "SUCCESS" if t.outcome and t.outcome.success else "FAILURE"
            records.append({
                "Inputs": clip(_first_user(t).strip(), share),
                "Generated Outputs": clip("\n".join(replies).strip(), share),
                "Feedback": clip(f"{verdict}. " + "\n".join(observations).strip(), share),
            })
        return {name: records for name in components_to_update}


class ReflectionLM:
    """GEPA's reflection LM (``str -> str``): the same model and sampling params as
    sharpen's proposer, seeded from ``rng``; usage is counted."""

    def __init__(self, model: ChatModel, params: dict[str, Any], loop: asyncio.AbstractEventLoop,
                 rng: random.Random) -> None:
        self.model, self.params, self.loop, self.rng = model, params, loop, rng
        self.usage = Usage()
        self.calls = 0
        self.cut = 0

    def __call__(self, prompt: str | list[dict[str, Any]]) -> str:
        text = prompt if isinstance(prompt, str) else "\n".join(str(m.get("content")) for m in prompt)
        call = {**self.params, "seed": self.rng.randrange(2**31)}
        done = asyncio.run_coroutine_threadsafe(
            self.model.complete([Message(role="user", content=text)], None, call), self.loop).result()
        self.usage = self.usage + done.usage
        self.calls += 1
        self.cut += done.finish_reason == "length"
        return done.message.content or ""


class _Log:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def log(self, message: str) -> None:
        print(f"{self.prefix} {message}", flush=True)


def _to_best(curve: list[tuple[int, float]], best: float) -> int:
    return next((r for r, s in curve if s >= best), curve[-1][0] if curve else 0)


async def run_gepa(args, tasks, store: Store, models: SharedModels, rng_seed: int) -> dict[str, Any]:
    """GEPA on train/val through :class:`SharpenAdapter`; its winner and account."""
    import gepa

    loop = asyncio.get_running_loop()
    evaluator = Evaluator(store, ENV, seed=args.seed, model_factory=models,
                          labels={"bench": "improve_vs_gepa", "role": "improve:gepa"})
    adapter = SharpenAdapter(seed_spec(args.threads), evaluator, loop, tasks["val"], args.reflection_tokens)
    lm = ReflectionLM(models.get(model_ref(args.threads)), args.proposer_params, loop,
                      random.Random(rng_seed))
    m = args.minibatch

    def stop(state: Any) -> bool:
        return adapter.rollouts + 2 * m > args.budget or state.i + 1 >= args.max_iterations

    result = await asyncio.to_thread(
        gepa.optimize, seed_candidate=dict(seed_spec(args.threads).components), trainset=tasks["train"],
        valset=tasks["val"], adapter=adapter, reflection_lm=lm, reflection_minibatch_size=m,
        candidate_selection_strategy="pareto", module_selector="round_robin", use_merge=True,
        stop_callbacks=stop, logger=_Log("[gepa]"), seed=rng_seed, raise_on_exception=True,
    )
    winner = adapter.spec(result.best_candidate)
    val_best = float(result.val_aggregate_scores[result.best_idx])
    return {
        "name": "GEPA", "winner": winner, "val": val_best, "rollouts": adapter.rollouts,
        "to_best": _to_best(adapter.curve, val_best), "candidates": len(result.candidates),
        "proposals": lm.calls, "invalid": f"{lm.cut} cut at max_tokens (adopted as is)",
        "tokens": adapter.usage.total_tokens + lm.usage.total_tokens,
    }


async def run_evolve(args, tasks, store: Store, models: SharedModels, folder: Path) -> dict[str, Any]:
    """sharpen's engine with ``evolve`` on train/val; its winner and account."""
    config = EngineConfig(budget=Budget(rollouts=args.budget), minibatch=args.minibatch,
                          reflection_tokens=args.reflection_tokens, proposer_params=args.proposer_params,
                          max_iterations=args.max_iterations, seed=args.seed)
    evaluator = Evaluator(store, ENV, seed=args.seed, model_factory=models,
                          labels={"bench": "improve_vs_gepa", "role": "improve:evolve"})
    engine = Engine(proposer=EvolveProposer(), proposer_name="evolve", seed_spec=seed_spec(args.threads),
                    train=tasks["train"], val=tasks["val"], evaluator=evaluator,
                    proposer_model=models.get(model_ref(args.threads)), config=config,
                    checkpoint=folder / "evolve.json",
                    on_event=lambda msg: print(f"[evolve] {msg}", flush=True))
    s = await engine.run()
    best = s.archive.best()
    a = s.account
    return {
        "name": "sharpen evolve", "winner": best.spec, "val": best.val_score, "rollouts": s.spend.rollouts,
        "to_best": s.rollouts_to(best),
        "candidates": len(s.archive.candidates), "proposals": a.proposals + a.invalid,
        "invalid": f"{a.invalid} rejected before any rollout", "tokens": s.spend.tokens,
    }


def _table(store: Store, ev: Evaluation) -> TaskTable:
    (run_id,) = {r.run_id for r in ev.records}
    return TaskTable.from_aggregate(run_aggregate(store, run_id))


async def main(args: argparse.Namespace) -> dict[str, Any]:
    try:  # before the long sharpen half, not after it
        import gepa  # noqa: F401
    except ImportError:
        raise SystemExit("this benchmark needs the gepa package: pip install 'sharpen[bench]'") from None
    started, load0 = time.time(), os.getloadavg()
    cfg = ExperimentConfig(env=ENV, seed_spec=seed_spec(args.threads), train=args.train, val=args.val,
                           test=args.test, task_seed=args.task_seed)
    tasks = split_tasks(ENV, cfg)
    folder = Path(args.dir or tempfile.mkdtemp(prefix="improve_vs_gepa-"))
    folder.mkdir(parents=True, exist_ok=True)
    store = Store(f"sqlite:///{folder / 'store.db'}")
    models = SharedModels()
    try:
        t0 = time.time()
        evolve = await run_evolve(args, tasks, store, models, folder)
        evolve["wall_s"] = time.time() - t0
        t0 = time.time()
        gepa_ = await run_gepa(args, tasks, store, models, args.seed)
        gepa_["wall_s"] = time.time() - t0
        tester = Evaluator(store, ENV, seed=args.seed, model_factory=models,
                           labels={"bench": "improve_vs_gepa", "role": "test"})
        print(f"scoring the seed and both winners on {len(tasks['test'])} test tasks", flush=True)
        base = await tester.evaluate(seed_spec(args.threads), tasks["test"], "test")
        base_table = _table(store, base)
        for side in (evolve, gepa_):
            ev = await tester.evaluate(side["winner"], tasks["test"], "test")
            side["test"] = ev.successes / len(tasks["test"])
            side["cmp"] = compare_pair(base_table, _table(store, ev), np.random.default_rng(args.seed),
                                       label_a="seed", label_b=side["name"])
    finally:
        await models.aclose()
    return {"args": args, "tasks": tasks, "evolve": evolve, "gepa": gepa_,
            "seed_test": base.successes / len(tasks["test"]), "wall_s": time.time() - started,
            "load": (load0, os.getloadavg()), "date": datetime.now(UTC), "folder": folder}


def _gain(c: PairedComparison) -> str:
    if c.difference is None or c.ci is None:
        return "n/a"
    return f"{100 * c.difference:+.1f} [{100 * c.ci.low:+.1f}, {100 * c.ci.high:+.1f}]"


def _gain_value(c: PairedComparison) -> float:
    return c.difference if c.difference is not None else 0.0


def render(out: dict[str, Any], command: str) -> str:
    """The markdown report."""
    a, ev, gp = out["args"], out["evolve"], out["gepa"]
    (l0, l1) = out["load"]
    lines = [
        "# Reflective prompt evolution: sharpen `evolve` vs GEPA",
        "",
        f"`{command}` — {out['date']:%Y-%m-%d %H:%M} UTC, {out['wall_s'] / 60:.1f} min in all, "
        f"{os.cpu_count()} CPUs, load average {l0[0]:.1f} at the start and {l1[0]:.1f} at the end "
        f"(the machine is shared), Python {platform.python_version()}, "
        f"gepa {metadata.version('gepa')}, sharpen {metadata.version('sharpen')}.",
        "",
        f"Environment `code` (generated tasks, one submission); model: the embedded SmolLM2-135M "
        f"(`local`) as task model and as reflection LM of both, proposer sampling "
        f"`{json.dumps(a.proposer_params)}`; seed spec temperature 0, 200 tokens, 2 steps. Splits: "
        f"{a.train} train / {a.val} val / {a.test} test tasks (task seed {a.task_seed}); budget "
        f"{a.budget} rollouts on train + val each, minibatch {a.minibatch}, traces within "
        f"{a.reflection_tokens} tokens per reflection prompt. Test is scored outside the budget, "
        f"same seeds for every spec. Definitions are in the script's docstring.",
        "",
        f"Seed spec on test: {100 * out['seed_test']:.1f}%.",
        "",
        "| optimizer | rollouts used | rollouts to best | candidates kept | LLM proposals | invalid "
        "| tokens | wall | best val | test | held-out gain vs seed, pts [95% CI] | p |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in (ev, gp):
        c = s["cmp"]
        lines.append(
            f"| {s['name']} | {s['rollouts']} | {s['to_best']} | {s['candidates']} | {s['proposals']} "
            f"| {s['invalid']} | {s['tokens']:,} | {s['wall_s'] / 60:.1f} min | {100 * s['val']:.1f}% "
            f"| {100 * s['test']:.1f}% | {_gain(c)} | {c.p_value:.3f} |")
    gain_ok = _gain_value(ev["cmp"]) >= _gain_value(gp["cmp"])
    half_ok = 2 * ev["to_best"] <= gp["to_best"]
    # A significant loss is a real difference too: only say "noise" when neither side has one.
    real = [s["name"] for s in (ev, gp) if s["cmp"].significant]
    caveat = ("" if real else "; neither gain is distinguishable from zero, so this compares noise")
    lines += [
        "",
        "## Target",
        "",
        f"- sharpen's held-out gain ≥ GEPA's: **{'met' if gain_ok else 'not met'}** "
        f"({_gain(ev['cmp'])} vs {_gain(gp['cmp'])} points{caveat}).",
        f"- with at most half the rollouts to best: **{'met' if half_ok else 'not met'}** "
        f"({ev['to_best']} vs {gp['to_best']}).",
        f"- Verdicts: sharpen — {ev['cmp'].verdict}; GEPA — {gp['cmp'].verdict}.",
        "",
        "## Winners",
        "",
    ]
    for s in (ev, gp):
        text = s["winner"].components.get(COMPONENT, "")
        lines += [f"**{s['name']}** (`{s['winner'].hash()[:8]}`):", "", "```text", text, "```", ""]
    return "\n".join(lines)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train", type=int, default=10)
    p.add_argument("--val", type=int, default=8)
    p.add_argument("--test", type=int, default=20)
    p.add_argument("--budget", type=int, default=60, help="rollouts on train + val, each optimizer")
    p.add_argument("--minibatch", type=int, default=3)
    p.add_argument("--reflection-tokens", type=int, default=1000)
    p.add_argument("--max-tokens", type=int, default=300, help="of each reflection reply")
    p.add_argument("--max-iterations", type=int, default=60)
    p.add_argument("--threads", type=int, default=1, help="llama.cpp threads of the embedded model")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--task-seed", type=int, default=0)
    p.add_argument("--dir", help="work folder (store, checkpoint); default a new temp folder")
    p.add_argument("--out", type=Path, default=RESULTS / "improve_vs_gepa.md")
    args = p.parse_args(argv)
    args.proposer_params = {"temperature": 0.7, "max_tokens": args.max_tokens}
    return args


if __name__ == "__main__":
    args = parse()
    out = asyncio.run(main(args))
    command = "python benchmarks/improve_vs_gepa.py " + " ".join(sys.argv[1:])
    report = render(out, command.strip())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report + "\n")
    summary = {k: {kk: (vv.model_dump(mode="json") if hasattr(vv, "model_dump") else vv)
                   for kk, vv in out[k].items() if kk != "winner"} for k in ("evolve", "gepa")}
    args.out.with_suffix(".json").write_text(json.dumps(
        {"seed_test": out["seed_test"], **summary, "winners": {
            k: out[k]["winner"].model_dump(mode="json") for k in ("evolve", "gepa")}}, indent=2, default=str))
    print(report)
