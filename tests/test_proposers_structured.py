"""Proposers ask for their edits in a schema when the model constrains decoding (issue 19).

The embedded model (``local``, grammar-constrained) proposes with each of ``evolve``, ``opro``,
``best_of_n`` and ``guidelines`` on the minibatch replayed from
tests/cassettes/improve_proposers.jsonl (real trajectories of the same model); those tests are
slow. The content checks are tested on crafted JSON values given to the parsing functions, and
the ``openai`` model (``server`` mode) against a real HTTP server on loopback whose replies
are scripted: what it sends (the schema, no stop sequences), what an invalid reply costs.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from record_improve_proposers_cassette import LoggedModels, candidate, minibatch, opro_archive, seed_spec
from servers import chat_body

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.messages import Message, ToolSpec, Usage
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.core.trajectory import Trajectory
from sharpen.improvement.candidate import Archive, Candidate
from sharpen.improvement.memory import MIN_RULE_CHARS, Op, parse_rules, render_rules
from sharpen.improvement.proposal import InvalidProposal, Proposal, ProposalContext, ProposerLLM
from sharpen.improvement.proposers.guidelines import GuidelinesProposer, ops_of, ops_schema
from sharpen.improvement.proposers.rewrite import (
    MIN_CHARS,
    RATIONALE_CHARS,
    change_line,
    edit_of,
    edit_schema,
    text_limit,
)
from sharpen.models.base import ChatModel, Completion, ModelWrapper
from sharpen.models.structured import ResponseSchema, StructuredOutputError
from sharpen.store.store import Store

GOOD = "Read each step of the docstring and do them in order. Test your function on the examples."
PARAMS = {"temperature": 0.7, "max_tokens": 300}
TRIES = 6
"""Seeds tried with the embedded model until a proposal is valid (content checks can still
refuse what the grammar let through, e.g. a text that repeats the current one)."""


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def _ctx(model: ChatModel, trajectories: list[Trajectory], archive: Archive, parent: Candidate,
         seed: int, usage: list[Usage], params: dict[str, Any] | None = None) -> ProposalContext:
    rng = random.Random(seed)
    return ProposalContext(parent=parent, minibatch=trajectories, archive=archive, iteration=1, rng=rng,
                           llm=ProposerLLM(model, params or PARAMS, usage.append, rng),
                           reflection_tokens=900)


# -- content checks on crafted JSON values -------------------------------------------------------


def _edit(text: str, rationale: str = "It says what to check.") -> dict[str, Any]:
    return {"component": "instructions", "text": text, "rationale": rationale}


@pytest.mark.parametrize(("text", "rationale", "why"), [
    ("def transform(n):\n    return n // 4", "", "code, not instructions"),
    ("Use this:\n```python\nx = compute(1)\n```", "", "code, not instructions"),
    ("<think>hm</think> " + GOOD, "", "<think>"),
    (GOOD, "<think>maybe</think>", "<think>"),
    ("  " + GOOD.replace(" ", "  ") + "\n", "", "repeats the current one"),
    (" " * 30 + "short", "", "shorter than"),
])
def test_a_json_edit_that_fails_a_content_check_is_an_invalid_proposal(text, rationale, why):
    schema = edit_schema(["instructions"], 4000)
    value = schema.parse(json.dumps(_edit(text, rationale)))  # valid in form
    with pytest.raises(InvalidProposal, match=why):
        edit_of(value, current=GOOD)


def test_a_json_edit_that_passes_gives_its_text_and_rationale():
    edit = edit_of(_edit("  Check every example in the docstring before you answer.  ",
                         "The failed  tasks\nmissed an example."), current=GOOD)
    assert edit.text == "Check every example in the docstring before you answer."
    assert edit.rationale == "The failed tasks missed an example."
    line = change_line("evolve", "instructions", edit.text, edit.rationale)
    assert line.endswith("— why: The failed tasks missed an example.")
    assert change_line("evolve", "instructions", edit.text) == \
        "evolve instructions: “Check every example in the docstring before you answer.”"


def test_the_edit_schema_bounds_the_text_and_names_the_component():
    schema = edit_schema(["instructions"], 100)
    schema.parse(json.dumps(_edit("x" * 100)))
    for bad in (_edit("x" * 101), _edit("x" * (MIN_CHARS - 1)),
                {**_edit(GOOD), "component": "guidelines"},
                _edit(GOOD, "r" * (RATIONALE_CHARS + 1)), {**_edit(GOOD), "extra": 1}):
        with pytest.raises(StructuredOutputError):
            schema.parse(json.dumps(bad))
    two = edit_schema(["instructions", "guidelines"], 100)
    assert two.parse(json.dumps({**_edit(GOOD), "component": "guidelines"}))["component"] == "guidelines"


def test_the_text_limit_fits_max_tokens_and_the_component_limit():
    rng = random.Random(0)
    model = REGISTRY.create("model", PluginRef(name="openai", args={"base_url": "http://127.0.0.1:9/v1",
                                                                    "model": "m"}))
    llm = ProposerLLM(model, {"max_tokens": 300}, lambda u: None, rng, max_chars=4000)
    assert 2 * MIN_CHARS <= text_limit(llm) < 300 * 3
    assert text_limit(llm, max_tokens=2000) > text_limit(llm)
    assert text_limit(ProposerLLM(model, {}, lambda u: None, rng, max_chars=500)) == 500
    assert text_limit(ProposerLLM(model, {"max_tokens": 10}, lambda u: None, rng)) == 2 * MIN_CHARS


def test_rule_operations_are_bounded_by_their_schema():
    none_yet = ops_schema(0, 3, 80)
    none_yet.parse(json.dumps({"ops": [{"op": "ADD", "text": "Check each example."}], "rationale": ""}))
    for bad in ({"ops": [{"op": "REMOVE", "rule": 1}], "rationale": ""},  # no rule to remove
                {"ops": [], "rationale": ""},
                {"ops": [{"op": "ADD", "text": "x" * 81}], "rationale": ""},
                {"ops": [{"op": "ADD", "text": "x" * (MIN_RULE_CHARS - 1)}], "rationale": ""}):
        with pytest.raises(StructuredOutputError):
            none_yet.parse(json.dumps(bad))
    two = ops_schema(2, 2, 80)
    value = two.parse(json.dumps({"ops": [{"op": "EDIT", "rule": 2, "text": " Test on every example. "},
                                          {"op": "DOWNVOTE", "rule": 1}], "rationale": "It  helps."}))
    ops, rationale = ops_of(value)
    assert ops == [Op(kind="EDIT", ref=2, text="Test on every example."), Op(kind="DOWNVOTE", ref=1)]
    assert rationale == "It helps."
    for bad in ({"ops": [{"op": "UPVOTE", "rule": 3}], "rationale": ""},
                {"ops": [{"op": "UPVOTE", "rule": 1}] * 3, "rationale": ""}):
        with pytest.raises(StructuredOutputError):
            two.parse(json.dumps(bad))
    with pytest.raises(InvalidProposal, match="<think>"):
        ops_of({"ops": [{"op": "ADD", "text": "<think>a rule</think> here"}], "rationale": ""})


def test_the_guidelines_schema_fits_its_max_tokens():
    schema = GuidelinesProposer(max_tokens=160, max_ops=3).schema(2).json_schema
    ops = schema["properties"]["ops"]
    rule_chars = ops["items"]["anyOf"][0]["properties"]["text"]["maxLength"]
    assert rule_chars >= 60 and ops["maxItems"] * rule_chars < 160 * 3
    few = GuidelinesProposer(max_tokens=90, max_ops=3).schema(0).json_schema["properties"]["ops"]
    assert few["maxItems"] < 3


# -- the openai model (server mode) against a scripted server --------------------------------------


@pytest.fixture(scope="module")
def json_server() -> Iterator[Any]:
    """An OpenAI-shaped server on loopback answering ``/<kind>/v1/chat/completions`` with the
    scripted reply of ``kind``; ``bodies`` keeps every request body."""
    replies = {
        "good": json.dumps(_edit(GOOD, "The agent skipped examples.")),
        "code": json.dumps(_edit("def f(n):\n    return n // 4")),
        "notjson": "Here are better instructions: " + GOOD,
        "ops": json.dumps({"ops": [{"op": "ADD", "text": "Test the function on every example."}],
                           "rationale": "The failure missed an example."}),
    }

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            server.bodies.append(json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0)))))
            body = json.dumps(chat_body(replies[self.path.strip("/").split("/")[0]])).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.bodies = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _served(server: Any, name: str, kind: str, trajectories: list[Trajectory] | None = None,
            parent: Candidate | None = None) -> tuple[Any, ProposalContext, list[Usage]]:
    """A proposer ``name`` and its context, asking the ``openai`` model served ``kind``."""
    parent = parent or candidate(AgentSpec(components={"instructions": "Solve the task."}), 0.0, 0)
    url = f"http://127.0.0.1:{server.server_address[1]}/{kind}/v1"
    model = REGISTRY.create("model", PluginRef(name="openai", args={"base_url": url, "model": "m",
                                                                    "tools": False}))
    usage: list[Usage] = []
    args = {"merge_prob": 0.0} if name == "evolve" else {}
    proposer = REGISTRY.create("proposer", PluginRef(name=name, args=args))
    return proposer, _ctx(model, trajectories or [], Archive(candidates=[parent]), parent, 0, usage), usage


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> list[Trajectory]:
    """The code environment's minibatch replayed from tests/cassettes/improve_proposers.jsonl."""
    store = Store(f"sqlite:///{tmp_path_factory.mktemp('structured') / 'replay.db'}")
    models = LoggedModels()
    try:
        return _run(minibatch("replay", store, models))
    finally:
        _run(models.aclose())


