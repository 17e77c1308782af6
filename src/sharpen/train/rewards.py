"""Single-turn GRPO on a sharpen environment: the prompts the agent would see for each task and a
reward function that scores a sampled reply through the environment's own verifier.

A prompt is what the ``tool`` agent sends on the first turn of an episode of the task — the
system message built from the spec (:func:`~sharpen.agents.tool_agent.system_prompt`, the text
protocol's instructions included) and the environment's first observation — so that the trained
model, run later as ``--model local --model-arg model_path=...``, is asked exactly what it was
trained on. A reply is read as the agent reads it (:func:`~sharpen.agents.text_protocol.
parse_text_action`: no second parser), played in a fresh environment reset to the task, and its
reward is the environment's :meth:`~sharpen.envs.base.Environment.outcome` after that one step
(for ``code``: the fraction of hidden tests passed). A reply that holds no action scores 0, as
an invalid action earns nothing in an episode.

Only the text protocol is trained here: sampling under a grammar (``decoding: constrained``)
is not what TRL's generation does, so a spec that resolves to it is refused with the fix.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sharpen.agents import confidence, constrained
from sharpen.agents.base import AGENT
from sharpen.agents.text_protocol import ParseError, parse_text_action
from sharpen.agents.tool_agent import ToolAgent, system_prompt
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import UserError
from sharpen.core.messages import ToolSpec
from sharpen.core.registry import REGISTRY, PluginRef, Registry
from sharpen.core.task import TaskSpec
from sharpen.envs.base import ENV
from sharpen.models.base import MODEL


def training_agent(spec: AgentSpec, gguf: str | None = None,
                   registry: Registry = REGISTRY) -> ToolAgent:
    """The spec's agent, checked to be one whose first turn :func:`prompts` can rebuild: the
    ``tool`` agent acting through the text protocol with the trained model run as ``local``
    from ``gguf`` (default: the embedded model's; nothing is loaded). :class:`UserError`
    otherwise, naming the fix."""
    agent = registry.create(AGENT, spec.agent)
    if not isinstance(agent, ToolAgent):
        raise UserError(f"grpo trains the `tool` agent's replies; the spec's agent is "
                        f"{spec.agent.name!r}", "set agent: {name: tool} in the spec")
    model = registry.create(MODEL, PluginRef(name="local", args={"model_path": gguf} if gguf else {}))
    if agent.acting(model, spec) != "text":
        raise UserError("grpo samples free text, but this spec decodes under a grammar "
                        "(decoding: constrained, or auto on the local model)",
                        "set decoding: free in the spec (the text protocol reads the reply)")
    return agent


@dataclass
class Prompt:
    """One task's first turn: the chat messages (TRL's conversational ``prompt``) and the tools
    the reply is parsed against."""

    task: TaskSpec
    messages: list[dict[str, str]]
    tools: list[ToolSpec]


async def prompts(env_ref: PluginRef, spec: AgentSpec, agent: ToolAgent,
                  tasks: Sequence[TaskSpec], registry: Registry = REGISTRY) -> list[Prompt]:
    """The first turn of an episode of each task, as :meth:`ToolAgent.run` builds it."""
    out = []
    for task in tasks:
        env = registry.create(ENV, env_ref)
        try:
            obs, info = await env.reset(task)
            tools = agent.tools(env)
            system = system_prompt(spec, tools, "text", obs, agent.guidelines_top_k,
                                   constrained.admissible_of(info))
            if agent.confidence and (ask := confidence.instructions(env.tools)):
                system = f"{system}\n\n{ask}" if system else ask
        finally:
            await env.close()
        out.append(Prompt(task=task, messages=[{"role": "system", "content": system},
                                               {"role": "user", "content": obs}], tools=tools))
    return out


@dataclass
class VerifierReward:
    """TRL reward function (async; TRL gathers it on its own loop): the environment's reward for
    each completion of the prompts in ``by_index`` (the dataset's ``task_index`` column).

    ``eos_ids``: token ids that end a reply; a completion without one was cut off at
    ``max_completion_length``, which the parser is told (an unclosed code block is then not
    guessed at, as in an episode). ``scored`` counts completions scored (the samples budget)."""

    env_ref: PluginRef
    by_index: list[Prompt]
    eos_ids: set[int] = field(default_factory=set)
    concurrency: int = 4
    registry: Registry = REGISTRY
    scored: int = 0

    async def score(self, prompt: Prompt, reply: str, cut_off: bool) -> float:
        """The environment's reward for ``reply`` as the first action of an episode of
        ``prompt.task`` (0 for a reply that holds no action)."""
        try:
            action = parse_text_action(reply, prompt.tools, cut_off=cut_off)
        except ParseError:
            return 0.0
        env = self.registry.create(ENV, self.env_ref)
        try:
            await env.reset(prompt.task)
            await env.step(action)
            outcome = await env.outcome()
        finally:
            await env.close()
        return float(outcome.reward) if outcome.counts else 0.0

    async def __call__(self, prompts: list[Any], completions: list[Any],
                       completion_ids: list[list[int]], task_index: list[int],
                       **_: Any) -> list[float]:
        gate = asyncio.Semaphore(self.concurrency)

        async def one(i: int) -> float:
            completion = completions[i]
            text = completion[-1]["content"] if isinstance(completion, list) else completion
            ids = completion_ids[i]
            cut_off = bool(ids) and ids[-1] not in self.eos_ids
            async with gate:
                return await self.score(self.by_index[task_index[i]], text or "", cut_off)

        rewards = await asyncio.gather(*(one(i) for i in range(len(completions))))
        self.scored += len(rewards)
        return list(rewards)
