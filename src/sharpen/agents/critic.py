"""CriticAgent: an actor's attempts at a task, with a critic's critique between them.

An episode is up to ``trials`` attempts of the **actor** (any agent plug-in; the tool agent
by default), each on a freshly reset environment — the trial loop of
:mod:`sharpen.agents.trials`, shared with ``reflexion``. After a failed attempt (not the
last) the **critic** — a model from any ref (``critic_model``; by default the spec's own model,
so the actor critiques itself), instructed by the spec's ``critic`` component
(:data:`DEFAULT_INSTRUCTIONS` when the spec has none) — reads the task, what the attempt did
(its actions and what the environment answered, the environment's feedback records) and
writes a critique. What the actor's next attempt is shown, in its ``critique`` component,
is the ``feedback`` arg:

- ``critic`` (the default): the critique only;
- ``both``: what the environment said about the last answer, then the critique;
- ``execution``: what the environment said only, and no critic call — the control that tells
  what the critic adds over the environment's own words;
- ``none``: nothing, and no critic call — a retry is a fresh sample.

With ``trials: 1`` the agent is the actor alone, so a benchmark's arms are this one agent with
different args. Only the latest note is shown (the actor revises its last attempt). The
``critic`` component never reaches the actor's prompt.

Bookkeeping: each critic call is a step (``info["critique"]`` = the trial it critiques,
``info["critiques"]`` = the critiqued step), its usage counts in the trajectory's, and each
critique is ``Feedback(source="critic", name="critique", author=<critic model name>)`` on the
**critiqued step** — the failed attempt's last step. A critic model of its own is built from
its ref, priced like the run's model, retried on infra errors under the default
:class:`~sharpen.runner.retry.RetryPolicy` (each retry counted in ``infra_retries``) and,
when retries run out, its :class:`~sharpen.core.errors.InfraError` ends the episode as the
actor's would (error kind ``infra``, never the agent's failure). An empty critique is not
shown: the next attempt runs without one, and the critic's step says so
(``info["critique_empty"]``). The verdict is the environment's on the last attempt.
"""

from __future__ import annotations

import random
from typing import Any, Literal, get_args

from sharpen.agents.base import AGENT, Agent
from sharpen.agents.reflexion import check_result_chars, describe_attempt, task_text
from sharpen.agents.trials import TrialAgent, record_call, retry_params
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import InfraError, UserError
from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.core.messages import Message
from sharpen.core.registry import REGISTRY, PluginRef, register
from sharpen.core.trajectory import Trajectory
from sharpen.envs.base import Environment
from sharpen.models.base import MODEL, ChatModel
from sharpen.models.pricing import PricedModel, PriceTable
from sharpen.runner.retry import RetryingModel, RetryPolicy

COMPONENT = "critic"
"""The AgentSpec component that holds the critic's instructions (never shown to the actor)."""
CRITIQUE = "critique"
"""The component of the actor's retry that carries the last note."""

DEFAULT_INSTRUCTIONS = (
    "You are a strict reviewer. You read a failed attempt at a task: what was done and what "
    "the environment answered. Write a concrete, actionable critique: name the specific "
    "mistake and say exactly what to change in the next attempt. Do not praise, do not "
    "restate the task, do not write the whole solution."
)
CRITIQUE_PROMPT = (
    "Task:\n{task}\n\nThe attempt failed. What it did and what the environment answered:\n\n"
    "{trace}\n\nWrite your critique in at most three short sentences."
)
FAILED = "Your last attempt at this task failed."
SAID = "What the environment said about your last answer:\n{result}"
CRITIQUED = "A reviewer's critique of your last attempt:\n{critique}\nRevise your answer accordingly."

Shown = Literal["critic", "both", "execution", "none"]
SHOWN: tuple[str, ...] = get_args(Shown)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 15] + "\n…[cut]"


