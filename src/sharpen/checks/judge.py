"""``check_judge``: does a judge keep the :class:`~sharpen.judges.base.Judge` contract?

Checks:

- ``build`` — the registry builds it (the contract's members present);
- ``members`` — its optional members have the right types (``prompt`` and ``title`` str,
  ``pairwise`` and ``needs_reference`` bool; a pairwise judge has ``judge_pair``);
- ``judge`` — on two short trajectories (a solved and an unsolved one of the same task) it
  returns feedback (a list or a :class:`~sharpen.judges.base.Verdict`): at least one record,
  each ``source="judge"``, named, with a number, bool, label or ``None`` as its value, about
  the trajectory it was given; or raises :class:`~sharpen.judges.base.JudgeError` — anything
  else it raises is a fault (``sharpen judge`` would stop on it);
- ``repeat`` — judging the same trajectory again gives the same values (a note when not:
  a sampling judge is allowed, but its scores then carry noise).

The judge's model is real: ``model`` must be reachable (the embedded one by default).
"""

from __future__ import annotations

import asyncio
from typing import Any

from sharpen.checks.report import CheckReport, explain, plugin_ref
from sharpen.core.feedback import Feedback
from sharpen.core.messages import Message
from sharpen.core.registry import REGISTRY, PluginRef, Registry
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action, Step, Trajectory
from sharpen.judges.base import JUDGE, REFERENCE, Judge, JudgeError, as_verdict, judge_info
from sharpen.judges.runner import PairJudge, build_judge_model, resolve_judge
from sharpen.models.base import ChatModel

TASK = TaskSpec(env="check", id="add", metadata={REFERENCE: "def add(a, b):\n    return a + b"})
PROMPT = "Write a Python function add(a, b) that returns the sum of a and b."


def sample(solved: bool) -> Trajectory:
    """A one-step trajectory of :data:`TASK`: the right answer, or a wrong one."""
    code = "def add(a, b):\n    return a + b" if solved else "def add(a, b):\n    return a - b"
    obs = "score 3/3: all tests passed" if solved else "score 0/3: add(1, 2) returned -1, not 3"
    step = Step(index=0, messages=[Message(role="assistant", content=f"```python\n{code}\n```")],
                action=Action(tool="submit", arguments={"code": code}), observation=obs,
                terminated=True)
    return Trajectory(run_id="check", task=TASK, agent_hash="check", steps=[step],
                      messages=[Message(role="user", content=PROMPT)])


def feedback_faults(records: list[Feedback], t: Trajectory) -> list[str]:
    """How a judge's records break the contract (empty when they keep it)."""
    if not records:
        return ["it returned no feedback: return one Feedback per criterion, or raise JudgeError"]
    out = []
    for fb in records:
        if fb.source != "judge":
            out.append(f"record {fb.name!r} has source {fb.source!r}: use source='judge'")
        if not fb.name.strip():
            out.append("a record has no name: name it after its criterion")
        if fb.target.trajectory_id not in (None, t.id):
            out.append(f"record {fb.name!r} targets trajectory {fb.target.trajectory_id!r}, "
                       f"not the one judged ({t.id!r})")
    return out


async def _once(judge: Judge, chat: ChatModel, t: Trajectory, other: Trajectory | None,
                r: CheckReport) -> list[Feedback] | None:
    try:
        if other is not None:
            assert isinstance(judge, PairJudge)
            records = (await judge.judge_pair(t, other, chat)).feedback
        else:
            records = as_verdict(await judge.judge(t, chat)).feedback
    except JudgeError as exc:
        r.note("judge", f"no verdict on one trajectory (a judge error, allowed): {exc}")
        return None
    except Exception as exc:  # noqa: BLE001 — every failure becomes a problem
        r.fail("judge", f"judging raised {explain(exc)}; raise "
               "sharpen.judges.base.JudgeError when there is no verdict")
        return None
    for fault in feedback_faults(records, t):
        r.fail("judge", fault)
    return records


async def acheck_judge(
    judge: str | PluginRef | dict[str, Any], *, args: dict[str, Any] | None = None,
    model: str | PluginRef | dict[str, Any] = "local", registry: Registry = REGISTRY,
) -> CheckReport:
    """Check the judge ``judge`` (a rubric file, ``rubric:NAME``, a name, a reference or
    ``{name, args}``; ``args`` merged over its own) with the model ``model`` on two short
    trajectories. Never raises for a failed check."""
    r = CheckReport(kind="judge", name=judge if isinstance(judge, str) else str(judge))
    try:
        # a name as `sharpen judge --judge` takes it: a rubric file, rubric:NAME, a judge name
        ref = plugin_ref(resolve_judge(judge) if isinstance(judge, str) else judge, args)
        built: Judge = registry.create(JUDGE, ref)
        info = judge_info(built)
    except Exception as exc:  # noqa: BLE001
        r.fail("build", f"cannot build the judge: {explain(exc)}")
        return r
    r.pass_("build", f"{type(built).__qualname__} meets the Judge contract")
    if info.pairwise and not isinstance(built, PairJudge):
        r.fail("members", "pairwise is True but there is no judge_pair(a, b, model)")
        return r
    r.pass_("members", f"pairwise {info.pairwise}, needs_reference {info.needs_reference}, "
            f"prompt of {len(info.prompt)} characters")
    chat = build_judge_model(plugin_ref(model, None), registry)
    try:
        good, bad = sample(True), sample(False)
        first = await _once(built, chat, good, bad if info.pairwise else None, r)
        await _once(built, chat, bad, good if info.pairwise else None, r)
        if not r.failed("judge"):
            r.pass_("judge", "feedback on the trajectory it was given, or a JudgeError")
        if first is not None and not r.failed("judge"):
            again = await _once(built, chat, good, bad if info.pairwise else None, r)
            if again is not None and [f.value for f in again] != [f.value for f in first]:
                r.note("repeat", "the same trajectory got other values the second time: its "
                       "scores carry sampling noise")
            elif again is not None:
                r.pass_("repeat", "the same values on the same trajectory")
    finally:
        await chat.aclose()
    return r


def check_judge(
    judge: str | PluginRef | dict[str, Any], *, args: dict[str, Any] | None = None,
    model: str | PluginRef | dict[str, Any] = "local", registry: Registry = REGISTRY,
) -> CheckReport:
    """:func:`acheck_judge` from synchronous code."""
    return asyncio.run(acheck_judge(judge, args=args, model=model, registry=registry))