@pytest.mark.parametrize("name", ["evolve", "opro", "best_of_n"])
def test_a_served_json_edit_becomes_the_component_with_its_rationale(json_server, name):
    proposer, ctx, usage = _served(json_server, name, "good")
    start = len(json_server.bodies)
    proposal = _run(proposer.propose(ctx))
    bodies = json_server.bodies[start:]
    assert proposal.spec.components["instructions"] == GOOD
    assert proposal.change.endswith("— why: The agent skipped examples.")
    (body,) = bodies
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["component"] == {"const": "instructions"}
    assert schema["properties"]["text"]["maxLength"] < 300 * 3
    assert "stop" not in body  # a stop sequence could end the JSON early
    assert '"rationale"' in body["messages"][-1]["content"]
    assert sum(u.calls for u in usage) == 1


def test_a_served_reply_that_is_not_json_is_invalid_and_both_attempts_are_charged(json_server):
    proposer, ctx, usage = _served(json_server, "evolve", "notjson")
    start = len(json_server.bodies)
    with pytest.raises(InvalidProposal, match="not a valid edit: The reply is not valid JSON"):
        _run(proposer.propose(ctx))
    bodies = json_server.bodies[start:]
    assert len(bodies) == 2  # complete_structured asked once more, with the error
    assert "not valid" in bodies[1]["messages"][-1]["content"]
    total = sum(usage, Usage())
    assert (total.calls, total.input_tokens, total.output_tokens) == (2, 14, 6)