def attempt_trace(attempt: Trajectory, limit: int = 2000, result_limit: int = 600) -> str:
    """What ``attempt`` did, for a critic: each step's action (or invalid reply) and what the
    environment answered (cut to ``result_limit``), the latest steps that fit in ``limit``
    characters, then the environment's feedback records not already in an answer."""
    lines: list[str] = []
    for n, step in enumerate(attempt.steps, 1):
        if step.action is not None:
            args = "\n".join(f"{k}: {v}" for k, v in step.action.arguments.items())
            did = f"Step {n}: {step.action.tool}\n{args}" if args else f"Step {n}: {step.action.tool}"
        else:
            did = f"Step {n}: (no valid action)"
        lines.append(f"{did}\nEnvironment: {_clip(step.observation or '(nothing)', result_limit)}")
    kept: list[str] = []
    for line in reversed(lines):  # the latest steps matter most
        if kept and sum(len(x) for x in kept) + len(line) > limit:
            break
        kept.insert(0, _clip(line, limit))
    said = " ".join(s.observation or "" for s in attempt.steps)
    notes = [f"- {fb.source} {fb.name} = {fb.value}" + (f": {_clip(fb.rationale, 200)}"
                                                       if fb.rationale and fb.rationale not in said else "")
             for fb in attempt.feedback if fb.source != "critic"]
    if notes:
        kept.append("Environment feedback:\n" + "\n".join(notes))
    return "\n\n".join(kept) if kept else "(no steps)"


def _ref(arg: str, value: Any) -> PluginRef:
    try:
        return PluginRef(name=value) if isinstance(value, str) else PluginRef.model_validate(value)
    except ValueError:
        raise UserError(f"critic: {arg} must be a plug-in name or {{name, args}}, got {value!r}",
                        f"e.g. agent args {arg}: {{name: {'tool' if arg == 'actor' else 'local'}}}") from None


