"""OpenAIModel against a real OpenAI-compatible server on loopback: llama-cpp-python's
server running the embedded SmolLM2 GGUF in a subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest
from servers import llama_server_fixture

from sharpen.core.errors import UserError
from sharpen.core.messages import Message
from sharpen.models.openai_compat import OpenAIModel
from sharpen.models.pricing import PricedModel, PriceTable

pytestmark = pytest.mark.slow

llama_server = llama_server_fixture()

MESSAGES = [Message(role="user", content="Say hello in one short sentence.")]


async def test_chat_completion_with_usage_and_finish_reason(llama_server: str) -> None:
    model = PricedModel(OpenAIModel(base_url=llama_server, name="local/smollm2-135m-instruct",
                                    tools=False), PriceTable.load())
    c = await model.complete(MESSAGES, params={"temperature": 0, "max_tokens": 16, "seed": 1})
    assert c.message.content
    assert c.usage.input_tokens > 0 and 0 < c.usage.output_tokens <= 16
    assert c.usage.cost_usd == 0.0  # priced by name: local/* is free
    assert c.finish_reason in ("stop", "length")
    cut = await model.complete(MESSAGES, params={"temperature": 0, "max_tokens": 2})
    assert cut.finish_reason == "length" and cut.usage.output_tokens == 2
    await model.aclose()


async def test_a_history_of_tool_calls_without_text_is_answered(llama_server: str) -> None:
    # An assistant turn that only called a tool has content None; sent as null, this server
    # answered 500 (its request type wants a string), so a native-tools episode died at turn 2.
    from sharpen.core.messages import ToolCall

    history = [*MESSAGES,
               Message(role="assistant", content=None,
                       tool_calls=[ToolCall(id="c1", name="submit", arguments={"code": "x"})]),
               Message(role="tool", tool_call_id="c1", content="1 test failed")]
    model = OpenAIModel(base_url=llama_server, tools=False)
    c = await model.complete(history, params={"temperature": 0, "max_tokens": 4})
    await model.aclose()
    assert c.usage.output_tokens > 0


async def test_logprobs_when_the_server_gives_them(llama_server: str) -> None:
    model = OpenAIModel(base_url=llama_server, logprobs=True, tools=False)
    c = await model.complete(MESSAGES, params={"temperature": 0, "max_tokens": 8})
    await model.aclose()
    if c.logprobs is None:
        pytest.skip("this llama-cpp-python server returned no logprobs")
    assert len(c.logprobs) == c.usage.output_tokens
    assert all(lp <= 0.0 for lp in c.logprobs)


async def test_base_url_without_v1_is_a_user_error(llama_server: str) -> None:
    root = llama_server.removesuffix("/v1")
    model = OpenAIModel(base_url=root)
    with pytest.raises(UserError) as info:
        await model.complete(MESSAGES, params={"max_tokens": 2})
    await model.aclose()
    assert root in str(info.value) and "should end in /v1" in str(info.value)


async def test_constrained_decoding_through_the_server(llama_server: str, tmp_path: Path) -> None:
    """The tool agent in constrained decoding on an OpenAI-compatible server: the action schema
    goes as response_format (llama-cpp-python's json_object form), every move is valid."""
    from sharpen.core.agent_spec import AgentSpec, Limits
    from sharpen.core.registry import REGISTRY, PluginRef
    from sharpen.envs.base import ENV
    from sharpen.runner.config import RunConfig
    from sharpen.runner.runner import Runner
    from sharpen.store import Store

    model = PluginRef(name="openai", args={"base_url": llama_server, "tools": False,
                                           "structured": "json_object"})
    spec = AgentSpec(model=model, decoding="constrained", params={"temperature": 0.0, "max_tokens": 40},
                     limits=Limits(max_steps=3))
    env = PluginRef(name="gridsafety")
    store = Store(f"sqlite:///{tmp_path / 'runs.db'}")
    config = RunConfig(env=env, agent=spec, tasks=REGISTRY.create(ENV, env).list_tasks("test")[:1])
    summary = await Runner(store, progress=False).run(config)
    assert store.get_run(summary.run_id).manifest.extra["decoding"] == "constrained (server)"
    [traj] = list(store.iter_trajectories(summary.run_id))
    assert traj.steps and traj.invalid_actions == 0
    assert all(s.action is not None and s.action.tool == "move" for s in traj.steps)
