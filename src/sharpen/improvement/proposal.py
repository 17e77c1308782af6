"""The proposer side of the engine: what a proposer sees, what it returns, and the checks
every proposal passes before a single rollout is spent on it.

A :class:`Proposer` gets a :class:`ProposalContext` — the parent, its trajectories on a
*training* minibatch (never validation or test tasks), the rejection log of that parent, the
archive, a seeded RNG and a :class:`ProposerLLM` — and returns a :class:`Proposal`: a child
AgentSpec plus one line saying what changed. The engine gates, evaluates and archives it.

Text a proposer gets from its LLM goes through :meth:`ProposerLLM.ask`, which raises
:class:`InvalidProposal` for output that was cut at ``max_tokens`` (:class:`CutReply`), holds ``<think>``
reasoning, is empty, or is longer than the component limit. The engine retries an invalid
proposal (up to ``max_invalid`` times) without spending rollouts, and charges its tokens.

A proposer whose model constrains decoding (:attr:`ProposerLLM.constrains`: the model's
``structured_output`` is ``grammar`` or ``server``) asks for its edit as JSON instead, through
:meth:`ProposerLLM.ask_json` (:func:`~sharpen.models.structured.complete_structured`): the
schema bounds the reply's form and length, so what is left to check is its content.
"""

from __future__ import annotations

import random
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.markdown import code_blocks
from sharpen.core.messages import Message, Usage
from sharpen.core.registry import Kind
from sharpen.core.text import CHARS_PER_TOKEN, clip
from sharpen.core.trajectory import Trajectory
from sharpen.improvement.candidate import Archive, Candidate
from sharpen.improvement.diagnosis import MinibatchDiagnosis, diagnose_minibatch
from sharpen.models.base import ChatModel
from sharpen.models.structured import ResponseSchema, complete_structured, structured_output

THINK = re.compile(r"</?think>", re.IGNORECASE)


class InvalidProposal(Exception):
    """A proposal that fails validation; the engine retries without spending rollouts."""


class CutReply(InvalidProposal):
    """A reply cut at ``max_tokens``. ``text`` is what came before the cut: never a proposal
    as it stands, though a caller may take a part the model had finished (a closed block)."""

    def __init__(self, text: str) -> None:
        super().__init__("the proposer's reply was cut at max_tokens")
        self.text = text


class NothingToPropose(InvalidProposal):
    """The proposer has no new child for this parent (a deterministic proposer that has
    tried everything); the engine does not retry it within the iteration."""


class Rejection(BaseModel):
    """One child that lost its gate (shown to later proposers of the same parent)."""

    child_hash: str
    """The rejected spec's hash (the engine never evaluates it again)."""
    change: str
    """What the proposer changed."""
    parent_successes: int
    """Parent's successes on the minibatch."""
    child_successes: int
    """Child's successes on the same minibatch."""
    minibatch: int
    """Minibatch size."""
    parent_score: float | None = None
    """Parent's summed objective score on the minibatch tasks both were scored on, when the
    objective is not success (:mod:`sharpen.improvement.objective`)."""
    child_score: float | None = None
    """Child's summed objective score on the same tasks (set with ``parent_score``)."""


class Proposal(BaseModel):
    """A child spec and what changed."""

    spec: AgentSpec
    """The child; the engine sets ``parents`` to the parent's hash when left empty."""
    change: str
    """One line for the lineage and the rejection log."""