def test_a_served_json_edit_of_code_is_invalid(json_server):
    proposer, ctx, _usage = _served(json_server, "best_of_n", "code")
    with pytest.raises(InvalidProposal, match="code, not instructions"):
        _run(proposer.propose(ctx))


def test_served_rule_operations_edit_the_rules(json_server, replayed):
    proposer, ctx, _usage = _served(json_server, "guidelines", "ops", replayed,
                                    parent=candidate(seed_spec("replay"), 0.0, 0))
    start = len(json_server.bodies)
    proposal = _run(proposer.propose(ctx))
    bodies = json_server.bodies[start:]
    assert parse_rules(proposal.spec.components["guidelines"])[1] == ["Test the function on every example."]
    assert proposal.change == ("rules: ADD: Test the function on every example. "
                               "— why: The failure missed an example.")
    items = bodies[0]["response_format"]["json_schema"]["schema"]["properties"]["ops"]["items"]
    assert items["properties"]["op"] == {"const": "ADD"}  # no rules yet: only ADD can apply


# -- the embedded model ---------------------------------------------------------------------------


class Schemas(ModelWrapper):
    """The model as it is, keeping the response schema of every call (``None`` when none)."""

    def __init__(self, inner: ChatModel) -> None:
        super().__init__(inner)
        self.schemas: list[ResponseSchema | None] = []

    async def complete(self, messages: list[Message], tools: list[ToolSpec] | None = None,
                       params: dict[str, Any] | None = None, *,
                       response_schema: ResponseSchema | None = None) -> Completion:
        self.schemas.append(response_schema)
        return await super().complete(messages, tools, params, response_schema=response_schema)


