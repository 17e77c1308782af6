"""Validity checks of an environment: the null-agent ceiling and the reference-agent floor.

A benchmark whose checker passes an empty answer, or fails the known-correct one, measures
the checker rather than the agent. sharpen runs two agents that need no model
(:mod:`sharpen.agents.baselines`) to test that, per environment:

- **null-agent ceiling** — the ``null`` agent submits nothing; the newest stored null run on
  the environment must score at most :data:`NULL_CEILING` (5%);
- **reference-agent floor** — the ``reference`` agent submits the environment's reference
  solution; the newest stored reference run must score at least :data:`REFERENCE_FLOOR`
  (95%).

A check is ``ok``, ``failed`` (the report then warns loudly) or ``missing`` (the report says
which command stores the run). Runs are matched on the environment's name and args; when
only runs with other args exist, the newest of those is used and the message says so.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from sharpen.core.registry import PluginRef
from sharpen.store import RunRecord, Store

NULL_CEILING = 0.05
"""Highest success rate the null agent may reach."""
REFERENCE_FLOOR = 0.95
"""Lowest success rate the reference agent may reach."""
RECENT_RUNS = 200
"""How many of the newest runs on the environment are searched for a baseline run."""


class ValidityCheck(BaseModel):
    """One validity check of an environment."""

    agent: Literal["null", "reference"]
    """Which baseline agent."""
    status: Literal["ok", "failed", "missing"]
    """Outcome of the check."""
    threshold: float
    """The ceiling (null) or floor (reference)."""
    run_id: str | None = None
    """The stored baseline run used."""
    rate: float | None = None
    """Its success rate over valid trials."""
    same_args: bool = True
    """Whether that run used exactly this environment's args."""
    message: str
    """One line for people."""


def run_command(env: PluginRef, agent: str, tasks: int | None = None) -> str:
    """The ``sharpen run`` command that stores a baseline run for ``env``."""
    args = "".join(f" -E {k}={v}" for k, v in env.args.items())
    n = f" --tasks {tasks}" if tasks else ""
    return f"sharpen run {env.name}{args} --agent-name {agent}{n}"


def _pick(records: list[RunRecord], env: PluginRef, agent: str) -> tuple[RunRecord | None, bool]:
    mine = [r for r in records if r.agent.agent.name == agent]
    same = [r for r in mine if r.manifest.env == env]
    if same:
        return same[0], True
    return (mine[0], False) if mine else (None, True)


def check(store: Store, env: PluginRef, agent: Literal["null", "reference"],
          tasks: int | None = None) -> ValidityCheck:
    """The check of ``agent`` on ``env`` from the newest stored baseline run."""
    threshold = NULL_CEILING if agent == "null" else REFERENCE_FLOOR
    rec, same = _pick(store.list_runs(RECENT_RUNS, env=env.name), env, agent)
    what = "ceiling" if agent == "null" else "floor"
    if rec is None:
        return ValidityCheck(
            agent=agent, status="missing", threshold=threshold,
            message=(f"no {agent} run stored for env {env.name!r}; run `{run_command(env, agent, tasks)}` "
                     f"to measure the {agent}-agent {what}"),
        )
    rate = rec.success_rate
    other = "" if same else " (a run with other env args)"
    if agent == "null":
        ok = rate is not None and rate <= threshold
        msg = (f"null agent scores {_pct(rate)} (ceiling {threshold:.0%}) in run {rec.id}{other}"
               if ok else
               f"NULL AGENT SCORES {_pct(rate)}, ABOVE THE {threshold:.0%} CEILING (run {rec.id}{other}): "
               "the checker rewards doing nothing, so success rates on this environment are "
               "not trustworthy")
    else:
        ok = rate is not None and rate >= threshold
        msg = (f"reference agent scores {_pct(rate)} (floor {threshold:.0%}) in run {rec.id}{other}"
               if ok else
               f"REFERENCE AGENT SCORES {_pct(rate)}, BELOW THE {threshold:.0%} FLOOR (run {rec.id}{other}): "
               "the checker rejects known-correct solutions, so success rates on this "
               "environment understate every agent")
    return ValidityCheck(agent=agent, status="ok" if ok else "failed", threshold=threshold,
                         run_id=rec.id, rate=rate, same_args=same, message=msg)


def _pct(rate: float | None) -> str:
    return "n/a (no valid trial)" if rate is None else f"{rate:.1%}"


def validity_checks(store: Store, env: PluginRef, tasks: int | None = None) -> list[ValidityCheck]:
    """Both checks for ``env``."""
    return [check(store, env, "null", tasks), check(store, env, "reference", tasks)]
