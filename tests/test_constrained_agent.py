"""Constrained decoding in the tool agent: the action schema, what ``decoding`` resolves to,
and episodes of the real embedded model under it (issue 19)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from sharpen.agents import constrained
from sharpen.agents.tool_agent import ToolAgent, system_prompt
from sharpen.core.agent_spec import AgentSpec, Limits
from sharpen.core.messages import ToolSpec
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.envs.base import ENV
from sharpen.envs.gridsafety.env import MOVE
from sharpen.envs.textworld.env import ACT
from sharpen.models.base import ModelWrapper
from sharpen.models.local import LocalModel
from sharpen.models.openai_compat import OpenAIModel
from sharpen.models.replay import ReplayModel
from sharpen.models.structured import StructuredOutput, StructuredOutputError
from sharpen.runner.config import RunConfig
from sharpen.runner.runner import Runner
from sharpen.stats.report import RunInfo
from sharpen.store import Store

LOOKUP = ToolSpec(name="lookup", description="Look up an order.", parameters={
    "type": "object", "properties": {"order_id": {"type": "integer"}}, "required": ["order_id"]})
REPLY = ToolSpec(name="reply", description="Reply to the customer.", text_argument="message",
                 parameters={"type": "object", "properties": {"message": {"type": "string"}},
                             "required": ["message"]})


def test_one_tool_schema_keeps_its_enum_and_closes_the_arguments() -> None:
    schema = constrained.action_schema([MOVE])
    action = constrained.to_action(schema.parse('{"tool": "move", "arguments": {"direction": "up"}}'))
    assert action.arguments == {"direction": "up"}
    for bad in ('{"tool": "move", "arguments": {"direction": "north"}}',  # not one of the enum
                '{"tool": "jump", "arguments": {"direction": "up"}}',  # not a tool
                '{"tool": "move", "arguments": {"direction": "up", "speed": 2}}',  # invented arg
                '{"tool": "move"}'):
        with pytest.raises(StructuredOutputError):
            schema.parse(bad)


def test_several_tools_are_alternatives_each_with_its_own_arguments() -> None:
    schema = constrained.action_schema([LOOKUP, REPLY])
    for tool, args in (("lookup", '{"order_id": 7}'), ("reply", '{"message": "hi"}')):
        reply = f'{{"tool": "{tool}", "arguments": {args}}}'
        assert constrained.to_action(schema.parse(reply)).tool == tool
    with pytest.raises(StructuredOutputError):
        schema.parse('{"tool": "lookup", "arguments": {"message": "hi"}}')


def test_admissible_commands_become_an_enum_of_the_free_text_argument() -> None:
    schema = constrained.action_schema([ACT], constrained.admissible_of({"admissible": ["look", "go north"]}))
    schema.parse('{"tool": "act", "arguments": {"command": "go north"}}')
    with pytest.raises(StructuredOutputError, match="arguments/command"):
        schema.parse('{"tool": "act", "arguments": {"command": "fly away"}}')
    # Nothing admissible listed (or not a list of strings): the argument stays free text.
    for info in ({}, {"admissible": []}, {"admissible": "look"}):
        free = constrained.action_schema([ACT], constrained.admissible_of(info))
        free.parse('{"tool": "act", "arguments": {"command": "fly away"}}')


class Unconstrained(ModelWrapper):
    """The embedded model, declared unable to constrain: replies are validated instead."""

    @property
    def structured_output(self) -> StructuredOutput:
        return "validate"


def test_auto_is_constrained_only_on_a_model_that_constrains_in_process(tmp_path: Path) -> None:
    local = LocalModel()
    cassette = tmp_path / "old.jsonl"
    cassette.write_text(json.dumps({"key": "k", "request": {}, "completion": {
        "message": {"role": "assistant", "content": ""}}, "model": {"name": "local/x"}}) + "\n")
    old_replay = ReplayModel(str(cassette))  # recorded before structured output existed
    openai = OpenAIModel()
    assert constrained.resolve_decoding("auto", local) == "constrained"
    assert constrained.resolve_decoding("auto", openai) == "free"  # the server could, but is not asked
    assert constrained.resolve_decoding("auto", old_replay) == "free"  # old cassettes still replay
    assert constrained.resolve_decoding("auto", Unconstrained(local)) == "free"
    assert constrained.resolve_decoding("constrained", openai) == "constrained"
    assert constrained.resolve_decoding("free", local) == "free"
    assert constrained.decoding_label("auto", local) == "constrained (grammar)"
    assert constrained.decoding_label("constrained", openai) == "constrained (server)"
    agent = ToolAgent()
    assert agent.acting(local, AgentSpec()) == "constrained"
    assert agent.acting(local, AgentSpec(decoding="free")) == "text"


def test_decoding_auto_keeps_the_hash_specs_had_before_it_existed() -> None:
    # 804113fa1a3d06d2: AgentSpec().hash() at 08738e5, before the field was added.
    assert AgentSpec().hash() == "804113fa1a3d06d2"
    assert AgentSpec(decoding="free").hash() != AgentSpec().hash()
    assert AgentSpec(decoding="free").hash() != AgentSpec(decoding="constrained").hash()


def test_the_system_prompt_says_how_to_act_in_each_mode() -> None:
    spec = AgentSpec(components={"instructions": "Walk."})
    assert '{"tool": NAME, "arguments": {...}}' in system_prompt(spec, [MOVE], "constrained")
    assert "```" in system_prompt(spec, [MOVE], "text")  # the text protocol's fenced block
    assert system_prompt(spec, [MOVE], "native") == "Walk."
    assert system_prompt(spec, [MOVE], True) == system_prompt(spec, [MOVE], "text")  # old callers


SPEC = AgentSpec(params={"temperature": 0.0, "max_tokens": 60},
                 limits=Limits(max_steps=4, max_seconds=300))


def _run(tmp_path: Path, env: PluginRef, spec: AgentSpec, model_factory=None, tasks: int = 2):
    tmp_path.mkdir(parents=True, exist_ok=True)
    store = Store(f"sqlite:///{tmp_path / 'runs.db'}")
    env_obj = REGISTRY.create(ENV, env)
    config = RunConfig(env=env, agent=spec, tasks=env_obj.list_tasks("test")[:tasks], concurrency=1)
    summary = asyncio.run(Runner(store, progress=False, model_factory=model_factory).run(config))
    return store.get_run(summary.run_id), list(store.iter_trajectories(summary.run_id))


@pytest.mark.slow
def test_the_embedded_model_writes_only_valid_moves_under_its_grammar(tmp_path: Path) -> None:
    run, trajs = _run(tmp_path, PluginRef(name="gridsafety"), SPEC)
    assert run.manifest.extra["decoding"] == "constrained (grammar)"
    assert RunInfo.of(run).decoding == "constrained (grammar)"  # what `sharpen report` shows
    from fastapi.testclient import TestClient

    from sharpen.viewer import create_app

    page = TestClient(create_app(Store(f"sqlite:///{tmp_path / 'runs.db'}"))).get(f"/runs/{run.id}")
    assert "decoding <b>constrained (grammar)</b>" in page.text  # and the viewer's run page
    steps = [s for t in trajs for s in t.steps]
    assert steps and sum(t.invalid_actions for t in trajs) == 0
    for s in steps:
        reply = json.loads(s.messages[0].content or "")
        assert reply["tool"] == "move" and s.action is not None
        assert s.action.arguments["direction"] in ("up", "down", "left", "right")


@pytest.mark.slow
def test_textworld_commands_are_drawn_from_the_admissible_ones(tmp_path: Path) -> None:
    _, trajs = _run(tmp_path, PluginRef(name="textworld"), SPEC, tasks=1)
    steps = trajs[0].steps
    assert steps and trajs[0].invalid_actions == 0
    assert all(not s.info.get("invalid") for s in steps)  # every command was admissible


@pytest.mark.slow
def test_free_decoding_and_a_validating_model_are_recorded_as_such(tmp_path: Path) -> None:
    free = SPEC.model_copy(update={"decoding": "free"})
    run, _ = _run(tmp_path / "free", PluginRef(name="gridsafety"), free, tasks=1)
    assert run.manifest.extra["decoding"] == "free"
    # Constrained on a model that cannot constrain: the same schema validates its replies, and
    # a reply that fails it is an invalid action whose feedback says what was wrong.
    validating = SPEC.model_copy(update={"decoding": "constrained"})
    run, trajs = _run(tmp_path / "validated", PluginRef(name="gridsafety"), validating,
                      model_factory=lambda c: Unconstrained(LocalModel()), tasks=1)
    assert run.manifest.extra["decoding"] == "constrained (validate)"
    for s in trajs[0].steps:
        if s.invalid_action:
            assert "JSON" in s.invalid_action or "schema" in s.invalid_action
        else:
            assert json.loads(s.messages[0].content or "")["tool"] == "move"


def test_tool_bounds_the_grammar_cannot_enforce_are_checked_on_the_reply() -> None:
    from sharpen.envs.negotiation.env import NegotiationEnv
    from sharpen.models.grammar import schema_to_gbnf
    from sharpen.models.structured import UnsupportedSchema

    schema = constrained.action_schema(NegotiationEnv().tools)
    assert "minimum" in json.dumps(schema.json_schema)  # the price is bounded below
    assert "root ::=" in schema_to_gbnf(schema)  # lax: the grammar constrains the rest
    with pytest.raises(UnsupportedSchema, match="minimum"):  # a strict schema is refused
        schema_to_gbnf(schema.model_copy(update={"strict": True}))
    tool = NegotiationEnv().tools[0]
    negative = {"tool": tool.name, "arguments": {tool.text_argument: -5}}
    with pytest.raises(StructuredOutputError):  # and the reply is still validated in full
        schema.parse(json.dumps(negative))


@pytest.mark.parametrize("name", REGISTRY.names("env"))
def test_every_environment_action_schema_compiles_to_a_grammar(name: str) -> None:
    """The embedded model can run every environment constrained: what a tool schema says
    beyond the grammar (unanchored patterns, constraint-only anyOf branches, uniqueItems,
    bounds) is left to the reply's validation instead of failing the run."""
    from sharpen.core.errors import UserError
    from sharpen.models.grammar import schema_to_gbnf

    try:
        env = REGISTRY.create(ENV, PluginRef(name=name))
    except UserError as exc:  # an adapter whose optional package is not installed
        pytest.skip(str(exc))
    assert "root ::=" in schema_to_gbnf(constrained.action_schema(env.tools))


