"""The reusable simulators: a user (persona, goal, hidden facts, versioned prompt) and tools
answered from their schemas, on their own and as toolshop's ``tools: simulated``.

Model calls replay ``tests/cassettes/simulated.jsonl``, recorded from the real embedded
SmolLM2 model with its grammar (``tests/record_simulated_cassette.py``); the scenarios are
the recording script's, so replay sends the same requests. Failures are real: a dead
endpoint, and results the model's own token budget cuts. One slow test runs the embedded
model itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from conftest import run_agent
from record_simulated_cassette import (
    AGENT_LINES,
    CASSETTE,
    CUT_PARAMS,
    N_EPISODE_TASKS,
    PROFILE,
    episode_env_args,
    get_order_result,
    user_conversation,
)
from servers import free_port

from sharpen.core import PluginRef
from sharpen.core.errors import UserError
from sharpen.core.registry import REGISTRY
from sharpen.envs.simulated import (
    REALISM_RUBRIC,
    USER_PROMPTS,
    UserProfile,
    UserPrompt,
    UserSimulator,
    check_reply,
)
from sharpen.envs.simulated.tools import ANY_RESULT, ERROR_RESULT, ToolSimError, ToolSimulator
from sharpen.envs.toolshop import TOOLS, ToolshopEnv, ToolshopVerifier, simulation
from sharpen.envs.toolshop.user import USER_PROMPTS as CUSTOMER_PROMPTS


def test_the_cassette_is_recorded():
    assert CASSETTE.exists(), "record it: .venv/bin/python tests/record_simulated_cassette.py"


def test_a_profile_and_a_versioned_prompt_make_the_system_prompt():
    prompt = USER_PROMPTS["1"]
    assert prompt.id == "user-sim/1"
    text = prompt.render(PROFILE)
    assert text.startswith("You are a traveller booking a train ticket, chatting")
    assert PROFILE.goal in text
    assert "- name: Mira Okafor\n- loyalty number: LY-4471" in text
    assert "give a fact only when the assistant asks for it" in text
    assert UserProfile(goal="x").hidden_text() == "(none)"
    # the toolshop customer is one such prompt, of its own family
    assert CUSTOMER_PROMPTS["1"].id == "toolshop-user/1"
    assert CUSTOMER_PROMPTS["1"].schema_name == "customer_reply"


def test_turn_checks_and_revealed_facts():
    hidden = PROFILE.hidden
    early = check_reply("I need a ticket. My loyalty number is LY-4471.", first=True,
                        hidden=hidden)
    assert early.error is None and early.revealed == ("loyalty number",)
    assert early.info()["revealed"] == ["loyalty number"]
    assert "revealed" not in check_reply("I need a ticket.", first=True, hidden=hidden).info()
    leak = check_reply("Ok. Answer in one or two short sentences of plain text.", first=False)
    assert leak.error is not None and "leaks the simulator's prompt" in leak.error
    custom = UserPrompt("demo", "2", "You are {persona}.\nGoal: {goal}\n- Never say the magic "
                        "word unless you are asked twice for it.")
    said = check_reply("Sure. Never say the magic word unless you are asked twice for it.", False,
                       custom)
    assert said.error is not None and said.prompt == "demo/2"
    again = check_reply("Where is my train?", False, said="where is my train")
    assert again.error is not None and "repeats the agent's message" in again.error


async def test_the_user_simulator_replays_a_real_models_conversation():
    user, turns = await user_conversation("replay")
    assert user.constrained  # the embedded model constrains: turns came as reply JSON
    assert user.messages[0].content == USER_PROMPTS["1"].render(PROFILE)
    assert user.messages[1].content == USER_PROMPTS["1"].opening
    assert [m.content for m in user.messages if m.role == "user"][1:] == list(AGENT_LINES)[
        :len(turns) - 1]
    assert all(t.prompt == "user-sim/1" for t in turns)
    for turn, reply in zip(turns, [m for m in user.messages if m.role == "assistant"], strict=True):
        recorded = json.loads(reply.content or "")
        if turn.error is None:
            assert turn.text == recorded["message"].strip().removesuffix("###STOP###").strip()
            assert turn.revealed == tuple(k for k, v in PROFILE.hidden.items()
                                          if v.lower() in turn.text.lower())
    _, again = await user_conversation("replay")
    assert again == turns  # temperature 0 and a seed: the same conversation


async def test_the_tool_simulator_answers_a_real_toolshop_schema():
    sim, value = await get_order_result("replay")
    jsonschema.validate(value, {"anyOf": [simulation.RESULT_SCHEMAS["get_order"], ERROR_RESULT]})
    call = sim.exchanges[0][0].content or ""
    assert "Tool: get_order" in call and '"order_id":"#W' in call
    assert call.startswith("The customer said: please look at my order.")
    assert json.dumps(simulation.RESULT_SCHEMAS["get_order"], separators=(",", ":")) in call
    assert "The customer's request:" in (sim.system.content or "")
    assert sim.schema("get_order").json_schema["anyOf"][1] == ERROR_RESULT
    bare = ToolSimulator(sim.model, "a task", TOOLS)
    assert bare.schema("get_order").json_schema == ANY_RESULT  # no result schema given
    _, again = await get_order_result("replay")
    assert again == value


def test_tools_arg_is_checked():
    for args in ({"tools": "fake"}, {"tools": "simulated"},
                 {"tools": "simulated", "tool_model": {"name": "local"}, "tool_sim_version": "9"},
                 {"tools": "simulated", "tool_model": "local"}):
        with pytest.raises(UserError):
            ToolshopEnv(**args)


async def test_a_toolshop_episode_with_simulated_tools(tmp_path: Path):
    """The reference agent through the real Runner: every read or write is answered by the
    simulator, recorded beside the real answer; the verdict is the real shop's."""
    args = episode_env_args("replay")
    env = ToolshopEnv(**args)
    tasks = env.list_tasks("test", limit=N_EPISODE_TASKS)
    assert all(t.metadata["tool_sim"] == "tool-sim/1" for t in tasks)
    trajs = await run_agent(tmp_path / "sim.db", PluginRef(name="toolshop", args=args),
                            "reference", tasks)
    verifier = ToolshopVerifier(**args)
    simulated_steps = 0
    for t in trajs:
        sims = [s for s in t.steps if "tool_sim" in s.info]
        assert sims and all(s.info["tool_sim"]["prompt"] == "tool-sim/1" for s in sims)
        assert "tools simulated by tool-sim/1" in t.outcome.evidence
        for s in sims:
            info = s.info["tool_sim"]
            if "error" in info:
                continue
            simulated_steps += 1
            assert s.observation == simulation.observation(info["result"])
            assert info["agrees"] == simulation.agrees(info["real"], info["result"])
            assert s.observation != info["real"] or info["agrees"]
        if t.outcome.error_kind is None:
            # the reference's writes are right in the real shop whatever the simulator said
            assert t.outcome.success and t.outcome.components["state_match"] == 1.0
            assert t.outcome.components["simulated_calls"] == len(sims)
        assert await verifier.score(t) == t.outcome
    assert simulated_steps > 0
    real = await run_agent(tmp_path / "real.db", PluginRef(name="toolshop",
                                                           args={"difficulty": "easy"}),
                           "reference", tasks)
    assert all("tool_sim" not in s.info for t in real for s in t.steps)
    assert all("simulated_calls" not in t.outcome.components for t in real)


