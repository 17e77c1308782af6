"""The built-in detectors of how an episode goes wrong, read off its stored steps.

- ``loop`` — the same action met by the same (counter-masked) observation, or a cycle of up
  to ``max_period`` such steps, ``min_repeats`` times in a row;
- ``stall`` — ``k`` valid steps in a row, with different actions, whose observation does not
  change;
- ``invalid_burst`` — ``k`` or more invalid actions in a row (unparseable, or refused by the
  environment);
- ``ignored_error`` — a tool error answered by the very same action, or by finishing at once;
- ``limit_hit`` — the episode cut short (a step, token, time or cost limit, or the
  environment's own), or ended without the environment ending it, or with no step at all;
- ``context_overflow`` — an empty reply with no output tokens (the prompt outgrew the
  model's context), and, with ``cut_off``, replies cut off at ``max_tokens``.

``reward_hacking`` lives in :mod:`sharpen.diagnose.hacking`. What each one does not see:
docs/diagnose.md.
"""

from __future__ import annotations

from itertools import pairwise

from sharpen.core.feedback import Feedback
from sharpen.core.registry import register
from sharpen.core.trajectory import Step, Trajectory
from sharpen.diagnose.base import BaseDetector
from sharpen.diagnose.steps import action_key, action_text, clip, masked, tool_error, valid


