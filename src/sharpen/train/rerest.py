"""``rerest``: Re-ReST (Dou et al. 2024) — ``star``, plus failed attempts corrected by a
reflector with the environment's feedback, kept only when the environment verifies them.

Each round, after sampling (as :mod:`sharpen.train.star`): for each train task's first failed
attempt (up to ``max_corrections``), the reflector model (default: the current model; a model
ref with ``reflector=``, e.g. ``reflector=openai`` or ``{name: local, args: {...}}``) sees the
conversation up to the agent's last reply, that reply, and what the environment answered
(the messages after it), and writes a corrected reply. The correction is re-verified through
the environment itself: a one-episode run of the same agent spec on the same task, whose
model is scripted to give the corrected reply (the agent parses it and steps the environment
exactly as for the trained model, so the kept conversation is one the agent really has).
Those that succeed join the round's successes for the fine-tune.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sharpen.core.errors import UserError
from sharpen.core.messages import Message, ToolSpec
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.core.trajectory import Trajectory
from sharpen.models.base import MODEL, ChatModel, Completion
from sharpen.models.structured import ResponseSchema, StructuredOutput
from sharpen.runner import RunConfig, Runner
from sharpen.train.export import Where, export
from sharpen.train.method import TrainContext
from sharpen.train.star import StarMethod

REFLECT_SYSTEM = ("You fix failed attempts. You see a task as the agent saw it, the agent's "
                  "reply, and what the environment answered. Write the corrected reply: in "
                  "the same format as the agent's reply (the same fences or call syntax), "
                  "complete, and nothing else.")


class ScriptedReply:
    """A chat model that answers every request with one fixed reply (the correction being
    verified). Declares what the local model declares, so the agent prompts it as it prompts
    the model being trained."""

    supports_tools = False
    structured_output: StructuredOutput = "grammar"

    def __init__(self, reply: str, name: str = "rerest-correction") -> None:
        self.reply, self.name = reply, name

    async def complete(self, messages: list[Message], tools: list[ToolSpec] | None = None,
                       params: dict[str, Any] | None = None, *,
                       response_schema: ResponseSchema | None = None) -> Completion:
        return Completion(message=Message(role="assistant", content=self.reply), model=self.name)

    async def aclose(self) -> None:
        return None


def _scripted(reply: str) -> Callable[[RunConfig], ChatModel]:
    """A runner's model factory that gives every run :class:`ScriptedReply` of ``reply``."""
    return lambda _config: ScriptedReply(reply)


def _text(m: Message) -> str:
    calls = "".join(f"\n[call {c.name} {c.arguments}]" for c in m.tool_calls)
    return f"{m.role}: {m.content or ''}{calls}"


def reflection_prompt(t: Trajectory) -> list[Message]:
    """What the reflector is asked for one failed attempt ``t``."""
    last = max(k for k, m in enumerate(t.messages) if m.role == "assistant")
    before, reply, after = t.messages[:last], t.messages[last], t.messages[last + 1:]
    reward = t.outcome.reward if t.outcome else 0.0
    feedback = "\n".join(_text(m) for m in after) or f"(no message; reward {reward})"
    body = ("## The task, as the agent saw it\n" + "\n\n".join(_text(m) for m in before)
            + f"\n\n## The agent's reply (it failed)\n{reply.content or ''}"
            + f"\n\n## What the environment answered\n{feedback}"
            + "\n\n## Your corrected reply")
    return [Message(role="system", content=REFLECT_SYSTEM), Message(role="user", content=body)]


async def verified(ctx: TrainContext, attempt: Trajectory, reply: str, label: str
                   ) -> list[dict[str, Any]]:
    """``reply`` in place of ``attempt``'s, through the environment: a one-episode run of the
    context's agent spec on the attempt's task (its seed) with a model scripted to say
    ``reply``; the run's ``sft`` line when it succeeded, else nothing."""
    ctx.check_tasks([attempt.task])
    config = RunConfig(env=ctx.env, agent=ctx.spec, tasks=[attempt.task], seed=attempt.seed,
                       labels={"role": label, "corrects": attempt.id})
    run_id = (await Runner(ctx.store, progress=False, model_factory=_scripted(reply))
              .run(config)).run_id
    lines, _ = export(ctx.store, [run_id], "sft", Where(success=True, split="train"))
    return list(lines)


class RerestMethod(StarMethod):
    """Re-ReST: STaR plus reflector-corrected failures, re-verified (see the module docstring)."""

    title = ("Re-ReST: STaR plus failed attempts corrected by a reflector from the environment's "
             "feedback, kept when the environment verifies them")

    def __init__(self, reflector: str | dict[str, Any] | None = None, max_corrections: int = 16,
                 reflect_max_tokens: int = 300, **star: Any) -> None:
        super().__init__(**star)
        if max_corrections < 0:
            raise UserError("max_corrections must be 0 or more", "set --method-arg max_corrections=16")
        self.reflector = (None if reflector is None else PluginRef(name=reflector)
                          if isinstance(reflector, str) else PluginRef.model_validate(reflector))
        self.max_corrections, self.reflect_max_tokens = max_corrections, reflect_max_tokens

    def _reflector(self, ctx: TrainContext, gguf: Path) -> ChatModel:
        ref = self.reflector or PluginRef(name="local", args={
            **(ctx.spec.model.args if ctx.spec.model.name == "local" else {}), "model_path": str(gguf)})
        return REGISTRY.create(MODEL, ref)

    async def examples(self, ctx: TrainContext, run_id: str, gguf: Path, round_no: int
                       ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        lines, extra = await super().examples(ctx, run_id, gguf, round_no)
        failed: dict[str, Trajectory] = {}
        for t in ctx.store.iter_trajectories(run_id, with_steps=False, with_messages=True):
            done = t.outcome is not None and not t.outcome.success and t.outcome.error_kind is None
            if done and any(m.role == "assistant" for m in t.messages):
                failed.setdefault(t.task.hash(), t)  # the first failure of each task
        todo = list(failed.values())[: self.max_corrections]
        ctx.check_tasks([t.task for t in todo])
        model = self._reflector(ctx, gguf)
        verified_n = 0
        try:
            for t in todo:
                reply = await model.complete(reflection_prompt(t), params={
                    "temperature": 0.0, "max_tokens": self.reflect_max_tokens,
                    "seed": ctx.seed + round_no})
                kept = await verified(ctx, t, reply.message.content or "",
                                      f"rerest:round{round_no}:verify")
                verified_n += len(kept)
                lines.extend(kept)
        finally:
            await model.aclose()
        return lines, {**extra, "failed": len(failed), "corrected": len(todo), "verified": verified_n}
