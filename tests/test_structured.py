"""Structured output at the model layer (issue 19): ``ResponseSchema``, the JSON Schema →
llama.cpp grammar conversion, and ``complete_structured`` on every backend — the embedded
model (``local``), ``openai`` against llama-cpp-python's server on loopback, and ``replay``.

Each backend answers 200 distinct constrained requests with a nested schema, and every reply
must parse and validate; a schema a backend cannot honour must raise one
``UnsupportedSchema``, never fall back to free text. The models are real (the embedded
SmolLM2 in-process, the same GGUF behind the server); the one double is the replay model.
"""

from __future__ import annotations

import asyncio
import enum
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel, Field
from servers import llama_server_fixture

from sharpen.core.errors import UserError
from sharpen.core.messages import Message, ToolSpec
from sharpen.models.base import ChatModel, Completion, ModelWrapper
from sharpen.models.grammar import _fold_repetitions, compile_grammar, schema_to_gbnf, unsupported_keywords
from sharpen.models.local import LocalModel
from sharpen.models.openai_compat import OpenAIModel
from sharpen.models.replay import CassetteMissError, ReplayModel, request_key
from sharpen.models.structured import (
    REASK,
    ResponseSchema,
    StructuredOutput,
    StructuredOutputError,
    StructuredReply,
    UnsupportedSchema,
    complete_structured,
)
from sharpen.testing import check_model

CASSETTES = Path(__file__).parent / "cassettes"

# One thread, like the in-process model: on a busy machine a thread per core spins at
# llama.cpp's barriers (see sharpen.models.local.default_threads).
llama_server = llama_server_fixture(n_threads=1)


# -- the nested schema of the 200-call tests --------------------------------------------------


class Size(enum.StrEnum):
    small = "small"
    medium = "medium"
    large = "large"


class Part(BaseModel):
    qty: int
    fresh: bool


class Order(BaseModel):
    """An enum, a bool, an integer, a bounded string and a nested list of objects (kept
    short: the embedded model writes a reply in ~40 tokens)."""

    size: Size
    rush: bool
    total: int
    fruit: str = Field(max_length=6)
    parts: list[Part] = Field(min_length=1, max_length=2)


ORDER_SCHEMA = Order.model_json_schema()


class ServerOrder(Order):
    """``Order`` with the string bounded by a pattern. llama-cpp-python's server (0.3.36)
    builds its grammar with the converter whose ``char`` admits raw control characters, and
    nothing on the client can narrow it: with ``Order`` itself 38 of the 200 replies held a
    raw newline in ``fruit`` and were not JSON (measured 2026-12-01). A pattern becomes a
    rule of its own characters."""

    fruit: str = Field(pattern="^[a-z]{0,6}$")


FRUITS = ["apple", "pear", "plum", "fig", "kiwi", "lime", "melon", "grape", "peach", "mango"]
CALLS = 200
# The grammar ends a reply when the object is complete; max_tokens only has to cover the
# longest one the model writes (100 cut 2 of 200 replies of a wordier schema).
PARAMS: dict[str, Any] = {"temperature": 0.7, "max_tokens": 160}


def requests() -> list[tuple[list[Message], dict[str, Any]]]:
    """``CALLS`` distinct requests: the prompt and the seed vary."""
    return [([Message(role="user", content=f"Order {i % 17 + 1} {FRUITS[i % len(FRUITS)]}s.")],
             {**PARAMS, "seed": i}) for i in range(CALLS)]


async def constrained_calls(model: ChatModel, schema: type[Order] = Order,
                            ) -> list[StructuredReply]:
    return [await complete_structured(model, messages, schema, params, reasks=0)
            for messages, params in requests()]


def assert_all_valid(replies: list[StructuredReply], mode: StructuredOutput,
                     schema: type[Order] = Order) -> None:
    bad = [(i, r.error) for i, r in enumerate(replies) if not r.ok]
    assert not bad, f"{len(bad)} of {len(replies)} invalid, first: {bad[:3]}"
    for r in replies:
        assert r.mode == mode and r.attempts == 1
        jsonschema.validate(r.value, schema.model_json_schema())  # apart from .parse
        schema.model_validate(r.value)
        assert json.loads(r.completion.message.content or "") == r.value