def _at_least(name: str, value: int, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be an integer ≥ {least}, got {value!r}")
    return value


@register("detector", "loop")
class LoopDetector(BaseDetector):
    """The agent repeats itself: the same action meets the same observation (numbers masked),
    or a cycle of up to ``max_period`` steps recurs, ``min_repeats`` times in a row. One
    finding per repetition, on the step where the repeated block starts; ``value`` is the
    number of repeats."""

    name = "loop"
    needs_messages = False
    description = "the same action and observation, or a short cycle of them, repeated"

    def __init__(self, min_repeats: int = 3, max_period: int = 3) -> None:
        self.min_repeats = _at_least("min_repeats", min_repeats, 2)
        self.max_period = _at_least("max_period", max_period, 1)

    def detect(self, trajectory: Trajectory) -> list[Feedback]:
        steps = trajectory.steps
        states = [(action_key(s), masked(s.observation)) if valid(s) else None for s in steps]
        if len(set(states)) == len(states):  # no state recurs: no repeat of any period
            return []
        covered: set[int] = set()
        found: list[Feedback] = []
        for period in range(1, self.max_period + 1):
            i = period
            while i < len(states):
                j = i
                while j < len(states) and states[j] is not None and states[j] == states[j - period]:
                    j += 1
                start, end = i - period, j  # steps[start:end] repeat with this period
                repeats = (end - start) // period
                block = set(range(start, end))
                distinct = len({states[k] for k in range(start, start + period)})
                if repeats >= self.min_repeats and distinct == period and not block & covered:
                    covered |= block
                    what = (f"the same action {action_text(steps[start])} met the same "
                            "observation" if period == 1 else
                            f"a cycle of {period} actions ("
                            + "; ".join(action_text(steps[k], 60) for k in range(start, start + period))
                            + ")")
                    found.append(self.finding(
                        trajectory, steps[start].index,
                        f"{what} {repeats} times in a row from step {steps[start].index}",
                        repeats))
                i = max(j, i + 1)
        return sorted(found, key=lambda f: f.target.step_index or 0)


@register("detector", "stall")
class StallDetector(BaseDetector):
    """No visible progress: ``k`` valid steps in a row, with at least two different actions,
    get the same observation (numbers masked) and no reward. (One action repeated is a
    ``loop``.) One finding per stall, on its first step; ``value`` is its length."""

    name = "stall"
    needs_messages = False
    description = "several different actions in a row that change nothing the agent sees"

    def __init__(self, k: int = 4) -> None:
        self.k = _at_least("k", k, 2)

    def detect(self, trajectory: Trajectory) -> list[Feedback]:
        found: list[Feedback] = []
        run: list[Step] = []
        for step in [*trajectory.steps, None]:
            if (step is not None and valid(step) and step.reward == 0 and run
                    and masked(step.observation) == masked(run[0].observation)):
                run.append(step)
                continue
            if len(run) >= self.k and len({action_key(s) for s in run}) > 1:
                found.append(self.finding(
                    trajectory, run[0].index,
                    f"{len(run)} steps from step {run[0].index} with "
                    f"{len({action_key(s) for s in run})} different actions all got the same "
                    f"observation: {clip(run[0].observation or '(empty)', 120)!r}", len(run)))
            run = [step] if step is not None and valid(step) and step.reward == 0 else []
        return found


@register("detector", "invalid_burst")
class InvalidBurstDetector(BaseDetector):
    """``k`` or more invalid actions in a row: replies that could not be parsed into an
    action, or actions the environment refused (``Step.invalid_action``). One finding per
    burst, on its first step; ``value`` is its length."""

    name = "invalid_burst"
    needs_messages = False
    description = "several invalid actions in a row"

    def __init__(self, k: int = 3) -> None:
        self.k = _at_least("k", k, 1)

    def detect(self, trajectory: Trajectory) -> list[Feedback]:
        found: list[Feedback] = []
        run: list[Step] = []
        for step in [*trajectory.steps, None]:
            if step is not None and step.invalid_action is not None:
                run.append(step)
                continue
            if len(run) >= self.k:
                found.append(self.finding(
                    trajectory, run[0].index,
                    f"{len(run)} invalid actions in a row from step {run[0].index}; the first: "
                    f"{clip(run[0].invalid_action or '', 160)!r}", len(run)))
            run = []
        return found


@register("detector", "ignored_error")
class IgnoredErrorDetector(BaseDetector):
    """A tool error (:func:`~sharpen.diagnose.steps.tool_error`) the agent does not act on:
    the next step sends the very same action, or (with ``finish``) ends the episode at once
    with an argument-less call such as ``done``. The finding is on that next step."""

    name = "ignored_error"
    needs_messages = False
    description = "a tool error answered by the same action, or by finishing at once"

    def __init__(self, finish: bool = True) -> None:
        self.finish = finish

    def detect(self, trajectory: Trajectory) -> list[Feedback]:
        found: list[Feedback] = []
        for prev, step in pairwise(trajectory.steps):
            error = tool_error(prev)
            if error is None or not valid(step):
                continue
            if action_key(step) == action_key(prev):
                found.append(self.finding(
                    trajectory, step.index,
                    f"step {prev.index} failed ({error}) and step {step.index} sent the same "
                    f"action again: {action_text(step)}"))
            elif self.finish and _finishes(step, prev):
                found.append(self.finding(
                    trajectory, step.index,
                    f"step {prev.index} failed ({error}) and step {step.index} ended the "
                    f"episode at once with {action_text(step)}"))
        return found


def _finishes(step: Step, prev: Step) -> bool:
    """``step`` ends the episode with an argument-less call of another tool than ``prev``'s."""
    return (step.terminated and step.action is not None and not step.action.arguments
            and prev.action is not None and step.action.tool != prev.action.tool)


@register("detector", "limit_hit")
class LimitHitDetector(BaseDetector):
    """The episode did not end by the environment's verdict: a step was cut short
    (``Step.truncated``: the agent's step, token, time or cost limit — ``info["limit"]`` names
    it — or the environment's own turn limit), or the last step left the episode open (the
    tool agent's ``max_steps``, or an agent that stopped without submitting), or the agent
    took no step at all (a give-up). Trajectories that ended in an error other than the
    agent's are left alone (no step there is not the agent's doing)."""

    name = "limit_hit"
    needs_messages = False
    description = "cut short by a limit, or stopped without the environment ending the episode"

    def detect(self, trajectory: Trajectory) -> list[Feedback]:
        outcome = trajectory.outcome
        if outcome is not None and not outcome.counts:
            return []
        steps = trajectory.steps
        if not steps:
            return [self.finding(trajectory, None, "the agent took no step (gave up at once)")]
        for step in steps:
            if step.truncated:
                limit = step.info.get("limit")
                why = f"the agent's {limit}" if isinstance(limit, str) else "the environment"
                return [self.finding(trajectory, step.index,
                                     f"step {step.index} was cut short by {why}")]
        last = steps[-1]
        if last.terminated:
            return []
        return [self.finding(
            trajectory, last.index,
            f"the episode stopped after {len(steps)} step{'s' * (len(steps) != 1)} without the "
            "environment ending it (the step limit, or the agent stopped without submitting)")]


@register("detector", "context_overflow")
class ContextOverflowDetector(BaseDetector):
    """The conversation outgrew the model: an empty reply with no output tokens after a
    non-empty prompt (what the embedded model answers, ``finish_reason="length"``, when the
    prompt exceeds its context). With ``cut_off``, also replies cut off at the token limit
    (the agents' "Your reply was cut off" feedback). ``value``: the prompt's tokens."""

    name = "context_overflow"
    needs_messages = False
    description = "an empty reply at the context limit, or a reply cut off at max_tokens"

    def __init__(self, cut_off: bool = True) -> None:
        self.cut_off = cut_off

    def detect(self, trajectory: Trajectory) -> list[Feedback]:
        found: list[Feedback] = []
        for step in trajectory.steps:
            usage = step.usage
            # No output token from a call that read a prompt: nothing was generated, so the
            # reply was empty (read off the usage: a diagnosis need not load the messages).
            if usage.calls > 0 and usage.input_tokens > 0 and usage.output_tokens == 0:
                found.append(self.finding(
                    trajectory, step.index,
                    f"empty reply with no output tokens after a {usage.input_tokens}-token "
                    "prompt: the conversation no longer fit the model's context",
                    usage.input_tokens))
            elif self.cut_off and "cut off" in (step.invalid_action or ""):
                found.append(self.finding(
                    trajectory, step.index,
                    f"the reply was cut off at the token limit ({usage.output_tokens} output "
                    "tokens) before its action was complete", usage.input_tokens))
        return found
