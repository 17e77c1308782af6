"""Record tests/cassettes/external_agent.jsonl: the two agent programs of tests/external_agents
(a one-shot answerer on one ``code`` task, a tool-calling loop on it and on one
``toolshop`` task) run by
the ``external`` agent through its bridge, the embedded model (SmolLM2) answering.
tests/test_external_agent.py replays it.

    .venv/bin/python tests/record_external_cassette.py     # a minute on two busy cores

Re-record after any change to the programs, the bridge's params or text-protocol rendering,
or the two tasks' text (a replay of a changed request fails with CassetteMissError).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

from sharpen.api import arun
from sharpen.core.agent_spec import AgentSpec, Limits
from sharpen.core.registry import PluginRef

HERE = Path(__file__).resolve().parent
CASSETTE = HERE / "cassettes" / "external_agent.jsonl"
PROGRAMS = HERE / "external_agents"
CASES = [("code", "oneshot.py"), ("code", "tool_loop.py"), ("toolshop", "tool_loop.py")]
"""(environment, the program played on its first task)."""


def model_ref(mode: str) -> PluginRef:
    """The replay model over the cassette; recording forwards to the embedded model."""
    args: dict[str, Any] = {"cassette": str(CASSETTE), "mode": mode, "latency_s": 0}
    if mode == "record":  # one thread: on a busy two-core machine two threads run far slower
        args["inner"] = {"name": "local", "args": {"n_threads": 1}}
    return PluginRef(name="replay", args=args)


def spec(program: str, mode: str = "replay", **args: Any) -> AgentSpec:
    """An AgentSpec running ``program`` (a file of :data:`PROGRAMS`, or an argv list) as
    the external agent on the replay model; ``args`` go to the agent."""
    command = [sys.executable, str(PROGRAMS / program)] if isinstance(program, str) else program
    return AgentSpec(name=f"external-{program}", model=model_ref(mode),
                     agent=PluginRef(name="external", args={"command": command, **args}),
                     params={"temperature": 0.0, "max_tokens": 160},
                     limits=Limits(max_steps=4, max_seconds=120))


async def record() -> None:
    CASSETTE.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for env, program in CASES:
            run = await arun(env, agent=spec(program, "record"), tasks=1, concurrency=1,
                             store=f"sqlite:///{Path(tmp) / 'sharpen.db'}")
            for t in run.trajectories():
                print(env, program, t.outcome, t.usage)
                for s in t.steps:
                    print("  ", s.index, s.action, s.observation and s.observation[:80])


if __name__ == "__main__":
    asyncio.run(record())