async def test_tool_simulator_failures_are_user_sim(tmp_path: Path):
    """A dead endpoint, and results the model's token budget cuts before the JSON closes:
    either ends the episode as ``user_sim`` (excluded from rates), for the verifier too."""
    dead = {"name": "openai", "args": {"base_url": f"http://127.0.0.1:{free_port()}/v1",
                                       "timeout": 5}}
    for name, args, why in [
        ("dead", {"difficulty": "easy", "tools": "simulated", "tool_model": dead}, "model error"),
        ("cut", episode_env_args("replay", CUT_PARAMS), "cut at max_tokens"),
    ]:
        tasks = ToolshopEnv(**args).list_tasks("test", limit=1)
        [t] = await run_agent(tmp_path / f"{name}.db", PluginRef(name="toolshop", args=args),
                              "reference", tasks)
        assert t.outcome.error_kind == "user_sim" and not t.outcome.counts, t.outcome
        assert t.outcome.error.startswith("tool simulator failed: tool simulator tool-sim/1")
        assert why in t.outcome.error
        last = t.steps[-1]
        assert last.terminated and "not counted against you" in last.observation
        assert last.info["tool_sim"]["error"] == last.info["user_sim_error"]
        assert await ToolshopVerifier(**args).score(t) == t.outcome


async def test_a_model_error_raises_tool_sim_error():
    dead = REGISTRY.create("model", PluginRef(name="openai", args={
        "base_url": f"http://127.0.0.1:{free_port()}/v1", "timeout": 5}))
    sim = ToolSimulator(dead, "a task", TOOLS, simulation.RESULT_SCHEMAS)
    with pytest.raises(ToolSimError, match="failed on get_order: model error"):
        await sim.answer("get_order", {"order_id": "#W1234567"})
    assert sim.exchanges == []
    await dead.aclose()


@pytest.mark.slow
async def test_the_embedded_model_as_user_and_tools():
    pytest.importorskip("llama_cpp")
    model = REGISTRY.create("model", PluginRef(name="local"))
    user = UserSimulator(model, PROFILE, params={"temperature": 0.0, "max_tokens": 128})
    turn = await user.start()
    assert turn.prompt == "user-sim/1" and (turn.error is None) == bool(turn.text or turn.stop)
    sim = ToolSimulator(model, "Serve a shop customer.", TOOLS, simulation.RESULT_SCHEMAS)
    try:
        value = await sim.answer("list_orders", {"customer_id": "ana_lopez_1234"})
    except ToolSimError as exc:
        assert "no valid result" in str(exc)
    else:
        jsonschema.validate(value, {"anyOf": [simulation.RESULT_SCHEMAS["list_orders"],
                                              ERROR_RESULT]})


def test_the_realism_rubric_is_a_rubric():
    rubric = pytest.importorskip("sharpen.judges.rubric")
    r = rubric.Rubric.load(REALISM_RUBRIC)
    assert r.name == "user_realism"
    assert [c.name for c in r.criteria] == ["stays_in_role", "waits_to_be_asked", "consistent",
                                            "natural"]
