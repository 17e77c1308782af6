"""What the engine maximises: an :class:`Objective` turns a spec's stored trajectories into one
score per task in [0, 1] — the only place where the engine reads how an episode went, so the
gate, validation, parent choice, the winner and the held-out verdict all follow it.

- ``success`` (the default): 1 for a counted success, 0 otherwise (an episode that ended in an
  environment or infra error counts as a failure, as it always has here).
- ``judge:J[:CRITERION]``: after each evaluation run the judge ``J`` (a rubric file,
  ``rubric:NAME`` or a registered pointwise judge, as ``sharpen judge --judge``) judges the
  run's trajectories with :func:`~sharpen.judges.runner.judge_run` — judgements go to
  ``judge_calls`` and the judge's feedback onto the trajectories, as ``sharpen judge`` stores
  them — and a task's score is the judge's value of ``CRITERION``, or the mean over the
  judge's criteria, scaled to [0, 1]: a rubric criterion by its scale (``bool`` 0/1, a range
  ``LOW-HIGH`` as ``(v - LOW) / (HIGH - LOW)``, labels by position, worst 0 and best 1); a judge
  without a rubric must give true/false or a number in [0, 1] (as ``checklist`` does).
  A judgement that failed (error kind ``judge``) or gave a value off that scale leaves the task
  **unscored**: excluded from every comparison and counted (``judge_errors``). An episode the
  agent did not play (an env/infra error) is not judged and scores 0, as under ``success``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel

from sharpen.core.errors import UserError
from sharpen.core.feedback import Feedback
from sharpen.core.messages import Usage
from sharpen.core.registry import REGISTRY, PluginRef, Registry
from sharpen.core.trajectory import Trajectory
from sharpen.judges.base import JUDGE, judge_info
from sharpen.judges.rubric import Criterion, Rubric
from sharpen.judges.runner import JudgeSetup, judge_run, judgeable, resolve_judge
from sharpen.models.base import ChatModel
from sharpen.runner.retry import RetryingModel, RetryPolicy
from sharpen.store.store import Store

SUCCESS = "success"
"""The default objective's name."""


class ObjectiveSpec(BaseModel):
    """An objective as the experiment config holds it: ``judge`` unset means ``success``."""

    judge: JudgeSetup | None = None
    """The judge and its model (``--judge-model``, default the seed spec's model)."""
    criterion: str | None = None
    """The one criterion scored; ``None``: the mean over the judge's criteria."""

    @property
    def is_success(self) -> bool:
        """Whether this is the default objective."""
        return self.judge is None

    def label(self) -> str:
        """``success``, ``judge:rubric:NAME``, ``judge:NAME:CRITERION``, ... (for reports)."""
        if self.judge is None:
            return SUCCESS
        ref = self.judge.judge
        name = f"rubric:{ref.args['rubric']['name']}" if ref.name == "rubric" else ref.name
        return f"judge:{name}" + (f":{self.criterion}" if self.criterion else "")


def parse_objective(text: str, *, seed_model: PluginRef, judge_model: PluginRef | None = None,
                    registry: Registry = REGISTRY) -> ObjectiveSpec:
    """``--objective``: ``success``, or ``judge:J[:CRITERION]`` with ``J`` a rubric file, a
    shipped ``rubric:NAME`` or a registered pointwise judge. The judge is built once here, so a
    bad judge, a pairwise one or an unknown rubric criterion fails before any rollout."""
    if text == SUCCESS:
        return ObjectiveSpec()
    if not text.startswith("judge:") or text == "judge:":
        raise UserError(f"unknown objective {text!r}",
                        "use --objective success or --objective judge:RUBRIC.yaml[:CRITERION]")
    rest = text.removeprefix("judge:")
    if rest.startswith("rubric:"):  # a shipped rubric's name holds a colon of its own
        head, _, criterion = rest.removeprefix("rubric:").partition(":")
        name = f"rubric:{head}"
    else:
        name, _, criterion = rest.partition(":")
    setup = JudgeSetup(judge=resolve_judge(name, registry), model=judge_model or seed_model)
    judge = registry.create(JUDGE, setup.judge)
    if judge_info(judge).pairwise:
        raise UserError(f"{name} is a pairwise judge; an objective scores one trajectory",
                        "use a rubric or a pointwise judge")
    spec = ObjectiveSpec(judge=setup, criterion=criterion or None)
    scales = _scales(setup.judge)
    if criterion and scales and criterion not in scales:
        raise UserError(f"the rubric has no criterion {criterion!r}",
                        f"use one of {', '.join(sorted(scales))}")
    return spec


@dataclass
class Scored:
    """What an objective made of one run's trajectories."""

    scores: dict[str, float | None]
    """Trajectory id → score in [0, 1]; ``None``: unscored (a judge error)."""
    judge_errors: int = 0
    """Trajectories left unscored."""
    usage: Usage = field(default_factory=Usage)
    """The judge model's usage (none for ``success``)."""


