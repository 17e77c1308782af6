"""How many of the embedded model's proposals are valid, free vs constrained (issue 19).

What runs
---------
* **Minibatch**: the code environment's first ``--tasks`` training tasks (generated, one
  submission, task seed 0), run once by the embedded model through sharpen's Runner
  (:class:`~sharpen.improvement.evaluate.Evaluator`) into a temporary SQLite store, with the
  seed spec of ``benchmarks/improve_vs_gepa.py`` (default instructions, temperature 0, 200
  tokens a reply, two steps). These real trajectories — their failures and the environment's
  feedback — are what every proposal context shows.
* **Proposers**: ``evolve`` (mutation only: ``merge_prob`` 0), ``opro``, ``best_of_n`` and
  ``guidelines``, each with its defaults, on the seed as parent (an archive of the seed alone),
  proposer sampling ``{"temperature": 0.7, "max_tokens": --max-tokens}`` as the engine passes
  it, ``reflection_tokens`` 1000.
* **Modes**, same contexts and RNG seeds (attempt ``i`` uses ``random.Random(i)`` in both):
  *free* — the model wrapped so that its ``structured_output`` is ``validate``, which sends the
  proposers down their fenced-text path (what every proposal took before structured output);
  *constrained* — the embedded model as is (``grammar``): the edit is asked for as JSON and
  sampling is constrained to its schema. The two modes alternate attempt by attempt, so the
  machine's load falls on both alike.
* **Valid**: the proposer returned a Proposal (no ``InvalidProposal``) whose spec differs from
  the parent — what the engine would go on to gate. Tokens are the usage every attempt was
  charged (re-asks included); seconds are wall time per proposal.

Run: ``python benchmarks/proposal_validity.py`` (defaults: 20 attempts of ``evolve`` and 10
of each other proposer per mode, ``--max-tokens 300``, stops starting new rounds after
``--budget-s 900`` seconds). Writes ``benchmarks/results/proposal_validity.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from machine_info import cores, cpu_name, version

from sharpen.core.agent_spec import AgentSpec, Limits
from sharpen.core.messages import Usage
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.core.trajectory import Trajectory
from sharpen.improvement.candidate import Archive, Candidate
from sharpen.improvement.evaluate import Evaluator
from sharpen.improvement.models import SharedModels
from sharpen.improvement.proposal import InvalidProposal, Proposal, ProposalContext, ProposerLLM
from sharpen.models.base import ChatModel, ModelWrapper
from sharpen.models.structured import StructuredOutput
from sharpen.store.store import Store

ROOT = Path(__file__).resolve().parent.parent
ENV = PluginRef(name="code", args={"source": "generated", "max_submissions": 1})
MODEL = PluginRef(name="local", args={"n_threads": 1})
PROPOSERS = ("evolve", "opro", "best_of_n", "guidelines")
MODES = ("free", "constrained")


class FreeModel(ModelWrapper):
    """The model as one that cannot constrain decoding: proposers take the fenced-text path."""

    @property
    def structured_output(self) -> StructuredOutput:
        return "validate"


@dataclass
class Tally:
    """What one (proposer, mode) cell counted."""

    attempts: int = 0
    valid: int = 0
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: list[float] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)
    texts: list[str] = field(default_factory=list)


def seed_candidate() -> Candidate:
    """The parent: the seed spec (default instructions) as the archive's only candidate."""
    spec = AgentSpec(name="seed", model=MODEL, params={"temperature": 0.0, "max_tokens": 200},
                     limits=Limits(max_steps=2))
    return Candidate(spec=spec, hash=spec.hash(), proposer="seed", iteration=0, val={"t0": 0.0})


async def run_minibatch(store: Store, models: SharedModels, n: int) -> list[Trajectory]:
    """The seed's trajectories on the first ``n`` training tasks."""
    tasks = REGISTRY.create("env", ENV).list_tasks(split="train", limit=n, seed=0)[:n]
    ev = Evaluator(store, ENV, seed=0, model_factory=models)
    return ev.trajectories(await ev.evaluate(seed_candidate().spec, tasks, "train"))