class ProposerLLM:
    """The LLM a proposer writes with: validated text, usage charged to the run.

    ``seed`` of each call comes from the context's RNG, so a run is reproducible."""

    def __init__(
        self, model: ChatModel, params: dict[str, Any], charge: Callable[[Usage], None],
        rng: random.Random, max_chars: int = 4000,
    ) -> None:
        self.model = model
        self.params = params
        self.charge = charge
        self.rng = rng
        self.max_chars = max_chars

    @property
    def constrains(self) -> bool:
        """Whether the model constrains decoding to a schema (``structured_output`` is
        ``grammar`` or ``server``): proposers then ask for their edits with :meth:`ask_json`.
        A model that only validates after the fact (every model that does not declare the
        capability, and replay cassettes recorded before it existed) keeps the text path."""
        return structured_output(self.model) != "validate"

    def max_tokens(self, **params: Any) -> int | None:
        """The ``max_tokens`` a call with ``params`` would get (``None`` when unset)."""
        value = {**self.params, **params}.get("max_tokens")
        return int(value) if value else None

    def _messages(self, prompt: str, system: str | None) -> list[Message]:
        return ([Message(role="system", content=system)] if system else []) + [
            Message(role="user", content=prompt)
        ]

    async def ask_json(self, prompt: str, schema: ResponseSchema, *, system: str | None = None,
                       **params: Any) -> Any:
        """The model's reply to ``prompt`` as a JSON value valid against ``schema``
        (:func:`~sharpen.models.structured.complete_structured`, which re-asks once with the
        validation error); the usage of every attempt is charged. :class:`InvalidProposal`
        with the reply's error when no attempt was valid."""
        call = {**self.params, **params, "seed": self.rng.randrange(2**31)}
        reply = await complete_structured(self.model, self._messages(prompt, system), schema, call)
        self.charge(reply.usage)
        if not reply.ok:
            raise InvalidProposal(f"the proposer's reply is not a valid {schema.name}: {reply.error}")
        return reply.value

    async def ask(self, prompt: str, *, system: str | None = None, **params: Any) -> str:
        """The model's reply to ``prompt``; :class:`InvalidProposal` if it was truncated,
        holds ``<think>``, is empty or is longer than ``max_chars``."""
        call = {**self.params, **params, "seed": self.rng.randrange(2**31)}
        completion = await self.model.complete(self._messages(prompt, system), None, call)
        self.charge(completion.usage)
        text = (completion.message.content or "").strip()
        if THINK.search(text):
            raise InvalidProposal("the proposer's reply holds <think> reasoning")
        if not text:
            raise InvalidProposal("the proposer's reply is empty")
        if len(text) > self.max_chars:
            raise InvalidProposal(f"the proposer's reply is longer than {self.max_chars} characters")
        if completion.finish_reason == "length":  # last: the other checks hold for its text
            raise CutReply(text)
        return text


def extract_text(reply: str, *, min_chars: int = 20) -> str:
    """The proposed text of ``reply``: its last fenced block when it has one, else the reply.
    :class:`InvalidProposal` when that is shorter than ``min_chars``."""
    blocks = [b for b in code_blocks(reply) if b.closed]
    text = (blocks[-1].body if blocks else reply).strip()
    if len(text) < min_chars:
        raise InvalidProposal(f"the proposed text is shorter than {min_chars} characters")
    return text


class ProposalContext(BaseModel):
    """What a proposer sees. Built by the engine from training data only."""

    model_config = {"arbitrary_types_allowed": True}

    parent: Candidate
    """The candidate to improve."""
    minibatch: list[Trajectory]
    """The parent's trajectories on this iteration's training minibatch."""
    rejected: list[Rejection] = Field(default_factory=list)
    """Children of this parent that lost their gate, oldest first."""
    archive: Archive
    """Every accepted candidate so far (validation scores included, task content not)."""
    tried: set[str] = Field(default_factory=set)
    """Hashes of every spec already archived or rejected (from any parent): proposing one
    again is invalid."""
    iteration: int
    """Engine iteration (1-based)."""
    rng: random.Random
    """Seeded RNG for any random choice."""
    llm: ProposerLLM
    """The model proposals are written with."""
    reflection_tokens: int = 1500
    """Token budget of the traces a proposer puts in one prompt."""
    diagnosis: MinibatchDiagnosis | None = None
    """What the built-in detectors find in the minibatch's failed attempts (the engine fills
    it; :mod:`sharpen.improvement.diagnosis`). A proposer shows it only when asked to."""

    def diagnosed(self) -> MinibatchDiagnosis:
        """:attr:`diagnosis`, computed from :attr:`minibatch` when the context has none (a
        context a caller built by hand)."""
        return self.diagnosis if self.diagnosis is not None else diagnose_minibatch(self.minibatch)


