"""Counterfactual attribution (AgenTracer): the step whose fix turns a failed episode into a
solved one.

For a failed trajectory with actions ``a_0..a_{n-1}`` and each ``k`` in turn, the episode is
replayed (:mod:`sharpen.diagnose.replay`) with the first ``k`` actions as played, a corrected
action at step ``k``, and then the trajectory's own later actions ``a_{k+1}..`` — the default
continuation: the agent is assumed to have acted as it did, so only step ``k`` changes —
until the environment ends the episode. The earliest ``k`` whose fix makes the environment's
verdict a success is the **decisive step**; it is stored as ``Feedback(source="detector",
name="decisive_step")`` on that step, the corrected action in the rationale, with a
deterministic id (attributing a run again stores nothing twice).

Where the corrected action comes from (a :data:`Fixer`):

- ``reference`` (:func:`reference_fix`): in an environment with reference actions, the next
  reference action the trajectory has not yet taken — ``ref[j]``, where ``ref[:j]`` is the
  longest run of reference actions found in order among the first ``k`` actions (so a detour
  of extra actions does not hide a later error; whether the detour changed the state is for
  the replay to show); in an environment whose reference is one answer
  (``reference_solution``: code, sql), submitting that answer, which is the reference agent's
  action from any state. A step whose action already is the fix is not tried.
- ``resample`` (:class:`~sharpen.diagnose.resample.ModelFix`): the action a model takes at
  step ``k`` given the stored conversation so far — the run's own model resampled at
  temperature 1, or, from Python, another (a stronger) model.
- a fixer of your own: any async ``(env, trajectory, actions, k) -> Action | None``.

Before any counterfactual, the trajectory is replayed as stored and compared byte for byte
(:func:`~sharpen.diagnose.replay.divergence`); one whose rewards, info, flags or outcome do
not replay is reported ``diverged`` and not attributed. One whose observations alone differ
(a shell command that prints the sandbox's path or the clock) is attributed, with a note
saying so: the later actions are kept as played, so no observation changes them, and the
verdict is on the environment's state, which did replay. Steps whose reply held no action
are not replayed (the environment never saw them) and are not candidates. Trajectories of
several trials (``reflexion``) are not attributed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

from pydantic import BaseModel, Field

from sharpen.agents.baselines import answer_tool
from sharpen.core.errors import UserError
from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.core.hashing import content_hash
from sharpen.core.outcome import Outcome
from sharpen.core.registry import REGISTRY, PluginRef, Registry
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action, Trajectory
from sharpen.diagnose.decisive import NAME
from sharpen.diagnose.replay import (
    NotReplayable,
    divergence,
    played,
    replay,
    replay_trajectory,
    run_env,
)
from sharpen.diagnose.run import Share, share
from sharpen.envs.base import Environment
from sharpen.store import Store

Status = Literal["flipped", "no_flip", "not_failed", "not_replayable", "diverged",
                 "no_fix", "several_trials"]
"""How attributing one trajectory ended: ``flipped`` (a decisive step found), ``no_flip``
(fixes were tried and none turned it into a success), ``not_failed`` (solved, or an error
not the agent's), ``not_replayable`` (the environment says so), ``diverged`` (its rewards,
flags, info or outcome replay differently from what was stored), ``no_fix`` (the fixer had
no action for any step), ``several_trials``."""

Fixer = Callable[[Environment, Trajectory, Sequence[Action], int], Awaitable[Action | None]]
"""``await fixer(env, trajectory, actions, k)``: the corrected action at step ``k`` of
``trajectory``, whose replayed actions are ``actions``, or ``None`` when there is none.
``env`` is the run's environment, built but not reset (read its reference and tools; do not
play it)."""


def reference_fix(env: Environment, task: TaskSpec, actions: Sequence[Action],
                  k: int) -> Action | None:
    """The reference's action at step ``k`` (see the module doc)."""
    ref = env.reference_actions(task)
    if ref is not None:
        j = 0
        for action in actions[:k]:
            if j < len(ref) and action == ref[j]:
                j += 1
        return ref[j] if j < len(ref) else None
    solution = env.reference_solution(task)
    tool = answer_tool(env.tools)
    if solution is None or tool is None or tool.text_argument is None:
        return None
    return Action(tool=tool.name, arguments={tool.text_argument: solution})