def reason_of(exc: InvalidProposal) -> str:
    """The kind of an invalid proposal, for the table (the message without its details; for
    a structured reply, whether it was cut at ``max_tokens``, not JSON, or off the schema)."""
    text = str(exc)
    kind = ""
    if ": The reply" in text:
        kind = (" (cut at max_tokens)" if "cut at max_tokens" in text
                else " (not JSON)" if "not valid JSON" in text else " (off the schema)")
    for cut in (": The reply", " (", ": '", ': "'):
        text = text.split(cut, 1)[0]
    return text[:90] + kind


async def attempt(name: str, model: ChatModel, minibatch: list[Trajectory], seed: int,
                  params: dict[str, Any], tally: Tally) -> None:
    """One proposal of ``name`` with RNG seed ``seed``, counted into ``tally``."""
    parent = seed_candidate()
    rng = random.Random(seed)
    usage: list[Usage] = []
    ctx = ProposalContext(parent=parent, minibatch=minibatch, archive=Archive(candidates=[parent]),
                          iteration=1, rng=rng, reflection_tokens=1000,
                          llm=ProposerLLM(model, params, usage.append, rng))
    proposer = REGISTRY.create("proposer", PluginRef(name=name, args={"merge_prob": 0.0}
                                                     if name == "evolve" else {}))
    start = time.perf_counter()
    proposal: Proposal | None = None
    try:
        proposal = await proposer.propose(ctx)
        if proposal.spec.hash() == parent.hash:
            raise InvalidProposal("the proposal does not change the parent")
    except InvalidProposal as exc:
        tally.reasons[reason_of(exc)] += 1
        proposal = None
    tally.seconds.append(time.perf_counter() - start)
    tally.attempts += 1
    total = sum(usage, Usage())
    tally.calls += total.calls
    tally.input_tokens += total.input_tokens
    tally.output_tokens += total.output_tokens
    if proposal is not None:
        tally.valid += 1
        tally.texts.append(proposal.change)


def pct(k: int, n: int) -> str:
    return f"{100 * k / n:.0f}%" if n else "–"