@pytest.fixture(scope="module")
def embedded(replayed) -> Iterator[tuple[Schemas, list[Trajectory]]]:
    """The embedded model (one thread) and the replayed minibatch of the code environment."""
    pytest.importorskip("llama_cpp", reason="needs llama-cpp-python (pip install 'sharpen[local]')")
    model = Schemas(REGISTRY.create("model", PluginRef(name="local", args={"n_threads": 1})))
    assert model.structured_output == "grammar"
    yield model, replayed
    _run(model.aclose())


def _first_valid(model: Schemas, name: str, make: Any) -> tuple[Proposal, ProposalContext, list[str]]:
    reasons: list[str] = []
    proposer = REGISTRY.create("proposer", PluginRef(name=name, args={"merge_prob": 0.0}
                                                     if name == "evolve" else {}))
    for seed in range(TRIES):
        ctx = make(seed)
        try:
            return _run(proposer.propose(ctx)), ctx, reasons
        except InvalidProposal as exc:
            reasons.append(str(exc))
    raise AssertionError(f"{name}: no valid proposal in {TRIES} tries: {reasons}")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["evolve", "opro", "best_of_n"])
def test_the_embedded_model_proposes_a_valid_edit_within_the_schema(embedded, name):
    model, trajectories = embedded
    arch = opro_archive("replay")
    parent = arch.candidates[2] if name == "opro" else arch.candidates[0]
    archive = arch if name == "opro" else Archive(candidates=[parent])
    usage: list[Usage] = []
    start = len(model.schemas)
    proposal, ctx, _reasons = _first_valid(
        model, name, lambda s: _ctx(model, trajectories, archive, parent, s, usage))
    base = archive.best() if name == "opro" else parent
    text = proposal.spec.components["instructions"]
    assert text != base.spec.components["instructions"]
    assert MIN_CHARS <= len(text) <= text_limit(ctx.llm)
    schemas = model.schemas[start:]
    assert schemas and all(s is not None and s.name == "edit" for s in schemas)
    assert schemas[-1].json_schema["properties"]["text"]["maxLength"] == text_limit(ctx.llm)
    assert sum(u.calls for u in usage) >= len(schemas)  # every attempt was charged
    assert sum(u.output_tokens for u in usage) > 0


@pytest.mark.slow
def test_the_embedded_model_proposes_valid_rule_operations(embedded):
    model, trajectories = embedded
    rules = ["Test the function on the examples in the docstring.", "Return the value, do not print it."]
    spec = seed_spec("replay")
    spec = spec.model_copy(update={"components": {**spec.components, "guidelines": render_rules(rules)}})
    parent = candidate(spec, 0.0, 0)
    usage: list[Usage] = []
    start = len(model.schemas)
    proposal, _, _reasons = _first_valid(
        model, "guidelines", lambda s: _ctx(model, trajectories, Archive(candidates=[parent]), parent, s,
                                            usage))
    assert proposal.change.startswith("rules: ")
    schema = GuidelinesProposer().schema(len(rules))
    assert {s.hash() for s in model.schemas[start:] if s is not None} == {schema.hash()}
    limit = schema.json_schema["properties"]["ops"]["items"]["anyOf"][0]["properties"]["text"]["maxLength"]
    after = parse_rules(proposal.spec.components.get("guidelines", ""))[1]
    assert after != rules and all(len(r) <= max(limit, *map(len, rules)) for r in after)