def _positive(arg: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise UserError(f"critic: {arg} must be a positive integer, got {value!r}",
                        f"set agent args {arg}: 2 (or more)")


@register("agent", "critic")
class CriticAgent(TrialAgent):
    """Up to ``trials`` attempts of ``actor`` with a critique between them (module doc).

    Args: ``actor`` (the inner agent's ``{name, args}`` or name; the tool agent), ``critic_model``
    (the critic's model ``{name, args}`` or name; ``None``: the spec's own model),
    ``critic_params`` (the critic's sampling params; default: the spec's with the spec's own
    model, ``temperature: 0`` with another), ``trials`` (attempts, ≥ 1), ``feedback`` (what a
    retry is shown: ``critic``, ``both``, ``execution`` or ``none``), ``critique_tokens`` (max
    tokens of one critique), ``retry_temperature`` (sampling temperature of attempts after the
    first; ``None`` keeps the spec's), ``result_chars`` (characters of what the environment
    said that a retry is shown, from the top)."""

    def __init__(self, actor: str | dict[str, Any] = "tool", critic_model: str | dict[str, Any] | None = None,
                 critic_params: dict[str, Any] | None = None, trials: int = 2, feedback: Shown = "critic",
                 critique_tokens: int = 128, retry_temperature: float | None = 0.7,
                 result_chars: int = 1200) -> None:
        _positive("trials", trials)
        _positive("critique_tokens", critique_tokens)
        check_result_chars(result_chars)
        if feedback not in SHOWN:
            raise UserError(f"critic: unknown feedback {feedback!r}",
                            f"set agent args feedback to one of {', '.join(SHOWN)}")
        self.actor = _ref("actor", actor)
        self.critic_ref = None if critic_model is None else _ref("critic_model", critic_model)
        self.critic_params = critic_params
        self.trials = trials
        self.feedback = feedback
        self.critique_tokens = critique_tokens
        self.retry_temperature = retry_temperature
        self.result_chars = result_chars
        self.inner: Agent = REGISTRY.create(AGENT, self.actor)
        self._critic: ChatModel | None = None  # a critic model of its own, built on first use

    async def run(
        self, env: Environment, model: ChatModel, spec: AgentSpec, trajectory: Trajectory
    ) -> None:
        """Play up to ``trials`` attempts into ``trajectory`` (see the module doc)."""
        try:
            await super().run(env, model, spec, trajectory)
        finally:
            if self._critic is not None:
                await self._critic.aclose()
                self._critic = None

    def attempt_spec(self, spec: AgentSpec, trial: int, notes: list[str]) -> AgentSpec:
        """The actor's spec: without the ``critic`` component; after the first attempt at
        ``retry_temperature``, with the last note as the ``critique`` component."""
        components = {k: v for k, v in spec.components.items() if k != COMPONENT}
        update: dict[str, Any] = {"components": components}
        if trial > 0:
            update["params"] = retry_params(spec, self.retry_temperature)
            if notes:
                components[CRITIQUE] = notes[-1]
        return spec.model_copy(update=update)

    async def after_failure(self, model: ChatModel, spec: AgentSpec, trajectory: Trajectory,
                            attempt: Trajectory, trial: int) -> str | None:
        """The note on the failed attempt, asking the critic when ``feedback`` needs one."""
        if self.feedback == "none":
            return None
        said = SAID.format(result=describe_attempt(attempt, answer=False, result_limit=self.result_chars)
                           .removeprefix("Result:\n"))
        if self.feedback == "execution":
            return f"{FAILED}\n{said}"
        critique = await self._critique(model, spec, trajectory, attempt, trial)
        parts = [FAILED, *([said] if self.feedback == "both" else []),
                 *([CRITIQUED.format(critique=critique)] if critique else [])]
        return "\n\n".join(parts) if len(parts) > 1 else None

    def _critic_model(self, model: ChatModel, trajectory: Trajectory) -> ChatModel:
        if self.critic_ref is None:
            return model  # the run's model, already priced and retried by the runner
        if self._critic is None:
            def count(_: InfraError) -> None:
                trajectory.infra_retries += 1

            built = PricedModel(REGISTRY.create(MODEL, self.critic_ref), PriceTable.load())
            self._critic = RetryingModel(built, RetryPolicy(), random.Random(trajectory.seed), on_retry=count)
        return self._critic

    async def _critique(self, model: ChatModel, spec: AgentSpec, trajectory: Trajectory,
                        attempt: Trajectory, trial: int) -> str:
        """Ask the critic about ``attempt``; record the call as a step and a non-empty
        critique as feedback on the attempt's last step. The critique ('' when empty)."""
        critic = self._critic_model(model, trajectory)
        ask = [Message(role="system", content=spec.components.get(COMPONENT, DEFAULT_INSTRUCTIONS)),
               Message(role="user", content=CRITIQUE_PROMPT.format(
                   task=task_text(attempt), trace=attempt_trace(attempt, result_limit=self.result_chars)))]
        base = self.critic_params if self.critic_params is not None else (
            spec.params if self.critic_ref is None else {"temperature": 0.0})
        params = {**base, "max_tokens": self.critique_tokens, "seed": trajectory.seed + trial}
        completion = await critic.complete(ask, None, params)
        text = (completion.message.content or "").strip()
        critiqued = len(trajectory.steps) - 1 if attempt.steps else None
        info: dict[str, Any] = {"critique": trial, "critic": critic.name}
        if critiqued is not None:
            info["critiques"] = critiqued
        if not text:
            info["critique_empty"] = "the critic's reply was empty: the next attempt runs without a critique"
        index = record_call(trajectory, ask, completion, info)
        if text:
            trajectory.feedback.append(Feedback(
                source="critic", name="critique", value=text, author=critic.name,
                target=FeedbackTarget(kind="step", run_id=trajectory.run_id, trajectory_id=trajectory.id,
                                      step_index=index if critiqued is None else critiqued)))
        return text