async def by_reference(env: Environment, trajectory: Trajectory, actions: Sequence[Action],
                       k: int) -> Action | None:
    """:func:`reference_fix` as a :data:`Fixer`."""
    return reference_fix(env, trajectory.task, actions, k)


FIXERS = ("reference", "resample")
"""The built-in fixers' names (``sharpen attribute --fix``)."""


class Attempt(BaseModel):
    """One counterfactual: step ``step``'s action replaced by ``action``."""

    step: int
    """The stored step's index."""
    action: Action
    success: bool
    reward: float


class Attribution(BaseModel):
    """What attributing one trajectory found."""

    trajectory_id: str
    task_id: str
    status: Status
    decisive_step: int | None = None
    """The earliest step whose fix flips the outcome (``flipped`` only)."""
    corrected: Action | None = None
    """The fix at the decisive step."""
    original: Action | None = None
    """The action the agent took there."""
    stage: str | None = None
    """The stage of the action the agent took there, where the environment declares stages
    (``env.stage``)."""
    fix_stage: str | None = None
    """The stage of the fix (what the step should have done)."""
    attempts: list[Attempt] = Field(default_factory=list)
    """Every counterfactual tried, in step order (the last one flipped, if any)."""
    note: str = ""
    """Why there is no decisive step (divergence, non-replayability)."""


async def attribute(trajectory: Trajectory, env_ref: PluginRef, fixer: Fixer = by_reference,
                    registry: Registry = REGISTRY) -> Attribution:
    """Attribute ``trajectory`` (a stored one of a run whose environment is ``env_ref``) with
    corrections from ``fixer`` (see the module doc)."""
    out = Attribution(trajectory_id=trajectory.id, task_id=trajectory.task.id, status="no_fix")
    o = trajectory.outcome
    if o is None or o.success or not o.counts:
        out.status = "not_failed"
        return out
    trials = played(trajectory)
    if len(trials) > 1:
        out.status = "several_trials"
        return out
    try:
        stored = await replay_trajectory(trajectory, env_ref, registry)
    except NotReplayable as exc:
        out.status, out.note = "not_replayable", str(exc)
        return out
    gap = divergence(trajectory, stored)
    if gap is not None:
        out.note = (f"step {gap.step} {gap.field}: stored {gap.stored[:80]!r}, "
                    f"replayed {gap.replayed[:80]!r}")
        if divergence(trajectory, stored, ignore=("observation",)) is not None:
            out.status = "diverged"
            return out
        # Only the text differs (a sandbox path, a clock): rewards, info and the outcome
        # replay, and the later actions are kept as played, so no observation changes them.
        out.note = "observations differ, attributed on the rest: " + out.note
    indexes = [i for i, _ in trials[0]]
    actions = [a for _, a in trials[0]]
    env = run_env(env_ref, registry)
    try:
        for k in range(len(actions)):
            fix = await fixer(env, trajectory, actions, k)
            if fix is None or fix == actions[k]:
                continue
            counter = [*actions[:k], fix, *actions[k + 1:]]
            result = await replay(env, trajectory.task, counter, indexes)
            out.attempts.append(Attempt(step=indexes[k], action=fix,
                                        success=_solved(result.outcome),
                                        reward=result.outcome.reward))
            if out.attempts[-1].success:
                out.status, out.decisive_step = "flipped", indexes[k]
                out.corrected, out.original = fix, actions[k]
                out.stage, out.fix_stage = env.stage(actions[k]), env.stage(fix)
                return out
    finally:
        await env.close()
    if out.attempts:
        out.status = "no_flip"
    return out


def _solved(o: Outcome) -> bool:
    return o.success and o.counts


def finding(trajectory: Trajectory, a: Attribution, fixer_name: str) -> Feedback | None:
    """The stored record of a decisive step (``None`` unless ``a`` flipped): on the step,
    ``value`` the step index, the fix in the rationale; its id is a hash of the trajectory,
    the step and the fixer's name."""
    if a.status != "flipped" or a.decisive_step is None or a.corrected is None:
        return None
    tried = len(a.attempts) - 1
    rationale = (f"step {a.decisive_step} decided the failure: replacing "
                 f"{_text(a.original)} with the {fixer_name} fix {_text(a.corrected)} (and "
                 f"keeping the later actions) solves the episode (reward "
                 f"{a.attempts[-1].reward:g}); {tried} earlier fix{'es' * (tried != 1)} did not")
    return Feedback(
        id=content_hash({"attribution": fixer_name, "trajectory": trajectory.id,
                         "step": a.decisive_step}, length=32),
        source="detector", name=NAME, value=a.decisive_step, rationale=rationale,
        author=f"attribution:{fixer_name}",
        target=FeedbackTarget(kind="step", run_id=trajectory.run_id,
                              trajectory_id=trajectory.id, step_index=a.decisive_step))