def report(args: argparse.Namespace, tallies: dict[tuple[str, str], Tally], minibatch: list[Trajectory],
           started: datetime, wall: float, load: tuple[tuple[float, ...], tuple[float, ...]]) -> str:
    """The results page (markdown)."""
    failed = sum(not (t.outcome and t.outcome.success) for t in minibatch)
    cmd = "python benchmarks/proposal_validity.py" + "".join(
        f" --{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "out" and v != DEFAULTS[k])
    lines = [
        "# Valid proposals of the embedded model: free vs constrained decoding",
        "",
        f"`{cmd}` — {started:%Y-%m-%d %H:%M} UTC, {wall / 60:.1f} min in all, {cores()} CPUs "
        f"({cpu_name()}), load average {load[0][0]:.1f} at the start and {load[1][0]:.1f} at the end "
        f"(the machine is shared), Python {sys.version.split()[0]}, llama-cpp-python "
        f"{version('llama-cpp-python')}.",
        "",
        f"Model: the embedded SmolLM2-135M (`local`, one thread) as proposer LLM, sampling "
        f"`{{\"temperature\": 0.7, \"max_tokens\": {args.max_tokens}}}`. Contexts: the seed spec "
        f"(default instructions) as parent, and its {len(minibatch)} trajectories ({failed} failed) on "
        f"the code environment's first {args.tasks} training tasks, run once by the same model "
        "through sharpen's Runner. Free = the fenced-text path (the model wrapped as `validate`); "
        "constrained = the JSON edit under the llama.cpp grammar. Same RNG seeds in both modes. "
        "Definitions are in the script's docstring.",
        "",
        "| proposer | attempts per mode | valid, free | valid, constrained | calls per proposal "
        "(free / constrained) | output tokens per proposal (free / constrained) | "
        "s per proposal, median (free / constrained) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in PROPOSERS:
        f, c = tallies[(name, "free")], tallies[(name, "constrained")]
        if not f.attempts:
            continue

        def per(t: Tally, v: int) -> str:
            return f"{v / t.attempts:.1f}" if t.attempts else "–"

        lines.append(
            f"| {name} | {f.attempts} / {c.attempts} | {f.valid} ({pct(f.valid, f.attempts)}) | "
            f"{c.valid} ({pct(c.valid, c.attempts)}) | {per(f, f.calls)} / {per(c, c.calls)} | "
            f"{per(f, f.output_tokens)} / {per(c, c.output_tokens)} | "
            f"{statistics.median(f.seconds):.1f} / "
            f"{statistics.median(c.seconds) if c.seconds else float('nan'):.1f} |")
    ev = tallies[("evolve", "constrained")]
    share = ev.valid / ev.attempts if ev.attempts else 0.0
    verdict = "**met**" if share >= 0.8 else "**not met**"
    lines += ["", "## Target", "",
              f"- `evolve` ≥ 80% valid in constrained mode: {verdict} ({ev.valid} of {ev.attempts}, "
              f"{pct(ev.valid, ev.attempts)}; free mode: {tallies[('evolve', 'free')].valid} of "
              f"{tallies[('evolve', 'free')].attempts}).",
              "", "## Why proposals were invalid", ""]
    for name in PROPOSERS:
        for mode in MODES:
            t = tallies[(name, mode)]
            if t.reasons:
                why = "; ".join(f"{k} ×{v}" for k, v in t.reasons.most_common())
                lines.append(f"- {name}, {mode}: {why}")
    lines += ["", "## First valid proposals (the change line)", ""]
    for name in PROPOSERS:
        for mode in MODES:
            for text in tallies[(name, mode)].texts[:2]:
                lines.append(f"- {name}, {mode}: {text}")
    return "\n".join(lines) + "\n"


DEFAULTS: dict[str, Any] = {"evolve_n": 20, "other_n": 10, "max_tokens": 300, "tasks": 3,
                            "budget_s": 900.0, "out": str(ROOT / "benchmarks" / "results" /
                                                          "proposal_validity.md")}


async def main(args: argparse.Namespace) -> None:
    started = datetime.now(UTC)
    load_start = os.getloadavg()
    t0 = time.perf_counter()
    models = SharedModels()
    tallies = {(n, m): Tally() for n in PROPOSERS for m in MODES}
    params = {"temperature": 0.7, "max_tokens": args.max_tokens}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            minibatch = await run_minibatch(Store(f"sqlite:///{Path(tmp) / 'runs.db'}"), models,
                                            args.tasks)
        print(f"minibatch: {[bool(t.outcome and t.outcome.success) for t in minibatch]} "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
        model = models.get(MODEL)
        variants = {"free": FreeModel(model), "constrained": model}
        for i in range(max(args.evolve_n, args.other_n)):
            if time.perf_counter() - t0 > args.budget_s:
                print(f"budget of {args.budget_s:.0f} s spent after {i} rounds", flush=True)
                break
            for name in PROPOSERS:
                if i >= (args.evolve_n if name == "evolve" else args.other_n):
                    continue
                for mode in MODES:
                    await attempt(name, variants[mode], minibatch, i, params, tallies[(name, mode)])
            print(f"round {i + 1}: " + ", ".join(
                f"{n} {tallies[(n, 'free')].valid}/{tallies[(n, 'constrained')].valid}"
                for n in PROPOSERS), f"({time.perf_counter() - t0:.0f} s)", flush=True)
    finally:
        await models.aclose()
    page = report(args, tallies, minibatch, started, time.perf_counter() - t0,
                  (load_start, os.getloadavg()))
    Path(args.out).write_text(page)
    print(page)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--evolve-n", type=int, default=DEFAULTS["evolve_n"],
                        help="attempts of evolve per mode")
    parser.add_argument("--other-n", type=int, default=DEFAULTS["other_n"],
                        help="attempts of each other proposer per mode")
    parser.add_argument("--max-tokens", type=int, default=DEFAULTS["max_tokens"])
    parser.add_argument("--tasks", type=int, default=DEFAULTS["tasks"],
                        help="training tasks in the minibatch")
    parser.add_argument("--budget-s", type=float, default=DEFAULTS["budget_s"],
                        help="no new round after this many seconds")
    parser.add_argument("--out", default=DEFAULTS["out"])
    asyncio.run(main(parser.parse_args()))