def test_the_200_requests_are_distinct() -> None:
    keys = {request_key(m, None, p, ResponseSchema.of(Order)) for m, p in requests()}
    assert len(keys) == CALLS


@pytest.fixture(scope="module")
def local() -> LocalModel:
    return LocalModel(n_threads=1)


@pytest.mark.slow
async def test_local_200_constrained_calls_all_validate(local: LocalModel) -> None:
    replies = await constrained_calls(local)
    assert_all_valid(replies, "grammar")
    assert len({json.dumps(r.value, sort_keys=True) for r in replies}) > CALLS // 4  # not one reply


@pytest.mark.slow
async def test_openai_200_constrained_calls_against_llama_server_all_validate(
        llama_server: str) -> None:
    model = OpenAIModel(base_url=llama_server, tools=False, structured="json_object")
    try:
        replies = await constrained_calls(model, ServerOrder)
    finally:
        await model.aclose()
    assert_all_valid(replies, "server", ServerOrder)


@pytest.mark.slow
async def test_replay_records_and_replays_200_constrained_calls(tmp_path: Path) -> None:
    cassette = tmp_path / "structured.jsonl"
    recorder = ReplayModel(str(cassette), mode="record",
                           inner={"name": "local", "args": {"n_threads": 1}})
    recorded = await constrained_calls(recorder)
    await recorder.aclose()
    assert_all_valid(recorded, "grammar")
    lines = [json.loads(line) for line in cassette.read_text().splitlines()]
    assert len(lines) == CALLS
    assert all(line["request"]["response_schema"]["schema"] == ORDER_SCHEMA for line in lines)
    assert {line["model"]["structured_output"] for line in lines} == {"grammar"}

    player = ReplayModel(str(cassette))  # no inner model: answers from the cassette alone
    assert player.structured_output == "grammar" and len(player) == CALLS
    replayed = await constrained_calls(player)
    assert_all_valid(replayed, "grammar")
    assert [r.value for r in replayed] == [r.value for r in recorded]
    # The schema is part of the key: the same request under another schema was not recorded.
    messages, params = requests()[0]
    with pytest.raises(CassetteMissError):
        await player.complete(messages, None, params,
                              response_schema=ResponseSchema.of(Part))


# -- schemas a backend cannot honour: one clear error ------------------------------------------


UNHONOURED = {
    "uniqueItems": {"type": "object", "required": ["tags"], "properties": {
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}},
    "multipleOf": {"type": "object", "required": ["n"], "properties": {
        "n": {"type": "integer", "multipleOf": 5}}},
    "not local": {"type": "object", "required": ["order"], "properties": {
        "order": {"$ref": "https://example.com/order.schema.json"}}},
}


@pytest.mark.slow
@pytest.mark.parametrize("keyword", sorted(UNHONOURED))
async def test_local_refuses_a_schema_it_cannot_constrain_before_generating(
        local: LocalModel, keyword: str) -> None:
    rs = ResponseSchema.of(UNHONOURED[keyword], name="probe")
    shared = local._shared()
    before = len(shared.memo)
    messages = [Message(role="user", content="Reply.")]
    with pytest.raises(UnsupportedSchema) as info:
        await local.complete(messages, params={"max_tokens": 8}, response_schema=rs)
    assert keyword in info.value.message and "'probe'" in info.value.message
    assert info.value.fix and "drop those keywords" in info.value.fix
    assert len(shared.memo) == before  # nothing was generated, nothing remembered
    with pytest.raises(UnsupportedSchema):  # the helper raises it too: no free-text fallback
        await complete_structured(local, messages, rs, {"max_tokens": 8})


