"""Record tests/cassettes/simulated.jsonl: the embedded model (SmolLM2, with its grammar)
as a generic simulated user and as toolshop's tool simulator. tests/test_simulated.py
replays it through the same scenarios, defined here so that recording and replay send the
same requests.

    .venv/bin/python tests/record_simulated_cassette.py     # a few minutes on two cores

Re-record after any change to the simulators' prompts, params or schemas (a replay of a
changed request fails with CassetteMissError, which names this fix).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.envs.simulated import UserProfile, UserSimulator, UserTurn
from sharpen.envs.toolshop import ToolshopEnv, shop_of, simulation

CASSETTE = Path(__file__).resolve().parent / "cassettes" / "simulated.jsonl"

PROFILE = UserProfile(
    persona="a traveller booking a train ticket",
    goal="Book a one-way ticket from Lyon to Paris for Friday morning, second class.",
    hidden={"name": "Mira Okafor", "loyalty number": "LY-4471"},
)
AGENT_LINES = ("Sure. What is your name and loyalty number?",
               "Thanks. I booked the 8:04 from Lyon to Paris on Friday. Anything else?")
N_EPISODE_TASKS = 2
CUT_PARAMS = {"temperature": 0.0, "max_tokens": 6}
"""Tool-simulator params that cut every result before its JSON closes (an invalid result)."""


def model_ref(mode: str) -> dict[str, Any]:
    """The simulators' model in the recording (``mode="record"``) and in its replay."""
    return {"name": "replay", "args": {"cassette": str(CASSETTE), "mode": mode, "latency_s": 0,
                                       **({"inner": {"name": "local"}} if mode == "record" else {})}}


async def user_conversation(mode: str) -> tuple[UserSimulator, list[UserTurn]]:
    """The generic user's first message and its answers to :data:`AGENT_LINES`."""
    model = REGISTRY.create("model", PluginRef.model_validate(model_ref(mode)))
    user = UserSimulator(model, PROFILE, seed=7,
                         params={"temperature": 0.0, "max_tokens": 128})
    turns = [await user.start()]
    for line in AGENT_LINES:
        if turns[-1].error is not None or turns[-1].stop:
            break
        turns.append(await user.reply(line))
    return user, turns


def episode_env_args(mode: str, tool_params: dict[str, Any] | None = None) -> dict[str, Any]:
    """Env args of an easy toolshop run with simulated tools."""
    args: dict[str, Any] = {"difficulty": "easy", "tools": "simulated",
                            "tool_model": model_ref(mode)}
    if tool_params is not None:
        args["tool_params"] = tool_params
    return args


async def get_order_result(mode: str) -> tuple[simulation.ToolSimulator, Any]:
    """toolshop's ``get_order`` answered by the simulator on the first easy test task."""
    model = REGISTRY.create("model", PluginRef.model_validate(model_ref(mode)))
    task = ToolshopEnv(difficulty="easy").list_tasks("test", limit=1)[0]
    shop = shop_of(task)
    sim = simulation.simulator(model, shop, "1", None, task.seed)
    order = next(a.arguments["order_id"] for a in shop.reference if "order_id" in a.arguments)
    return sim, await sim.answer("get_order", {"order_id": order},
                                 context="The customer said: please look at my order.")


async def play_reference(env_args: dict[str, Any], limit: int) -> None:
    """The reference walkthrough of the first easy test tasks, step by step (what the
    Runner does with the reference agent)."""
    env = ToolshopEnv(**env_args)
    for task in env.list_tasks("test", limit=limit):
        await env.reset(task)
        for action in env.reference_actions(task):
            result = await env.step(action)
            print("  ", action.tool, result.observation[:100])
            if result.terminated or result.truncated:
                break
    await env.close()


async def main() -> None:
    CASSETTE.unlink(missing_ok=True)
    _, turns = await user_conversation("record")
    print("user:", [t.info() for t in turns])
    _, value = await get_order_result("record")
    print("get_order:", value)
    await play_reference(episode_env_args("record"), N_EPISODE_TASKS)
    await play_reference(episode_env_args("record", CUT_PARAMS), 1)
    print(f"recorded {sum(1 for _ in CASSETTE.open())} calls to {CASSETTE}")


if __name__ == "__main__":
    asyncio.run(main())
