"""ReflexionAgent: within-task retries with verbal reflections (Reflexion, Shinn et al.).

An episode is up to ``trials`` attempts at the same task. Each attempt is an ordinary
:class:`~sharpen.agents.tool_agent.ToolAgent` episode on a freshly reset environment. After a
failed attempt the agent adds an entry to an **episodic** memory that lives for one task and
is never written back to the AgentSpec (cross-task memory is the ``guidelines`` proposer's
job); the next attempt's system prompt carries the last ``memory_size`` entries. What an entry
holds is the ``memory`` arg:

- ``reflections`` (Reflexion proper, the default): the model reads the task, its last answer
  and what the environment said (for ``code``, the failed tests) and writes a short
  reflection — what went wrong, what to change; the entry is the answer, the result and the
  reflection;
- ``feedback``: the answer and the result, no reflection call;
- ``result``: what the environment said only (for ``code``, the failed tests and their
  messages), not the answer: a small model shown its failed code tends to write it again;
- ``none``: nothing — the retry is a fresh sample, and the environment's verdict only decides
  that there is one. This is the ablation that tells what the words add: on the embedded
  135M model it beat both richer memories (``docs/improve.md``).

What the environment said is kept up to ``result_chars`` characters, from the top (for
``code``: the score, then the failed tests in order).

The first attempt is exactly what the plain tool agent would do (same prompt, same seed, same
params), so it never loses a success the plain agent has on a deterministic model. Later
attempts sample at ``retry_temperature`` (0.7 by default): a small greedy model given its
failure tends to write the same code again word for word. The price is the extra tokens,
which the trajectory's usage and every report show. The verdict is the environment's verdict
on the last attempt. Steps of every attempt are kept (``info["trial"]``; an attempt's first
step also keeps the prompt it started with, ``info["trial_prompt"]``); the reflection
calls are steps too (``info["reflection"]``), and each reflection is stored as
``Feedback(source="critic", name="reflection")``. ``trajectory.messages`` holds the last
attempt's conversation (what produced the final answer). The attempt loop is
:mod:`sharpen.agents.trials`'s, shared with the ``critic`` agent.
"""

from __future__ import annotations

from typing import Literal, get_args

from sharpen.agents.tool_agent import Protocol, ToolAgent
from sharpen.agents.trials import TrialAgent, record_call, retry_params
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import UserError
from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.core.messages import Message
from sharpen.core.registry import register
from sharpen.core.trajectory import Trajectory
from sharpen.models.base import ChatModel

REFLECT_PROMPT = (
    "Task:\n{task}\n\nYou tried to solve this task and failed.\n\n{attempt}\n\n"
    "In one or two short sentences, say why your answer failed and what to change."
)
MEMORY_HEADER = "Your earlier attempts at this task failed. Learn from them:"

Memory = Literal["reflections", "feedback", "result", "none"]
MEMORIES: tuple[str, ...] = get_args(Memory)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 15] + "\n…[cut]"


def task_text(t: Trajectory, limit: int = 1200) -> str:
    """The task as the attempt's first user message stated it."""
    first = next((m.content for m in t.messages if m.role == "user" and m.content), "")
    return _clip(first or "(not stated)", limit)


def describe_attempt(t: Trajectory, limit: int = 1200, *, answer: bool = True,
                     result_limit: int = 1200) -> str:
    """The last answer of an attempt (unless ``answer`` is false), cut to ``limit``
    characters, and what the environment said about it, cut to ``result_limit``."""
    text, result = "", ""
    for step in t.steps:
        if step.action is not None:
            text = "\n".join(f"{k}: {v}" for k, v in step.action.arguments.items())
        if step.observation:
            result = step.observation
    said = f"Result:\n{_clip(result or '(nothing)', result_limit)}"
    if not answer:
        return said
    return f"Your answer:\n{_clip(text or '(no valid answer)', limit)}\n\n{said}"