def test_a_free_text_answer_may_come_fenced_where_the_env_takes_one() -> None:
    from sharpen.envs.code.program import SUBMIT
    from sharpen.models.grammar import schema_to_gbnf

    code = constrained.action_schema([SUBMIT])
    assert code.fenced and constrained.free_text_tool([SUBMIT]) is SUBMIT
    assert "root ::= json-root | fence" in schema_to_gbnf(code)
    assert code.hash() != code.model_copy(update={"fenced": False}).hash()  # another grammar
    # an enum, or admissible values, keep the answer in JSON where the grammar enforces them
    assert not constrained.action_schema([MOVE]).fenced
    assert not constrained.action_schema([ACT], ["look"]).fenced
    assert not constrained.action_schema([ACT]).fenced  # a short answer (text_hint): JSON
    assert not constrained.action_schema([LOOKUP]).fenced  # no free-text tool at all
    # the prompt says what the grammar allows: the text protocol where a fence is allowed
    assert "```" in constrained.instructions([SUBMIT])
    assert "```" not in constrained.instructions([ACT], ["look"])
    assert "```" not in constrained.instructions([ACT])


@pytest.mark.slow
def test_the_embedded_model_writes_code_in_a_fence_under_the_grammar(tmp_path: Path) -> None:
    env = PluginRef(name="code", args={"source": "generated", "difficulty": "easy"})
    spec = SPEC.model_copy(update={"params": {"temperature": 0.0, "max_tokens": 200}})
    run, trajs = _run(tmp_path, env, spec)
    assert run.manifest.extra["decoding"] == "constrained (grammar)"
    assert sum(t.invalid_actions for t in trajs) == 0
    for step in (s for t in trajs for s in t.steps):
        reply = step.messages[0].content or ""
        assert reply.lstrip().startswith(("```", "{"))  # nothing but what the grammar allows
        assert step.action is not None and step.action.tool == "submit"
