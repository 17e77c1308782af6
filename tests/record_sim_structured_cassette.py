"""Record tests/cassettes/sim_structured.jsonl: the embedded model (SmolLM2) playing the
toolshop customer with its grammar — each reply asked for as ``REPLY_SCHEMA`` JSON — on the
first medium test tasks, answering fixed agent lines. tests/test_sim_structured.py replays
it (the cassette's model info says ``structured_output: grammar``, so the replay takes the
constrained path).

    .venv/bin/python tests/record_sim_structured_cassette.py     # ~1 minute on two cores

Re-record after any change to the customer's prompt, params or schema (a replay of a changed
request fails with CassetteMissError, which names this fix).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from sharpen.core.trajectory import Action
from sharpen.envs.toolshop import ToolshopEnv

CASSETTE = Path(__file__).resolve().parent / "cassettes" / "sim_structured.jsonl"
N_TASKS = 3
FAILED = "[The simulated customer failed"
"""How the agent's first observation starts when the customer's first message failed."""
AGENT_LINES = ("Sure. What is your name and zip code?", "Thanks. Which order do you mean?",
               "Done. Is there anything else?")


def said() -> tuple[str, ...]:
    """What the scripted agent says, in order, after the customer's first message."""
    return AGENT_LINES


def customer_ref(mode: str) -> dict[str, Any]:
    """The customer model of the recording (``mode="record"``) and of its replay."""
    return {"name": "replay", "args": {"cassette": str(CASSETTE), "mode": mode, "latency_s": 0,
                                       **({"inner": {"name": "local"}} if mode == "record" else {})}}


async def main() -> None:
    CASSETTE.unlink(missing_ok=True)
    env = ToolshopEnv(difficulty="medium", user=customer_ref("record"))
    for task in env.list_tasks("test", limit=N_TASKS):
        obs, _ = await env.reset(task)
        print(task.id, obs.splitlines()[-1][:100])
        if obs.startswith(FAILED):
            continue
        for message in AGENT_LINES:
            result = await env.step(Action(tool="respond", arguments={"message": message}))
            print("  ", result.info["user"])
            if result.terminated:
                break
    await env.close()
    print(f"recorded {sum(1 for _ in CASSETTE.open())} calls to {CASSETTE}")


if __name__ == "__main__":
    asyncio.run(main())