def check_result_chars(value: object) -> None:
    """A :class:`UserError` unless ``value`` is a usable ``result_chars`` (an int ≥ 40)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 40:
        raise UserError(f"reflexion: result_chars must be an integer ≥ 40, got {value!r}",
                        "set result_chars: 200 (the score and about one failed test) or more")


@register("agent", "reflexion")
class ReflexionAgent(TrialAgent):
    """Up to ``trials`` attempts with reflections between them (see the module doc).

    Args: ``trials`` (attempts, ≥ 1), ``reflection_tokens`` (max tokens of one
    reflection), ``retry_temperature`` (sampling temperature of attempts after the first;
    ``None`` keeps the spec's — a greedy small model otherwise tends to repeat its failed
    answer word for word), ``memory`` (``reflections``, ``feedback``, ``result`` or ``none``),
    ``memory_size`` (memory entries in a retry's prompt, the most recent), ``result_chars``
    (characters of what the environment said that an entry keeps, from the top: the score
    and about one failed test at 200), and the inner tool agent's ``protocol`` (``auto``,
    ``native`` or ``text``), ``guidelines_top_k`` and ``confidence`` (a stated confidence on
    the final tools; the last attempt's goes to the outcome)."""

    def __init__(self, trials: int = 2, reflection_tokens: int = 64, retry_temperature: float | None = 0.7,
                 memory: Memory = "reflections", memory_size: int = 3, result_chars: int = 1200,
                 protocol: Protocol = "auto", guidelines_top_k: int | None = None,
                 confidence: bool = False) -> None:
        if not isinstance(trials, int) or trials < 1:
            raise UserError(f"reflexion: trials must be a positive integer, got {trials!r}",
                            "set agent args trials: 2 (or more)")
        if not isinstance(memory_size, int) or memory_size < 1:
            raise UserError(f"reflexion: memory_size must be a positive integer, got {memory_size!r}",
                            "set agent args memory_size: 1 (or more)")
        check_result_chars(result_chars)
        if memory not in MEMORIES:
            raise UserError(f"reflexion: unknown memory {memory!r}",
                            f"set agent args memory to one of {', '.join(MEMORIES)}")
        self.trials = trials
        self.memory = memory
        self.reflection_tokens = reflection_tokens
        self.retry_temperature = retry_temperature
        self.memory_size = memory_size
        self.result_chars = result_chars
        self.inner = ToolAgent(protocol, guidelines_top_k, confidence)

    def attempt_spec(self, spec: AgentSpec, trial: int, notes: list[str]) -> AgentSpec:
        """Trial 0: the spec as given; later trials: at ``retry_temperature``, with the last
        ``memory_size`` memory entries as the ``reflections`` component."""
        if trial == 0:
            return spec
        update: dict = {"params": retry_params(spec, self.retry_temperature)}
        if notes:
            update["components"] = {**spec.components, "reflections": "\n\n".join(
                [MEMORY_HEADER, *notes[-self.memory_size:]])}
        return spec.model_copy(update=update)

    async def after_failure(self, model: ChatModel, spec: AgentSpec, trajectory: Trajectory,
                            attempt: Trajectory, trial: int) -> str | None:
        """The memory entry of the failed attempt (none with ``memory="none"``)."""
        if self.memory == "none":
            return None
        return await self._remember(model, spec, trajectory, attempt, trial)

    async def _remember(
        self, model: ChatModel, spec: AgentSpec, trajectory: Trajectory, attempt: Trajectory,
        trial: int,
    ) -> str:
        """The memory entry of a failed ``attempt``: what it answered and what the
        environment said, then (``memory="reflections"``) a reflection, asked
        for here and recorded as a step and as feedback."""
        described = describe_attempt(attempt, answer=self.memory != "result", result_limit=self.result_chars)
        if self.memory in ("result", "feedback"):
            return f"Attempt {trial + 1}:\n{described}"
        ask = Message(role="user", content=REFLECT_PROMPT.format(
            task=task_text(attempt), attempt=described))
        params = {**spec.params, "max_tokens": self.reflection_tokens, "seed": trajectory.seed + trial}
        completion = await model.complete([ask], None, params)
        text = (completion.message.content or "").strip() or "(no reflection)"
        index = record_call(trajectory, [ask], completion, {"reflection": trial})
        trajectory.feedback.append(Feedback(
            source="critic", name="reflection", value=text, author=f"agent:reflexion:{model.name}",
            target=FeedbackTarget(kind="step", run_id=trajectory.run_id, trajectory_id=trajectory.id,
                                  step_index=index)))
        return f"Attempt {trial + 1}:\n{described}\nReflection: {text}"
