"""``check_proposer``: does a proposer keep the
:class:`~sharpen.improvement.proposal.Proposer` contract?

Checks:

- ``build`` — the registry builds it (the contract's members present);
- ``propose`` — on a tiny :class:`ProposalContext` (one seed candidate, one failed training
  trajectory) it returns a :class:`Proposal` whose spec differs from the parent and from
  every spec already tried, with a one-line ``change`` — or raises
  :class:`InvalidProposal` / :class:`NothingToPropose`, which the engine handles;
- ``observe`` — ``observe(parent, proposal, accepted)`` returns;
- ``state`` — ``state()`` is a JSON-serialisable dict;
- ``load-state`` — a fresh proposer given ``load_state(state())`` reports the same state.

A proposer that writes with an LLM needs ``model``; without one, its first call raises
:class:`ModelNeeded`, a :class:`UserError` saying to pass one.
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

from sharpen.checks.report import CheckReport, explain, plugin_ref
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import UserError
from sharpen.core.messages import Message, ToolSpec, Usage
from sharpen.core.outcome import Outcome
from sharpen.core.registry import REGISTRY, PluginRef, Registry
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action, Step, Trajectory
from sharpen.improvement.candidate import Archive, Candidate
from sharpen.improvement.proposal import (
    PROPOSER,
    InvalidProposal,
    NothingToPropose,
    Proposal,
    ProposalContext,
    ProposerLLM,
)
from sharpen.models.base import MODEL, BaseChatModel, ChatModel, Completion
from sharpen.models.structured import ResponseSchema

PROPOSER_PARAMS = {"temperature": 0.7, "max_tokens": 512}
"""Sampling parameters of the proposer's LLM in the tiny context."""


class ModelNeeded(UserError):
    """The checked proposer asked its LLM, and no model was given."""


class NoProposerModel(BaseChatModel):
    """The LLM of a context checked without a model: a call is :class:`ModelNeeded`."""

    name = "none"

    async def complete(self, messages: list[Message], tools: list[ToolSpec] | None = None,
                       params: dict[str, Any] | None = None, *,
                       response_schema: ResponseSchema | None = None) -> Completion:
        raise ModelNeeded("this proposer asks an LLM, and no model was given",
                          "pass model= (CLI: --model NAME, e.g. --model openai --base-url URL)")


def failed_trajectory() -> Trajectory:
    """One failed training episode of a tiny code task, as a proposer's minibatch holds."""
    code = "def add(a, b):\n    return a - b\n"
    report = "0/1 tests passed.\nFailed:\n- `assert add(1, 2) == 3`: returned -1"
    task = TaskSpec(env="code", id="check/add", split="train")
    step = Step(index=0, messages=[Message(role="assistant", content=f"```python\n{code}```"),
                                   Message(role="user", content=report)],
                action=Action(tool="submit", arguments={"code": code}), observation=report,
                terminated=True)
    prompt = Message(role="user", content="Write add(a, b) that returns the sum of a and b.")
    return Trajectory(run_id="check", task=task, agent_hash="check", messages=[prompt, *step.messages],
                      steps=[step], outcome=Outcome(success=False, evidence=report))


def tiny_context(model: ChatModel, seed: int = 0) -> ProposalContext:
    """A proposal context with one seed candidate and one failed trajectory, asking ``model``."""
    spec = AgentSpec(name="seed")
    parent = Candidate(spec=spec, hash=spec.hash(), proposer="seed", val={"t0": 0.0, "t1": 1.0})
    rng = random.Random(seed)
    charged: list[Usage] = []
    return ProposalContext(parent=parent, minibatch=[failed_trajectory()],
                           archive=Archive(candidates=[parent]), tried={parent.hash}, iteration=1,
                           rng=rng, llm=ProposerLLM(model, PROPOSER_PARAMS, charged.append, rng))


def _proposal_faults(p: object, ctx: ProposalContext) -> list[str]:
    if not isinstance(p, Proposal):
        return [f"propose() returned {type(p).__name__}, not Proposal: return "
                "Proposal(spec=child, change='what changed')"]
    out = []
    if p.spec.hash() == ctx.parent.spec.hash():
        out.append("the proposed spec is the parent unchanged: change a component, the params "
                   "or the agent, or raise NothingToPropose")
    elif p.spec.hash() in ctx.tried:
        out.append("the proposed spec was already tried (its hash is in ctx.tried): propose "
                   "something new, or raise NothingToPropose")
    if not p.change.strip():
        out.append("change is empty: say in one line what the child changes")
    return out