@pytest.mark.slow
async def test_openai_json_schema_refused_by_llama_server_names_json_object(
        llama_server: str) -> None:
    model = OpenAIModel(base_url=llama_server, tools=False, structured="json_schema")  # strict
    messages = [Message(role="user", content="Reply.")]
    try:
        with pytest.raises(UnsupportedSchema) as info:
            await complete_structured(model, messages, Order, {"max_tokens": 8})
    finally:
        await model.aclose()
    # llama-cpp-python 0.3.36 answers it with HTTP 500 (its 422 validation error as the body)
    assert "refused response_format 'json_schema'" in info.value.message
    assert info.value.fix and "json_object (llama-cpp-python's server)" in info.value.fix


@pytest.mark.slow
async def test_openai_auto_finds_the_form_the_server_takes(llama_server: str) -> None:
    """``structured: auto`` (the default) tries json_schema, is refused by llama-cpp-python's
    server, and settles on its json_object form: the reply is constrained and valid."""
    model = OpenAIModel(base_url=llama_server, tools=False)
    assert model.structured == "auto" and model.form == "json_schema"
    messages = [Message(role="user", content="Order two pears for Ana.")]
    try:
        reply = await complete_structured(model, messages, Order,
                                          {"max_tokens": 100, "temperature": 0.0, "seed": 3})
        again = await complete_structured(model, messages, Order,
                                          {"max_tokens": 100, "temperature": 0.0, "seed": 4})
    finally:
        await model.aclose()
    assert model.form == "json_object" and model.structured_output == "server"
    assert reply.ok and reply.mode == "server" and again.ok
    jsonschema.validate(reply.value, ORDER_SCHEMA)


@pytest.mark.slow
async def test_openai_auto_steps_down_once_when_first_calls_are_refused_together(
        llama_server: str) -> None:
    """Calls in flight at once are all refused json_schema; the form steps down once, to
    json_object, not once per refusal (to none, then a KeyError)."""
    model = OpenAIModel(base_url=llama_server, tools=False)
    messages = [Message(role="user", content="Order two pears for Ana.")]
    try:
        replies = await asyncio.gather(*(
            complete_structured(model, messages, Order, {"max_tokens": 60, "temperature": 0.0,
                                                         "seed": k}) for k in range(4)))
    finally:
        await model.aclose()
    assert model.form == "json_object"
    assert all(r.mode == "server" for r in replies)


class Recording(ModelWrapper):
    """Forwards to a real model and keeps what it was sent and what it answered."""

    def __init__(self, inner: ChatModel, mode: StructuredOutput | None = None) -> None:
        super().__init__(inner)
        self.mode = mode
        self.sent: list[list[Message]] = []
        self.replies: list[Completion] = []

    @property
    def structured_output(self) -> StructuredOutput:
        return self.mode or super().structured_output

    async def complete(self, messages: list[Message], tools: list[ToolSpec] | None = None,
                       params: dict[str, Any] | None = None, *,
                       response_schema: ResponseSchema | None = None) -> Completion:
        self.sent.append(list(messages))
        reply = await super().complete(messages, tools, params, response_schema=response_schema)
        self.replies.append(reply)
        return reply


@pytest.mark.slow
async def test_openai_structured_none_validates_with_instructions(llama_server: str) -> None:
    inner = OpenAIModel(base_url=llama_server, tools=False, structured="none")
    model = Recording(inner)
    rs = ResponseSchema.of(Order)
    messages = [Message(role="user", content="Order two pears.")]
    try:
        reply = await complete_structured(model, messages, rs, {"max_tokens": 60, "seed": 1})
    finally:
        await model.aclose()
    assert reply.mode == "validate" and 1 <= reply.attempts <= 2
    assert model.sent[0] == [*messages, Message(role="user", content=rs.instructions())]


async def test_openai_structured_none_refuses_a_response_schema_passed_directly() -> None:
    model = OpenAIModel(base_url="http://127.0.0.1:9/v1", structured="none")  # never called
    with pytest.raises(UnsupportedSchema) as info:
        await model.complete([Message(role="user", content="x")],
                             response_schema=ResponseSchema.of(Order))
    assert "structured: none" in info.value.message
    assert info.value.fix and "complete_structured" in info.value.fix


# -- complete_structured's re-ask, on the real model's free replies ---------------------------


