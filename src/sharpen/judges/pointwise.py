"""Pointwise judges: ``rubric`` (criteria on scales), ``reference`` (against the environment's
reference solution, as Inspect's ``model_graded_fact``) and ``checklist`` (yes/no checkpoints
as partial credit).

Each sees the trajectory as :mod:`sharpen.judges.transcript` renders it (steps as ``[S0]``,
cut to ``token_budget`` tokens, the cut said) and never the verifier's verdict. Args common to
all: ``token_budget`` (default 1200, what fits the embedded model's 2048-token context with the
instructions and the reply) and ``params`` (sampling; greedy by default).
"""

from __future__ import annotations

from typing import Any

from sharpen.core.errors import UserError
from sharpen.core.feedback import Feedback
from sharpen.core.registry import register
from sharpen.core.trajectory import Trajectory
from sharpen.judges.ask import ask, explained, judge_feedback
from sharpen.judges.base import REFERENCE, BaseJudge, JudgeError, Verdict
from sharpen.judges.rubric import Criterion, Rubric
from sharpen.judges.transcript import render, task_text
from sharpen.models.base import ChatModel

SYSTEM = ("You are a careful, impartial judge of an AI agent's work. You read a transcript of "
          "what the agent did and score it exactly as instructed. Cite the steps you rely on "
          "by their ids, such as [S0] or [S2].")

CUT_NOTE = ("Note: the transcript was cut to fit; parts marked as cut or left out were not "
            "shown to you. Do not guess what they held.\n\n")

RUBRIC_PROMPT = """{description}Score the agent's work on each criterion:
{criteria}

{cut}Transcript:
{transcript}

Reply with a JSON object with one key per criterion ({names}); each holds "explanation" (one \
or two sentences citing steps) and then "value"."""

REFERENCE_PROMPT = """Compare the agent's final answer with the reference solution. The \
answer is correct if it does what the reference does for the task, even when written \
differently.

Reference solution:
{reference}

{cut}Transcript:
{transcript}

Reply with a JSON object: "explanation" (one or two sentences citing steps), then "value" \
(true if the agent's answer is correct, else false)."""

CHECKPOINTS_PROMPT = """Break this task into {n} short yes/no checkpoints that a correct \
solution meets, each checkable from a transcript of the agent's work.

Task:
{task}

Reply with a JSON object {{"checkpoints": [...]}} holding {n} strings."""

CHECKLIST_PROMPT = """Check the agent's work against each checkpoint:
{checkpoints}

{cut}Transcript:
{transcript}

Reply with a JSON object with keys {names}; each holds "explanation" (one sentence citing \
steps) and then "value" (true if the checkpoint is met, else false)."""


class _Pointwise(BaseJudge):
    def __init__(self, token_budget: int = 1200, params: dict[str, Any] | None = None) -> None:
        if token_budget < 100:
            raise UserError(f"token_budget={token_budget} leaves no room for a transcript",
                            "give at least 100 (the default is 1200)")
        self.token_budget = token_budget
        self.params = dict(params or {})

    def _transcript(self, t: Trajectory) -> tuple[str, str]:
        text, cut = render(t, self.token_budget)
        return text, CUT_NOTE if cut else ""


def _per_key(keys: list[str], value_schemas: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "object",
            "properties": {k: explained(v) for k, v in zip(keys, value_schemas, strict=True)},
            "required": keys, "additionalProperties": False}


@register("judge", "rubric")
class RubricJudge(_Pointwise):
    """Scores a trajectory on each criterion of ``rubric`` (a :class:`Rubric` as data, as
    ``sharpen judge --judge rubric.yaml`` passes it): one ``Feedback(source="judge")`` per
    criterion, named after it, its explanation as the rationale."""

    prompt = SYSTEM + RUBRIC_PROMPT

    def __init__(self, rubric: dict[str, Any] | Rubric, token_budget: int = 1200,
                 params: dict[str, Any] | None = None) -> None:
        super().__init__(token_budget, params)
        self.rubric = rubric if isinstance(rubric, Rubric) else Rubric.parse(rubric)
        self.title = f"rubric:{self.rubric.name}"

    async def judge(self, trajectory: Trajectory, model: ChatModel) -> list[Feedback]:
        text, cut = self._transcript(trajectory)
        crits = self.rubric.criteria
        desc = f"{self.rubric.description.strip()}\n\n" if self.rubric.description else ""
        prompt = RUBRIC_PROMPT.format(
            description=desc, criteria="\n".join(c.describe() for c in crits), cut=cut,
            transcript=text, names=", ".join(c.name for c in crits))
        reply = await ask(model, SYSTEM, prompt,
                          _per_key([c.name for c in crits], [c.value_schema() for c in crits]),
                          self.params)
        return [judge_feedback(trajectory, c.name, reply[c.name]["value"],
                               reply[c.name]["explanation"], self.title) for c in crits]


