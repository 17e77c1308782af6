"""Record tests/cassettes/improve_proposers.jsonl: the embedded model (SmolLM2) as agent and
as proposer LLM for the ``evolve``, ``opro`` and ``best_of_n`` proposers.
tests/test_improve_proposers.py replays it; the scenarios below are shared by both, so a
replay makes exactly the recorded requests.

    .venv/bin/python tests/record_improve_proposers_cassette.py   # ~15 minutes on two busy cores

Re-record after any change to the proposers' prompts, the engine's order of RNG draws, the
code environment's prompts or the tool agent (a replay of a changed request fails with
CassetteMissError, which names this fix).
"""

from __future__ import annotations

import asyncio
import random
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sharpen.core.agent_spec import AgentSpec, Limits
from sharpen.core.messages import Message, ToolSpec, Usage
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Trajectory
from sharpen.improvement.budget import Budget
from sharpen.improvement.candidate import Archive, Candidate
from sharpen.improvement.engine import EngineConfig
from sharpen.improvement.evaluate import Evaluator
from sharpen.improvement.experiment import Experiment, ExperimentConfig, ExperimentResult
from sharpen.improvement.models import SharedModels
from sharpen.improvement.proposal import InvalidProposal, Proposal, ProposalContext, ProposerLLM, Rejection
from sharpen.models.base import ChatModel, Completion
from sharpen.store.store import Store

CASSETTE = Path(__file__).resolve().parent / "cassettes" / "improve_proposers.jsonl"
ENV = PluginRef(name="code", args={"source": "generated", "max_submissions": 1})
PROPOSER_PARAMS = {"temperature": 0.7, "max_tokens": 200}
TRIES = 8
"""Proposals tried (RNG seeds 0, 1, ...) until the model gives a valid one."""
REJECTED_CHANGE = "evolve instructions: “Always write the unit tests before the function.”"
"""The change in the rejection log the unit scenarios hand the proposers."""
OPRO_TEXTS = [  # (instructions, validation score): the seed's text comes first, at 0.0
    ("Read the task twice. Follow every step in the docstring, in order, and return the result.", 0.5),
    ("Write short, simple code. Check your function against the examples in the docstring.", 0.25),
]


def model_ref(mode: str) -> PluginRef:
    """The replay model of the cassette (``mode="record"`` records from the local model)."""
    args: dict[str, Any] = {"cassette": str(CASSETTE), "mode": mode, "latency_s": 0}
    if mode == "record":  # one thread: on a busy two-core machine two threads run ~15× slower
        args["inner"] = {"name": "local", "args": {"n_threads": 1}}
    return PluginRef(name="replay", args=args)


def seed_spec(mode: str) -> AgentSpec:
    """The fast seed spec (one submission, two steps, 200 tokens a reply)."""
    return AgentSpec(name="seed", model=model_ref(mode), params={"temperature": 0.0, "max_tokens": 200},
                     limits=Limits(max_steps=2))


class PromptLog:
    """A ChatModel that forwards to ``inner`` and keeps every request's messages and params
    in ``log``."""

    def __init__(self, inner: ChatModel, log: list[tuple[list[Message], dict[str, Any]]]) -> None:
        self.inner = inner
        self.log = log
        self.name = inner.name
        self.supports_tools = inner.supports_tools

    async def complete(self, messages: list[Message], tools: list[ToolSpec] | None = None,
                       params: dict[str, Any] | None = None) -> Completion:
        self.log.append((list(messages), dict(params or {})))
        return await self.inner.complete(messages, tools, params)

    async def aclose(self) -> None:
        await self.inner.aclose()


class LoggedModels(SharedModels):
    """Shared models whose every request (agent and proposer alike) lands in ``log``."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[list[Message], dict[str, Any]]] = []

    def get(self, ref: PluginRef) -> ChatModel:
        return PromptLog(super().get(ref), self.log)


def train_tasks(n: int = 2) -> list[TaskSpec]:
    """The first ``n`` training tasks of the code environment (seed 0)."""
    return REGISTRY.create("env", ENV).list_tasks(split="train", limit=n, seed=0)[:n]


async def minibatch(mode: str, store: Store, models: SharedModels) -> list[Trajectory]:
    """The seed spec's trajectories on :func:`train_tasks`, run into ``store``."""
    ev = Evaluator(store, ENV, seed=0, model_factory=models)
    return ev.trajectories(await ev.evaluate(seed_spec(mode), train_tasks(), "train"))


def candidate(spec: AgentSpec, score: float, iteration: int, proposer: str = "seed") -> Candidate:
    """An archived candidate with validation score ``score`` over four made-up task keys."""
    wins = round(4 * score)
    return Candidate(spec=spec, hash=spec.hash(), proposer=proposer, iteration=iteration,
                     val={f"t{i}": float(i < wins) for i in range(4)})