@runtime_checkable
class Proposer(Protocol):
    """Suggests a child AgentSpec. Registered as plug-in kind ``proposer``; subclass
    :class:`BaseProposer`, which gives ``observe``, ``state`` and ``load_state`` no-op
    defaults."""

    async def propose(self, ctx: ProposalContext) -> Proposal:
        """A child of a parent the proposer picks from ``ctx.archive``; raise
        :class:`InvalidProposal` for a reply that cannot be used (it is counted, not fatal)
        and :class:`NothingToPropose` when there is nothing left to try."""
        ...

    def observe(self, parent: Candidate, proposal: Proposal, accepted: bool) -> None:
        """Learn from the gate's verdict on ``proposal`` (a child of ``parent``)."""
        ...

    def state(self) -> dict[str, Any]:
        """What the proposer learned, JSON-serialisable, for the engine's checkpoint."""
        ...

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state` returned, on resume."""
        ...


class BaseProposer(ABC):
    """Base class for proposers: define :meth:`propose`."""

    @abstractmethod
    async def propose(self, ctx: ProposalContext) -> Proposal:
        """A child spec (see :meth:`Proposer.propose`)."""

    def observe(self, parent: Candidate, proposal: Proposal, accepted: bool) -> None:
        """Default: learn nothing from the gate."""
        return None

    def state(self) -> dict[str, Any]:
        """Default: nothing to checkpoint."""
        return {}

    def load_state(self, state: dict[str, Any]) -> None:
        """Default: nothing to restore."""
        return None


PROPOSER: Kind[Proposer] = Kind("proposer", Proposer, "sharpen.improvement.proposal.BaseProposer")
"""The proposer plug-in kind."""


def describe_trajectory(t: Trajectory, limit_chars: int) -> str:
    """One trajectory for a reflection prompt: the task, each reply and what the
    environment answered, and the verdict — trimmed to about ``limit_chars``."""
    task = next((m.content for m in t.messages if m.role == "user"), "") or ""
    share = max(60, limit_chars // (len(t.steps) + 2))
    turns = []
    for s in t.steps:
        reply = next((m.content or "" for m in s.messages if m.role == "assistant"), "")
        # reply and answer are cut apart, so a long reply cannot crowd out the feedback
        turns.append(f"Agent: {clip(reply.strip(), share // 2)}\n"
                     f"Environment: {clip((s.observation or '').strip(), share // 2)}")
    verdict = "SUCCESS" if t.outcome and t.outcome.success else "FAILURE"
    evidence = (t.outcome.evidence if t.outcome else "") or ""
    if t.steps and evidence.strip() and evidence.strip() in (t.steps[-1].observation or ""):
        evidence = ""  # the last observation already says it (e.g. the code env's test report)
    parts = [f"Task:\n{clip(task.strip(), share)}"]
    parts += turns
    parts.append(f"Verdict: {verdict}. {clip(evidence, share)}")
    return "\n".join(parts)


def reflective_dataset(trajectories: list[Trajectory], token_budget: int,
                       failures_first: bool = True) -> str:
    """The traces of ``trajectories`` for a reflection prompt within ``token_budget``
    (estimated at :data:`CHARS_PER_TOKEN`): failures first, each trace given an equal share,
    so one long trace cannot crowd out the rest."""
    if not trajectories:
        return "(no examples)"
    order = sorted(trajectories, key=lambda t: bool(t.outcome and t.outcome.success)) \
        if failures_first else list(trajectories)
    chars = token_budget * CHARS_PER_TOKEN
    share = max(200, chars // len(order))
    out: list[str] = []
    used = 0
    for i, t in enumerate(order, 1):
        block = f"### Example {i}\n{describe_trajectory(t, share)}"
        if used + len(block) > chars and out:
            out.append(f"({len(order) - i + 1} more examples left out to fit the budget)")
            break
        out.append(block)
        used += len(block)
    return "\n\n".join(out)


def successes(trajectories: list[Trajectory]) -> int:
    """Successful trajectories among ``trajectories``."""
    return sum(bool(t.outcome and t.outcome.success) for t in trajectories)