@register("judge", "reference")
class ReferenceJudge(_Pointwise):
    """Whether the agent's answer agrees with the environment's reference solution: one
    boolean record named ``criterion`` (default ``correct``)."""

    prompt = SYSTEM + REFERENCE_PROMPT
    needs_reference = True

    def __init__(self, criterion: str = "correct", token_budget: int = 1200,
                 params: dict[str, Any] | None = None) -> None:
        super().__init__(token_budget, params)
        self.criterion = Criterion(name=criterion, description="agrees with the reference",
                                   scale="bool").name
        self.title = "reference"

    async def judge(self, trajectory: Trajectory, model: ChatModel) -> list[Feedback]:
        reference = trajectory.task.metadata.get(REFERENCE)
        if not reference:
            raise JudgeError(f"no reference solution for task {trajectory.task.id!r} (the "
                             "environment gives none)")
        text, cut = self._transcript(trajectory)
        prompt = REFERENCE_PROMPT.format(reference=str(reference)[: self.token_budget],
                                         cut=cut, transcript=text)
        reply = await ask(model, SYSTEM, prompt, explained({"type": "boolean"}), self.params)
        return [judge_feedback(trajectory, self.criterion, reply["value"],
                               reply["explanation"], self.title)]


@register("judge", "checklist")
class ChecklistJudge(_Pointwise):
    """Partial credit over yes/no checkpoints: ``checkpoints`` as given, or ``n`` written by
    the model from the task (once per task, kept in the judgement's detail). One record named
    ``checklist`` whose value is the fraction met, its rationale each checkpoint's answer."""

    prompt = SYSTEM + CHECKPOINTS_PROMPT + CHECKLIST_PROMPT

    def __init__(self, checkpoints: list[str] | None = None, n: int = 4,
                 token_budget: int = 1200, params: dict[str, Any] | None = None) -> None:
        super().__init__(token_budget, params)
        if checkpoints is not None and not checkpoints:
            raise UserError("checkpoints is empty", "give at least one, or leave it out to "
                            "have the model write them")
        if not 1 <= n <= 10:
            raise UserError(f"n={n} checkpoints", "use 1 to 10")
        self.checkpoints = checkpoints
        self.n = n
        self.title = "checklist"
        self._written: dict[str, list[str]] = {}  # task hash -> checkpoints the model wrote

    async def _checkpoints(self, t: Trajectory, model: ChatModel) -> list[str]:
        if self.checkpoints is not None:
            return self.checkpoints
        key = t.task.hash()
        if key not in self._written:
            schema = {"type": "object", "properties": {"checkpoints": {
                "type": "array", "minItems": self.n, "maxItems": self.n,
                "items": {"type": "string", "minLength": 3, "maxLength": 200}}},
                "required": ["checkpoints"], "additionalProperties": False}
            reply = await ask(model, SYSTEM, CHECKPOINTS_PROMPT.format(
                n=self.n, task=task_text(t)[: self.token_budget * 2]), schema, self.params)
            self._written[key] = [c.strip() for c in reply["checkpoints"]]
        return self._written[key]

    async def judge(self, trajectory: Trajectory, model: ChatModel) -> Verdict:
        points = await self._checkpoints(trajectory, model)
        keys = [f"c{i + 1}" for i in range(len(points))]
        text, cut = self._transcript(trajectory)
        prompt = CHECKLIST_PROMPT.format(
            checkpoints="\n".join(f"- {k}: {p}" for k, p in zip(keys, points, strict=True)),
            cut=cut, transcript=text, names=", ".join(keys))
        reply = await ask(model, SYSTEM, prompt,
                          _per_key(keys, [{"type": "boolean"}] * len(keys)), self.params)
        met = [bool(reply[k]["value"]) for k in keys]
        why = "\n".join(f"[{'x' if m else ' '}] {p} — {reply[k]['explanation'].strip()}"
                        for k, p, m in zip(keys, points, met, strict=True))
        fb = judge_feedback(trajectory, "checklist", sum(met) / len(met), why, self.title)
        return Verdict(feedback=[fb], detail={"checkpoints": points, "met": met})