ANSWER = {"type": "object", "properties": {"answer": {"type": "integer"}},
          "required": ["answer"], "additionalProperties": False}


@pytest.mark.slow
async def test_an_invalid_reply_is_answered_with_its_error_and_asked_once_more(
        local: LocalModel) -> None:
    model = Recording(local, mode="validate")  # the helper must instruct and validate
    messages = [Message(role="user", content="What is 2+2?")]
    reply = await complete_structured(model, messages, ANSWER,
                                      {"temperature": 0.0, "max_tokens": 48, "seed": 0})
    rs = ResponseSchema.of(ANSWER)
    assert reply.attempts == len(model.sent) <= 2 and reply.mode == "validate"
    first = model.replies[0]
    with pytest.raises(StructuredOutputError) as first_error:
        rs.parse(first.message.content or "")  # SmolLM2 echoes the schema: not an answer
    assert first.finish_reason == "stop"
    assert model.sent[0][-1].content == rs.instructions()
    assert model.sent[1] == [*model.sent[0], first.message,
                             Message(role="user", content=REASK.format(error=first_error.value))]
    assert reply.usage.calls == 2
    assert reply.ok == (reply.error is None)


@pytest.mark.slow
async def test_a_reply_cut_at_max_tokens_is_not_asked_again(local: LocalModel) -> None:
    model = Recording(local, mode="validate")
    reply = await complete_structured(model, [Message(role="user", content="What is 2+2?")],
                                      ANSWER, {"temperature": 0.0, "max_tokens": 3, "seed": 0})
    assert not reply.ok and reply.attempts == 1 and len(model.sent) == 1
    assert reply.error and reply.error.startswith("The reply was cut at max_tokens")


# -- the memo and the replay key ---------------------------------------------------------------


@pytest.mark.slow
async def test_local_memo_answers_a_repeated_constrained_request(local: LocalModel) -> None:
    rs = ResponseSchema.of(Order)
    messages = [Message(role="user", content="Order one melon, for the memo.")]
    params = {"temperature": 0.7, "max_tokens": 100, "seed": 7}
    shared = local._shared()
    first = await local.complete(messages, params=params, response_schema=rs)
    size = len(shared.memo)
    again = await local.complete(messages, params=params, response_schema=rs)
    assert again.message == first.message and again.latency_s == 0.0  # from the memo
    assert len(shared.memo) == size
    free = await local.complete(messages, params=params)  # no schema: another entry
    assert len(shared.memo) == size + 1 and free.latency_s > 0.0
    rs.parse(first.message.content or "")


def test_request_key_leaves_out_an_absent_schema() -> None:
    messages = [Message(role="user", content="hi")]
    params = {"max_tokens": 4}
    plain = request_key(messages, None, params)
    assert plain == request_key(messages, None, params, None)
    with_schema = request_key(messages, None, params, ResponseSchema.of(Order))
    assert with_schema != plain
    assert with_schema != request_key(messages, None, params, ResponseSchema.of(Part))
    renamed = ResponseSchema.of(Order, name="order")
    assert request_key(messages, None, params, renamed) != with_schema  # the name is sent too


@pytest.mark.parametrize("cassette", sorted(p.name for p in CASSETTES.glob("*.jsonl")))
def test_every_cassette_keeps_its_keys(cassette: str) -> None:
    """Each recorded key is the key of its stored request today (with its response schema, if
    it has one); a cassette recorded before structured output (no schema, no recorded mode)
    replays as ``validate``, a later one as the mode it recorded."""
    lines = [json.loads(line) for line in (CASSETTES / cassette).read_text().splitlines() if line]
    assert lines
    for line in lines:
        req = line["request"]
        tools = [ToolSpec.model_validate(t) for t in req["tools"]] if req["tools"] else None
        messages = [Message.model_validate(m) for m in req["messages"]]
        schema = (ResponseSchema.model_validate(req["response_schema"])
                  if "response_schema" in req else None)
        assert request_key(messages, tools, req["params"], schema) == line["key"]
    recorded = {(line.get("model") or {}).get("structured_output") for line in lines} - {None}
    replayed = ReplayModel(str(CASSETTES / cassette)).structured_output
    if not recorded and not any("response_schema" in line["request"] for line in lines):
        assert replayed == "validate"
    elif recorded:
        assert replayed in recorded