class Objective(Protocol):
    """Scores the trajectories of one evaluation run (see the module doc)."""

    def label(self) -> str:
        """The objective's name in reports."""
        ...

    async def score(self, store: Store, run_id: str, trajectories: Sequence[Trajectory]) -> Scored:
        """A score per trajectory of ``run_id`` (``trajectories`` are its new ones)."""
        ...


class SuccessObjective:
    """1 for a counted success, else 0."""

    def label(self) -> str:
        return SUCCESS

    async def score(self, store: Store, run_id: str, trajectories: Sequence[Trajectory]) -> Scored:
        return Scored({t.id: 1.0 if succeeded(t) else 0.0 for t in trajectories})


def succeeded(t: Trajectory) -> bool:
    """Whether ``t`` counts as a success (a verdict of success, not an errored episode)."""
    return bool(t.outcome and t.outcome.success and t.outcome.counts)


class JudgeObjective:
    """A judge's score (see the module doc). ``model`` is the judge's model, shared by every
    evaluation of the experiment (the caller closes it)."""

    def __init__(self, spec: ObjectiveSpec, model: ChatModel, registry: Registry = REGISTRY,
                 concurrency: int = 1) -> None:
        if spec.judge is None:
            raise ValueError("a judge objective needs a judge")
        self.spec = spec
        self.concurrency = concurrency
        self.setup = spec.judge
        self.model = model
        self.registry = registry
        self.scales = _scales(self.setup.judge)
        self.judge_hash = self.setup.hash(registry=registry)

    def label(self) -> str:
        return self.spec.label()

    async def score(self, store: Store, run_id: str, trajectories: Sequence[Trajectory]) -> Scored:
        summary = await judge_run(store, run_id, self.setup, resume=True, model=self.model,
                                  registry=self.registry, concurrency=self.concurrency)
        done = {j.trajectory_id: j.id for j in store.judgements(run_id, self.judge_hash)
                if j.status == "ok"}
        wanted = {t.id for t in trajectories}
        feedback = {t.id: t.feedback for t in store.iter_trajectories(run_id, with_steps=False)
                    if t.id in wanted}
        out = Scored({}, usage=summary.usage)
        for t in trajectories:
            if not judgeable(t):
                out.scores[t.id] = 0.0  # not played by the agent: a failure, as under success
                continue
            call = done.get(t.id)
            value = None if call is None else self._value(
                [fb for fb in feedback.get(t.id, []) if fb.call_id == call and not fb.versus])
            out.scores[t.id] = value
            out.judge_errors += value is None
        return out

    def _value(self, records: list[Feedback]) -> float | None:
        """The judgement's score: one criterion, or the mean of all; ``None`` when a value
        is missing or off the scale."""
        if self.spec.criterion is not None:
            records = [fb for fb in records if fb.name == self.spec.criterion]
        values = [scaled(fb.value, self.scales.get(fb.name)) for fb in records]
        if not values or any(v is None for v in values):
            return None
        return sum(v for v in values if v is not None) / len(values)


def scaled(value: Any, criterion: Criterion | None) -> float | None:
    """``value`` on [0, 1]: by ``criterion``'s scale when the judge declares one (a rubric),
    else true/false as 1/0 and a number in [0, 1] as itself; ``None`` otherwise."""
    if criterion is None:
        if isinstance(value, bool):
            return float(value)
        if isinstance(value, int | float) and 0.0 <= value <= 1.0:
            return float(value)
        return None
    x = criterion.as_number(value)
    if x is None:
        return None
    choices = criterion.choices()
    if criterion.scale == "bool":
        return x
    if isinstance(criterion.scale, list):
        return x / (len(choices) - 1)
    low, high = float(choices[0]), float(choices[-1])
    return (x - low) / (high - low)


def _scales(ref: PluginRef) -> dict[str, Criterion]:
    """The declared scale of each criterion: a rubric judge's; none for other judges."""
    if ref.name != "rubric":
        return {}
    return {c.name: c for c in Rubric.parse(ref.args["rubric"]).criteria}


def build_objective(spec: ObjectiveSpec, model: ChatModel | None,
                    registry: Registry = REGISTRY, concurrency: int = 1) -> Objective:
    """The objective ``spec`` names; a judge's ``model`` is retried on infra errors as
    ``sharpen judge`` retries it, and judges up to ``concurrency`` trajectories at once."""
    if spec.judge is None:
        return SuccessObjective()
    if model is None:
        raise ValueError("a judge objective needs the judge's model")
    return JudgeObjective(spec, RetryingModel(model, RetryPolicy(max_retries=4), random.Random(0)),
                          registry, concurrency)