def opro_archive(mode: str) -> Archive:
    """Seed (0%), then two children with the texts of :data:`OPRO_TEXTS`."""
    seed = candidate(seed_spec(mode), 0.0, 0)
    out = [seed]
    for i, (text, score) in enumerate(OPRO_TEXTS, 1):
        spec = seed.spec.model_copy(update={"components": {"instructions": text}, "parents": [seed.hash]})
        out.append(candidate(spec, score, i, "opro"))
    return Archive(candidates=out)


def context(mode: str, model: ChatModel, trajectories: list[Trajectory], archive: Archive,
            parent: Candidate, seed: int) -> ProposalContext:
    """A proposal context on the recorded minibatch, with one rejection in the log."""
    rng = random.Random(seed)
    usage: list[Usage] = []
    return ProposalContext(
        parent=parent, minibatch=trajectories, archive=archive, iteration=1, rng=rng,
        rejected=[Rejection(child_hash="0" * 16, change=REJECTED_CHANGE, parent_successes=0,
                            child_successes=0, minibatch=len(trajectories))],
        llm=ProposerLLM(model, PROPOSER_PARAMS, usage.append, rng), reflection_tokens=900,
    )


async def first_valid(proposer: Any, make_ctx: Callable[[int], ProposalContext],
                      ) -> tuple[Proposal, ProposalContext, list[str]]:
    """The first valid proposal over seeds 0..TRIES-1, its context, and the reasons the
    earlier ones were invalid."""
    reasons = []
    for seed in range(TRIES):
        ctx = make_ctx(seed)
        try:
            return await proposer.propose(ctx), ctx, reasons
        except InvalidProposal as exc:
            reasons.append(str(exc))
    raise AssertionError(f"no valid proposal in {TRIES} tries: {reasons}")


def unit_cases(mode: str, trajectories: list[Trajectory], model: ChatModel
               ) -> dict[str, tuple[Any, Callable[[int], ProposalContext]]]:
    """Proposer and context factory of each unit scenario (evolve, opro, best_of_n)."""
    seed = candidate(seed_spec(mode), 0.0, 0)
    solo = Archive(candidates=[seed])
    arch = opro_archive(mode)
    return {
        "evolve": (REGISTRY.create("proposer", PluginRef(name="evolve")),
                   lambda s: context(mode, model, trajectories, solo, seed, s)),
        # the engine's parent (the 25% one) is not the best: opro must build on the best
        "opro": (REGISTRY.create("proposer", PluginRef(name="opro")),
                 lambda s: context(mode, model, trajectories, arch, arch.candidates[2], s)),
        "best_of_n": (REGISTRY.create("proposer", PluginRef(name="best_of_n")),
                      lambda s: context(mode, model, trajectories, solo, seed, s)),
    }


def experiment_config(mode: str) -> ExperimentConfig:
    """``evolve`` with ``opro`` and ``best_of_n`` as baselines, on a tiny budget."""
    return ExperimentConfig(
        env=ENV, seed_spec=seed_spec(mode), proposer=PluginRef(name="evolve"),
        baselines=[PluginRef(name="opro"), PluginRef(name="best_of_n")],
        engine=EngineConfig(budget=Budget(rollouts=10), minibatch=2, max_invalid=1, max_idle=2,
                            max_iterations=2, reflection_tokens=900, proposer_params=PROPOSER_PARAMS),
        train=3, val=2, test=2,
    )


async def experiment(mode: str, store: Store, folder: Path, models: LoggedModels,
                     on_event: Callable[[str], None] | None = None) -> ExperimentResult:
    """Run :func:`experiment_config` into ``store`` (checkpoints under ``folder``)."""
    return await Experiment(experiment_config(mode), store, folder, models=models, on_event=on_event).run()


async def main() -> None:
    CASSETTE.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{Path(tmp) / 'record.db'}")
        models = LoggedModels()
        try:
            trajectories = await minibatch("record", store, models)
            model = models.get(model_ref("record"))
            for name, (proposer, make_ctx) in unit_cases("record", trajectories, model).items():
                proposal, _, reasons = await first_valid(proposer, make_ctx)
                print(f"{name}: {proposal.change} (after {len(reasons)} invalid: {reasons})", flush=True)
            result = await experiment("record", store, Path(tmp) / "exp", models,
                                      on_event=lambda m: print(m, flush=True))
        finally:
            await models.aclose()
        for r in result.results:
            print(r.proposer.name, r.stop_reason, r.account.model_dump(), r.test_score)
    print(f"recorded {sum(1 for _ in CASSETTE.open())} calls to {CASSETTE}", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