# -- ResponseSchema ----------------------------------------------------------------------------


def test_response_schema_of_a_dict_a_pydantic_class_and_another_schema() -> None:
    from_dict = ResponseSchema.of(ANSWER)
    assert from_dict.name == "response" and from_dict.json_schema == ANSWER
    from_class = ResponseSchema.of(Order)
    assert from_class.name == "Order" and from_class.json_schema == ORDER_SCHEMA
    renamed = ResponseSchema.of(from_class, name="order")
    assert renamed.name == "order" and renamed.hash() == from_class.hash()
    assert ResponseSchema.of(from_class) is from_class
    assert from_dict.hash() != from_class.hash()


@pytest.mark.parametrize("bad, said", [
    ({"type": "strng"}, "not a valid JSON Schema"),
    ({"type": "object", "required": "answer"}, "not a valid JSON Schema"),
    (["answer"], "must be a JSON Schema object, got list"),
])
def test_an_invalid_schema_is_a_user_error(bad: Any, said: str) -> None:
    with pytest.raises(UserError) as info:
        ResponseSchema.of(bad)
    assert said in info.value.message and info.value.fix


GOOD_ORDER = '{"size": "small", "rush": true, "total": 1, "fruit": "fig", "parts": %s}'


@pytest.mark.parametrize("text, said", [
    ("", "not valid JSON"),
    ('{"size": "small", "rush": true', "not valid JSON"),
    (GOOD_ORDER.replace('"small"', '"huge"') % '[{"qty": 1, "fresh": true}]',
     "at size: 'huge' is not one of"),
    (GOOD_ORDER % '[{"qty": "1", "fresh": true}]', "at parts/0/qty: '1' is not of type 'integer'"),
    (GOOD_ORDER % "[]", "at parts:"),
    (GOOD_ORDER.replace('"fig"', '"bananas"') % '[{"qty": 1, "fresh": true}]',
     "at fruit: 'bananas' is too long"),
    ('{"size": "small", "rush": true, "total": 1, "fruit": "fig"}',
     "at (top level): 'parts' is a required"),
])
def test_parse_errors_name_the_place(text: str, said: str) -> None:
    with pytest.raises(StructuredOutputError) as info:
        ResponseSchema.of(Order).parse(text)
    assert said in str(info.value)


def test_parse_returns_the_value() -> None:
    text = ('{"size": "large", "rush": false, "total": 3, "fruit": "fig", '
            '"parts": [{"qty": 3, "fresh": false}]}')
    assert ResponseSchema.of(Order).parse(text) == json.loads(text)


# -- the grammar -------------------------------------------------------------------------------


def test_unsupported_keywords_name_each_keyword_and_its_place() -> None:
    assert unsupported_keywords(ORDER_SCHEMA) == []
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string", "format": "email"},
                     "uniqueItems": True},
            "n": {"type": "integer", "minimum": 0},
            "when": {"type": "string", "format": "date"},
            "pick": {"anyOf": [{"type": "number", "multipleOf": 2}, {"type": "null"}]},
            "ext": {"$ref": "other.json#/x"},
            "zip": {"type": "string", "pattern": "^\\d{5}$"},
            "name": {"type": "string", "pattern": "\\S"},
        },
        "$defs": {"M": {"type": "object", "patternProperties": {"^x": {}}}},
        "not": {"type": "null"},
    }
    assert sorted(unsupported_keywords(schema)) == sorted([
        "not at /",
        "uniqueItems at /properties/tags",
        "format 'email' at /properties/tags/items",
        "pattern '^\\\\d{5}$' (regex escapes) at /properties/zip",
        "pattern '\\\\S' (not anchored with ^...$) at /properties/name",
        "minimum at /properties/n",
        "multipleOf at /properties/pick/anyOf/0",
        "$ref 'other.json#/x' (not local) at /properties/ext",
        "patternProperties at /$defs/M",
    ])