def _text(action: Action | None, limit: int = 200) -> str:
    if action is None:
        return "(no action)"
    args = ", ".join(f"{k}={v!r}" for k, v in action.arguments.items())
    text = f"{action.tool}({args})"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class AttributionSummary(BaseModel):
    """Attribution over a run's failed trajectories."""

    run_id: str
    fixer: str
    attributed: int
    """Failed trajectories attributed (replayable, with at least one fix tried)."""
    flipped: Share
    """Of ``attributed``, those with a decisive step (Wilson 95% interval)."""
    no_flip: int
    decisive_steps: dict[int, int]
    """Decisive step index -> trajectories."""
    decisive_stages: dict[str, int]
    """Stage of the action the agent took at the decisive step -> trajectories
    (environments that declare stages; ``none`` for an action no stage names)."""
    statuses: dict[str, int]
    """Every trajectory looked at, by :data:`Status`."""
    stored: int
    """Finding records newly stored."""
    results: list[Attribution] = Field(default_factory=list)


def summarise(run_id: str, fixer_name: str, results: Sequence[Attribution],
              stored: int = 0) -> AttributionSummary:
    """The summary of ``results``."""
    statuses = Counter(r.status for r in results)
    attributed = statuses["flipped"] + statuses["no_flip"]
    steps = Counter(r.decisive_step for r in results if r.decisive_step is not None)
    stages = Counter(r.stage or "none" for r in results if r.decisive_step is not None)
    return AttributionSummary(
        run_id=run_id, fixer=fixer_name, attributed=attributed,
        flipped=share(statuses["flipped"], attributed), no_flip=statuses["no_flip"],
        decisive_steps=dict(sorted(steps.items())), decisive_stages=dict(stages.most_common()),
        statuses=dict(sorted(statuses.items())),
        stored=stored, results=list(results))


def failed(trajectory: Trajectory) -> bool:
    """A counted attempt that failed (the ones attribution is for)."""
    o = trajectory.outcome
    return o is not None and o.counts and not o.success


async def attribute_run(store: Store, run_id: str, fixer_name: str = "reference",
                        limit: int | None = None, registry: Registry = REGISTRY,
                        on_done: Callable[[Attribution, int, int], None] | None = None,
                        samples: int = 1) -> AttributionSummary:
    """Attribute the failed trajectories of stored run ``run_id`` (the first ``limit``) with
    the fixer :data:`FIXERS` names (``resample``: the run's model, ``samples`` tries a step),
    on the run's environment (its manifest's ``env``); store each decisive step once
    (:func:`finding`). ``on_done(attribution, done, total)`` is told of each."""
    if fixer_name not in FIXERS:
        raise UserError(f"unknown fix {fixer_name!r}", f"use one of {', '.join(FIXERS)}")
    run_record = store.get_run(run_id)
    model = None
    fixer: Fixer = by_reference
    if fixer_name == "resample":
        from sharpen.diagnose.resample import ModelFix
        from sharpen.models.base import MODEL
        from sharpen.runner.compose import NO_MODEL

        spec = run_record.agent
        if spec.model == NO_MODEL:  # the model ref of an agent that needs none
            raise UserError(f"run {run_id}'s agent ({spec.agent.name}) uses no model to resample",
                            "use --fix reference")
        model = registry.create(MODEL, spec.model)
        fixer = ModelFix(model, spec, samples)
    todo = [t for t in store.iter_trajectories(run_id) if failed(t)]
    todo = todo if limit is None else todo[:limit]
    results: list[Attribution] = []
    stored = 0
    try:
        for t in todo:
            a = await attribute(t, run_record.manifest.env, fixer, registry)
            results.append(a)
            record = finding(t, a, fixer_name)
            if record is not None and record.id not in {fb.id for fb in t.feedback}:
                store.add_feedback(record)
                stored += 1
            if on_done is not None:
                on_done(a, len(results), len(todo))
    finally:
        if model is not None:
            await model.aclose()
    return summarise(run_id, fixer_name, results, stored)
