"""The ``pairwise`` judge: which of two trajectories of the same task did better.

Position bias is the best-known flaw of pairwise LLM judges, so by default each pair is judged
in both orders (A first, then B first). A verdict that flips with the order is a tie — the
judge preferred a position, not an agent — and the judgement's detail keeps both orders so
``sharpen judge validate`` can report the flip rate. The record is one
``Feedback(source="judge", versus=b.id)`` on ``a``: 1 when ``a`` is preferred, 0 when ``b``
is, 0.5 for a tie; ``sharpen export --format preference`` reads it.
"""

from __future__ import annotations

from typing import Any, Literal

from sharpen.core.errors import UserError
from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.core.registry import register
from sharpen.core.trajectory import Trajectory
from sharpen.judges.ask import EXPLANATION_CHARS, ask
from sharpen.judges.base import BaseJudge, JudgeError, Verdict
from sharpen.judges.pointwise import CUT_NOTE, SYSTEM
from sharpen.judges.rubric import Criterion
from sharpen.judges.transcript import render, task_text
from sharpen.models.base import ChatModel

Winner = Literal["A", "B", "tie"]

PAIR_PROMPT = """Two agents attempted the same task. Judge which did better on this \
criterion: {criterion}

Task:
{task}

{cut}Agent A:
{a}

Agent B:
{b}

Reply with a JSON object: "explanation" (one or two sentences), then "winner": "A", "B" or \
"tie"."""

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"explanation": {"type": "string", "maxLength": EXPLANATION_CHARS},
                   "winner": {"type": "string", "enum": ["A", "B", "tie"]}},
    "required": ["explanation", "winner"], "additionalProperties": False,
}

SHARE = {"A": 1.0, "B": 0.0, "tie": 0.5}
"""``a``'s share of the preference for a verdict in the (a, b) order."""


def _steps_only(t: Trajectory, budget: int) -> tuple[str, bool]:
    text, cut = render(t, budget)
    return text.split("\n\n", 1)[1] if "\n\n" in text else text, cut


@register("judge", "pairwise")
class PairwiseJudge(BaseJudge):
    """A vs B on ``criterion`` (default: which did the task better), both orders unless
    ``both_orders=False``; each transcript cut to ``token_budget`` tokens (default 600, so that
    two fit the embedded model's context)."""

    prompt = SYSTEM + PAIR_PROMPT
    pairwise = True

    def __init__(self, criterion: str = "preference",
                 description: str = "which agent did the task better (correct first, then "
                                    "clear and efficient)",
                 both_orders: bool = True, token_budget: int = 600,
                 params: dict[str, Any] | None = None) -> None:
        if token_budget < 100:
            raise UserError(f"token_budget={token_budget} leaves no room for a transcript",
                            "give at least 100 (the default is 600)")
        self.criterion = Criterion(name=criterion, description=description, scale="bool").name
        self.description = description
        self.both_orders = both_orders
        self.token_budget = token_budget
        self.params = dict(params or {})
        self.title = f"pairwise:{criterion}"

    async def judge(self, trajectory: Trajectory, model: ChatModel) -> list[Feedback]:
        raise JudgeError("the pairwise judge compares two trajectories; give it a pair "
                         "(sharpen judge RUN --versus OTHER_RUN)")

    async def _order(self, first: Trajectory, second: Trajectory,
                     model: ChatModel) -> dict[str, str]:
        a, cut_a = _steps_only(first, self.token_budget)
        b, cut_b = _steps_only(second, self.token_budget)
        prompt = PAIR_PROMPT.format(criterion=self.description,
                                    task=task_text(first)[: self.token_budget * 2],
                                    cut=CUT_NOTE if cut_a or cut_b else "", a=a, b=b)
        reply: dict[str, str] = await ask(model, SYSTEM, prompt, SCHEMA, self.params)
        return reply

    async def judge_pair(self, a: Trajectory, b: Trajectory, model: ChatModel) -> Verdict:
        if a.task.hash() != b.task.hash():
            raise JudgeError(f"a pair must share its task: {a.task.id!r} vs {b.task.id!r}")
        ab = await self._order(a, b, model)
        detail: dict[str, Any] = {"ab": ab["winner"]}
        share = SHARE[ab["winner"]]
        why = ab["explanation"]
        if self.both_orders:
            ba = await self._order(b, a, model)
            back = 1.0 - SHARE[ba["winner"]]  # B-first verdict in a's terms
            detail["ba"] = ba["winner"]
            detail["flipped"] = back != share
            if back != share:
                share = 0.5  # it preferred a position, not an agent
            why = (f"A first: {ab['winner']} — {ab['explanation'].strip()}\n"
                   f"B first: {ba['winner']} (A is then shown as B) — {ba['explanation'].strip()}"
                   + ("\nThe verdict flipped with the order: a tie." if detail["flipped"] else ""))
        # on the trajectory, not a cited step: both transcripts number their steps from S0
        fb = Feedback(source="judge", name=self.criterion, value=share, rationale=why.strip(),
                      author=self.title, versus=b.id,
                      target=FeedbackTarget(kind="trajectory", run_id=a.run_id,
                                            trajectory_id=a.id))
        return Verdict(feedback=[fb], detail=detail)