def test_integer_bounds_are_refused_since_the_converter_ignores_them() -> None:
    """llama-cpp-python 0.3.36 leaves ``minimum``/``maximum`` out of an integer's rule: the
    embedded model then answered 10 of 10 "a number from 5 to 7" requests out of range."""
    bounded = {"type": "object", "required": ["n"],
               "properties": {"n": {"type": "integer", "minimum": 5, "maximum": 7}}}
    with pytest.raises(UnsupportedSchema, match="maximum at /properties/n"):
        schema_to_gbnf(ResponseSchema.of(bounded))


def test_fold_repetitions() -> None:
    assert _fold_repetitions('s ::= "\\"" (char (char (char)?)?)? "\\""') == \
        's ::= "\\"" char{0,3} "\\""'
    assert _fold_repetitions("x ::= (a (a)?)?)?") == "x ::= a{0,2})?"  # an outer ")?" kept
    # Not one rule's nest: only the innermost, a nest of its own, is folded.
    assert _fold_repetitions("x ::= (a (b (a)?)?)?") == "x ::= (a (b a{0,1})?)?"
    assert _fold_repetitions("x ::= a | b") == "x ::= a | b"


def test_long_max_length_becomes_a_bounded_repetition() -> None:
    rs = ResponseSchema.of({"type": "object", "required": ["text"],
                            "properties": {"text": {"type": "string", "maxLength": 2000}}})
    gbnf = schema_to_gbnf(rs)
    assert "char{0,2000}" in gbnf and "(char (char" not in gbnf


def test_strings_admit_no_raw_control_characters() -> None:
    """JSON forbids a raw newline or tab inside a string; the converter's ``char`` admits
    them (replies with multi-line code did not parse), the grammar here does not."""
    gbnf = schema_to_gbnf(ResponseSchema.of({"type": "string"}))
    [char] = [line for line in gbnf.splitlines() if line.startswith("char ::=")]
    assert char.startswith(r'char ::= [^"\\\x7F\x00-\x1F] |')


@pytest.mark.slow
def test_the_folded_grammar_of_max_length_2000_compiles_in_llama_cpp(local: LocalModel) -> None:
    rs = ResponseSchema.of({"type": "object", "required": ["text"],
                            "properties": {"text": {"type": "string", "maxLength": 2000}}})
    assert compile_grammar(rs, local.llama) is not None


@pytest.mark.slow
async def test_multi_line_text_in_a_string_parses(local: LocalModel) -> None:
    """Prompts whose constrained replies held raw newlines (invalid JSON) before the
    grammar's ``char`` was narrowed to JSON's: none of the replies may fail that way."""
    code = {"type": "object", "required": ["code"],
            "properties": {"code": {"type": "string", "maxLength": 300}}}
    for i in range(3, 6):
        messages = [Message(role="user", content=f"Write a Python function that returns {i}, "
                                                 "as code with several lines.")]
        reply = await complete_structured(local, messages, code,
                                          {"max_tokens": 60, "seed": i, "temperature": 0.8},
                                          reasks=0)
        assert "control character" not in (reply.error or ""), reply.completion.message.content


# -- sharpen check model -----------------------------------------------------------------------


@pytest.mark.slow
def test_check_model_passes_the_local_model_in_grammar_mode() -> None:
    report = check_model("local", args={"n_threads": 1})
    report.raise_for_problems()
    [line] = [p for p in report.passed if p.startswith("structured:")]
    assert "mode 'grammar'" in line


@pytest.mark.slow
def test_check_model_of_llama_server_json_object_and_json_schema(llama_server: str) -> None:
    ref = {"name": "openai", "args": {"base_url": llama_server, "tools": False}}
    good = check_model(ref, args={"structured": "json_object"})
    good.raise_for_problems()
    assert any(p.startswith("structured: mode 'server'") for p in good.passed)
    bad = check_model(ref, args={"structured": "json_schema"})  # refused by this server
    [message] = [p.message for p in bad.problems if p.check == "structured"]
    assert "refused a small nested schema" in message and "json_object" in message