def _dumps(state: object) -> str:
    return json.dumps(state, sort_keys=True)


async def acheck_proposer(
    proposer: str | PluginRef | dict[str, Any], *, args: dict[str, Any] | None = None,
    model: str | PluginRef | dict[str, Any] | None = None, context: ProposalContext | None = None,
    registry: Registry = REGISTRY, seed: int = 0,
) -> CheckReport:
    """Check the proposer ``proposer`` (name, reference or ``{name, args}``; ``args`` merged
    over its own) on ``context`` — by default :func:`tiny_context` asking ``model`` (a model
    name or ``{name, args}``; none given: a proposer that asks its LLM raises
    :class:`ModelNeeded`). Never raises for a failed check."""
    ref = plugin_ref(proposer, args)
    r = CheckReport(kind="proposer", name=ref.name)
    try:
        built = registry.create(PROPOSER, ref)
    except Exception as exc:  # noqa: BLE001 — every failure becomes a problem
        r.fail("build", f"cannot build the proposer: {explain(exc)}")
        return r
    r.pass_("build", f"{type(built).__qualname__} meets the Proposer contract")
    chat: ChatModel = NoProposerModel()
    if context is None and model is not None:
        try:
            chat = registry.create(MODEL, plugin_ref(model, None))
        except Exception as exc:  # noqa: BLE001
            r.fail("propose", f"cannot build the model: {explain(exc)}")
            return r
    ctx = context or tiny_context(chat, seed)
    try:
        await _propose(built, ctx, r)
    finally:
        await chat.aclose()
    _state(registry, ref, built, r)
    return r


async def _propose(built: Any, ctx: ProposalContext, r: CheckReport) -> None:
    try:
        proposal = await built.propose(ctx)
    except ModelNeeded:
        raise
    except NothingToPropose as exc:
        r.pass_("propose", f"raised NothingToPropose ({exc})")
        return
    except InvalidProposal as exc:
        r.pass_("propose", f"raised InvalidProposal, which the engine retries ({exc})")
        return
    except Exception as exc:  # noqa: BLE001
        r.fail("propose", f"propose() raised {explain(exc)}; raise InvalidProposal for a reply "
               "that cannot be used, NothingToPropose when nothing is left")
        return
    faults = _proposal_faults(proposal, ctx)
    for fault in faults:
        r.fail("propose", fault)
    if faults:
        return
    r.pass_("propose", f"a new child: {proposal.change}")
    try:
        built.observe(ctx.parent, proposal, False)
    except Exception as exc:  # noqa: BLE001
        r.fail("observe", f"observe() raised {explain(exc)}")
    else:
        r.pass_("observe", "returns")


def _state(registry: Registry, ref: PluginRef, built: Any, r: CheckReport) -> None:
    try:
        state = built.state()
        text = _dumps(state)
    except Exception as exc:  # noqa: BLE001
        r.fail("state", f"state() is not JSON-serialisable: {explain(exc)}; keep it to str, "
               "number, bool, list and dict (the engine's checkpoint is JSON)")
        return
    if not isinstance(state, dict):
        r.fail("state", f"state() returned {type(state).__name__}: return a dict")
        return
    r.pass_("state", f"a JSON-serialisable dict ({len(text)} characters)")
    try:
        fresh = registry.create(PROPOSER, ref)
        fresh.load_state(json.loads(text))
        again = _dumps(fresh.state())
    except Exception as exc:  # noqa: BLE001
        r.fail("load-state", f"load_state(state()) on a fresh proposer raised {explain(exc)}")
        return
    if again != text:
        r.fail("load-state", f"a fresh proposer given load_state(state()) reports state {again[:120]} "
               f"instead of {text[:120]}: load_state must restore everything state() returns")
    else:
        r.pass_("load-state", "load_state(state()) round-trips")


def check_proposer(
    proposer: str | PluginRef | dict[str, Any], *, args: dict[str, Any] | None = None,
    model: str | PluginRef | dict[str, Any] | None = None, context: ProposalContext | None = None,
    registry: Registry = REGISTRY, seed: int = 0,
) -> CheckReport:
    """:func:`acheck_proposer` from synchronous code."""
    return asyncio.run(acheck_proposer(proposer, args=args, model=model, context=context,
                                       registry=registry, seed=seed))
