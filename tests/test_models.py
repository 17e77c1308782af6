"""Model backends: pricing, OpenAI-compatible error mapping and tool-call parsing against a
real scripted HTTP server on loopback, record/replay, and the embedded model."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from servers import ScriptedServer, free_port

from sharpen.core.errors import InfraError, UserError
from sharpen.core.messages import Message, ToolSpec, Usage
from sharpen.models import ChatModel, Completion, create_model, pricing
from sharpen.models.openai_compat import OpenAIModel
from sharpen.models.replay import CassetteMissError, ReplayModel, request_key

MESSAGES = [
    Message(role="system", content="You are a careful programmer."),
    Message(role="user", content="Write a Python function add(a, b) that returns a + b."),
]
SUBMIT = ToolSpec(
    name="submit",
    description="Submit code.",
    parameters={"type": "object", "properties": {"code": {"type": "string"}}},
    text_argument="code",
)


@pytest.fixture(autouse=True)
def _no_user_prices(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Isolate every test from a developer's own price tables."""
    monkeypatch.delenv(pricing.ENV_VAR, raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)


# --- pricing --------------------------------------------------------------------------


def cost(model: str, usage: Usage) -> float | None:
    return pricing.PriceTable.load().cost(model, usage)


def test_local_models_are_free_by_default() -> None:
    usage = Usage(input_tokens=1000, output_tokens=500)
    assert cost("local/smollm2-135m-instruct", usage) == 0.0


def test_unknown_model_cost_is_none_not_zero() -> None:
    assert cost("no-such-model-anywhere", Usage(input_tokens=10, output_tokens=5)) is None


def test_user_table_via_env_overrides_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    table = tmp_path / "my_prices.yaml"
    table.write_text('"local/*": {input: 1.0, output: 3.0}\n"acme-*": {input: 2, output: 4}\n')
    monkeypatch.setenv(pricing.ENV_VAR, str(table))
    usage = Usage(input_tokens=2_000_000, output_tokens=1_000_000)
    assert cost("local/smollm2-135m-instruct", usage) == pytest.approx(5.0)
    assert cost("acme-large", usage) == pytest.approx(8.0)
    assert cost("still-unknown", usage) is None


def test_cwd_table_and_exact_name_beats_glob(tmp_path: Path) -> None:
    (tmp_path / ".sharpen").mkdir()
    (tmp_path / ".sharpen" / "prices.yaml").write_text(
        '"acme-*": {input: 1, output: 1}\n"acme-mini": {input: 0.5, output: 0.5}\n'
    )
    usage = Usage(input_tokens=1_000_000, output_tokens=0)
    assert cost("acme-mini", usage) == pytest.approx(0.5)
    assert cost("acme-max", usage) == pytest.approx(1.0)


def test_a_loaded_table_is_read_once(tmp_path: Path) -> None:
    (tmp_path / ".sharpen").mkdir()
    local = tmp_path / ".sharpen" / "prices.yaml"
    local.write_text('"acme": {input: 1, output: 1}\n')
    table = pricing.PriceTable.load(environ={})
    local.write_text('"acme": {input: 9, output: 9}\n')  # edited while a run goes on
    usage = Usage(input_tokens=1_000_000)
    assert table.cost("acme", usage) == pytest.approx(1.0)
    assert pricing.PriceTable.load(environ={}).cost("acme", usage) == pytest.approx(9.0)


def test_hosted_models_are_priced_from_the_vendored_litellm_map(tmp_path: Path) -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    # As LiteLLM names them, a dated snapshot it lists, and provider-prefixed.
    assert cost("gpt-4o", usage) == pytest.approx(2.50 + 10.00)
    assert cost("gpt-4o-2024-05-13", usage) == pytest.approx(5.00 + 15.00)  # not gpt-4o's
    assert cost("openai/gpt-4o", usage) == cost("gpt-4o", usage)
    assert cost("deepseek/deepseek-chat", usage) is not None
    # Nothing is guessed: an unlisted snapshot, another provider's prefix, an unknown name.
    assert cost("gpt-4o-2099-01-01", usage) is None
    assert cost("anthropic/gpt-4o", usage) is None
    assert cost("no-such-model-anywhere", usage) is None
    table = pricing.PriceTable.load()
    # LiteLLM's map is read only when a lookup reaches it: the embedded model's does not.
    assert table.lookup("local/smollm2-135m") is not None
    assert "litellm 1." not in table.layers[-1].source
    assert table.lookup("gpt-4o") is not None
    assert "litellm 1." in table.layers[-1].source
    # A user's table wins over LiteLLM's price.
    (tmp_path / ".sharpen").mkdir()
    (tmp_path / ".sharpen" / "prices.yaml").write_text('"gpt-4o": {input: 1, output: 1}\n')
    assert cost("gpt-4o", usage) == pytest.approx(2.0)
    assert cost("openai/gpt-4o", usage) == pytest.approx(12.5)  # the user priced only gpt-4o


def test_bad_price_table_is_a_user_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    table = tmp_path / "bad.yaml"
    table.write_text('"m": {input: -1, output: 2}\n')
    monkeypatch.setenv(pricing.ENV_VAR, str(table))
    with pytest.raises(UserError, match=r"bad\.yaml"):
        pricing.PriceTable.load()
    monkeypatch.setenv(pricing.ENV_VAR, str(tmp_path / "missing.yaml"))
    with pytest.raises(UserError, match="SHARPEN_PRICES"):
        pricing.PriceTable.load()


# --- OpenAI-compatible client against a scripted loopback server -----------------------


@pytest.fixture(scope="module")
def scripted() -> Iterator[ScriptedServer]:
    with ScriptedServer(slow_s=2.0) as server:
        yield server


async def test_openai_completion_usage_and_request(
    scripted: ScriptedServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    table = tmp_path / "p.yaml"
    table.write_text('"acme-chat": {input: 1000000, output: 2000000}\n')
    monkeypatch.setenv(pricing.ENV_VAR, str(table))
    backend = create_model(
        {"name": "openai", "args": {"base_url": scripted.base_url("ok"), "model": "acme-chat"}},
        api_key="sk-secret",
    )
    model = pricing.PricedModel(backend, pricing.PriceTable.load())
    assert isinstance(model, ChatModel)
    c = await model.complete(MESSAGES, params={"temperature": 0.0, "max_tokens": 16, "seed": 3})
    bare = await backend.complete(MESSAGES, params={"temperature": 0.0, "max_tokens": 16, "seed": 3})
    await model.aclose()
    assert c.message.content == "hello" and c.finish_reason == "stop"
    assert (c.usage.input_tokens, c.usage.output_tokens, c.usage.calls) == (7, 3, 1)
    assert c.usage.cost_usd == pytest.approx(7 + 6)
    assert bare.usage.cost_usd is None  # a backend reports tokens; the wrapper prices them
    path, headers, body = scripted.requests[-1]
    assert path.endswith("/v1/chat/completions")
    assert headers["Authorization"] == "Bearer sk-secret"
    assert body["model"] == "acme-chat" and body["seed"] == 3 and body["max_tokens"] == 16
    assert body["messages"][1] == {"role": "user", "content": MESSAGES[1].content}
    # The key never leaks into serialisable args or repr.
    assert isinstance(backend, OpenAIModel)
    assert "sk-secret" not in json.dumps(backend.args) and "sk-secret" not in repr(backend)


async def test_openai_cost_unknown_is_none(scripted: ScriptedServer) -> None:
    model = pricing.PricedModel(OpenAIModel(base_url=scripted.base_url("ok"), model="unpriced-model"),
                                pricing.PriceTable.load())
    c = await model.complete(MESSAGES)
    await model.aclose()
    assert c.usage.cost_usd is None


async def test_openai_tool_calls_parsed_and_malformed_kept_as_text(
    scripted: ScriptedServer,
) -> None:
    model = OpenAIModel(base_url=scripted.base_url("tools"))
    assert model.supports_tools
    c = await model.complete(MESSAGES, tools=[SUBMIT])
    await model.aclose()
    assert scripted.requests[-1][2]["tools"] == [SUBMIT.to_openai()]
    assert [(t.id, t.name, t.arguments) for t in c.message.tool_calls] == [
        ("c1", "submit", {"code": "x = 1"})
    ]
    assert c.message.content == '{"code": "unterminated'
    assert c.finish_reason == "tool_calls"


async def test_openai_tools_disabled_sends_no_tools(scripted: ScriptedServer) -> None:
    model = OpenAIModel(base_url=scripted.base_url("ok"), tools=False)
    assert not model.supports_tools
    await model.complete(MESSAGES, tools=[SUBMIT])
    await model.aclose()
    assert "tools" not in scripted.requests[-1][2]


@pytest.mark.parametrize(
    ("scenario", "status"),
    [("429", 429), ("500", 500), ("503", 503), ("badjson", 200), ("cut", None),
     ("nochoices", 200), ("reset", None)],
)
async def test_openai_transient_failures_are_retryable_infra_errors(
    scripted: ScriptedServer, scenario: str, status: int | None
) -> None:
    model = OpenAIModel(base_url=scripted.base_url(scenario), timeout=10)
    with pytest.raises(InfraError) as info:
        await model.complete(MESSAGES)
    await model.aclose()
    assert info.value.retryable is True
    assert info.value.status == status
    if scenario == "429":
        assert "Retry-After: 1" in str(info.value) and "scripted 429" in str(info.value)


async def test_openai_timeout_is_retryable_infra_error(scripted: ScriptedServer) -> None:
    model = OpenAIModel(base_url=scripted.base_url("slow"), timeout=0.3)
    with pytest.raises(InfraError, match="timeout") as info:
        await model.complete(MESSAGES)
    await model.aclose()
    assert info.value.retryable


@pytest.mark.parametrize("scenario", ["401", "403"])
async def test_openai_auth_failure_is_user_error(scripted: ScriptedServer, scenario: str) -> None:
    model = OpenAIModel(base_url=scripted.base_url(scenario))
    with pytest.raises(UserError) as info:
        await model.complete(MESSAGES)
    await model.aclose()
    assert "OPENAI_API_KEY / --api-key" in str(info.value)


async def test_openai_404_names_the_base_url(scripted: ScriptedServer) -> None:
    base = scripted.url + "/wrong"
    model = OpenAIModel(base_url=base)
    with pytest.raises(UserError) as info:
        await model.complete(MESSAGES)
    await model.aclose()
    assert base in str(info.value) and "end in /v1" in str(info.value)


async def test_openai_other_4xx_is_not_retryable(scripted: ScriptedServer) -> None:
    model = OpenAIModel(base_url=scripted.base_url("400"))
    with pytest.raises(InfraError, match="scripted 400") as info:
        await model.complete(MESSAGES)
    await model.aclose()
    assert info.value.retryable is False and info.value.status == 400


async def test_openai_refused_connection_is_infra_error() -> None:
    model = OpenAIModel(base_url=f"http://127.0.0.1:{free_port()}/v1", timeout=5)
    with pytest.raises(InfraError) as info:
        await model.complete(MESSAGES)
    await model.aclose()
    assert info.value.retryable


async def test_openai_url_without_scheme_is_user_error() -> None:
    model = OpenAIModel(base_url="127.0.0.1:8000/v1")
    with pytest.raises(UserError, match="base URL"):
        await model.complete(MESSAGES)
    await model.aclose()


async def test_priced_model_prices_counted_tokens_only(tmp_path: Path) -> None:
    """Whatever cost a backend (here a cassette) reports, the wrapper prices the tokens by the
    model's name; a call that counted no tokens (no usage from the server) stays unknown."""
    (tmp_path / ".sharpen").mkdir()
    (tmp_path / ".sharpen" / "prices.yaml").write_text('"acme": {input: 1000000, output: 0}\n')
    other = [Message(role="user", content="and now?")]
    cassette = tmp_path / "c.jsonl"
    def reply(n: int) -> dict[str, Any]:
        usage = Usage(input_tokens=n, calls=1, cost_usd=123.0)
        completion = Completion(message=Message(role="assistant", content="hi"), usage=usage)
        return completion.model_dump(mode="json")

    lines = [{"key": request_key(msgs, None, None), "model": {"name": "acme"}, "completion": reply(n)}
             for msgs, n in ((MESSAGES, 3), (other, 0))]
    cassette.write_text("".join(json.dumps(line) + "\n" for line in lines))
    model = pricing.PricedModel(ReplayModel(str(cassette)), pricing.PriceTable.load(environ={}))
    assert model.name == "acme"
    assert (await model.complete(MESSAGES)).usage.cost_usd == pytest.approx(3.0)
    assert (await model.complete(other)).usage.cost_usd is None


# --- ReplayModel ----------------------------------------------------------------------


async def test_replay_records_then_replays_http_model(scripted: ScriptedServer, tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    inner = {"name": "openai", "args": {"base_url": scripted.base_url("ok"), "model": "m"}}
    rec = create_model(
        {"name": "replay", "args": {"cassette": str(cassette), "mode": "record", "inner": inner}}
    )
    recorded = await rec.complete(MESSAGES, params={"temperature": 0})
    await rec.aclose()
    line = json.loads(cassette.read_text().splitlines()[0])
    assert line["key"] == request_key(MESSAGES, None, {"temperature": 0})
    assert set(line) >= {"key", "request", "completion"}

    n_requests = len(scripted.requests)
    rep = ReplayModel(str(cassette), latency_s=0)
    again = await rep.complete(MESSAGES, params={"temperature": 0})
    assert len(scripted.requests) == n_requests  # nothing reached the server
    assert again.model_dump(exclude={"latency_s"}) == recorded.model_dump(exclude={"latency_s"})
    assert again.latency_s == 0
    assert rep.name == "m" and rep.supports_tools is True


async def test_replay_unknown_request_says_how_to_rerecord(
    scripted: ScriptedServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "c.jsonl"
    inner = {"name": "openai", "args": {"base_url": scripted.base_url("ok")}}
    rec = ReplayModel(str(cassette), mode="record", inner=inner)
    await rec.complete(MESSAGES, params={"temperature": 0})
    rep = ReplayModel(str(cassette))
    with pytest.raises(CassetteMissError) as info:
        await rep.complete(MESSAGES, params={"temperature": 0.7})
    assert not isinstance(info.value, InfraError)
    text = str(info.value)
    assert "no recording for this request" in text and "mode=record" in text
    assert str(cassette) in text


def test_replay_missing_cassette_and_record_without_inner(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        ReplayModel(str(tmp_path / "nope.jsonl"))
    with pytest.raises(UserError, match="inner"):
        ReplayModel(str(tmp_path / "new.jsonl"), mode="record")


# --- the embedded model (real llama.cpp) ----------------------------------------------


@pytest.fixture(scope="module")
def local_model() -> ChatModel:
    pytest.importorskip("llama_cpp", reason="needs the local extra: pip install 'sharpen[local]'")
    return create_model("local")


@pytest.mark.slow
async def test_local_model_completes_with_usage_and_zero_cost(local_model: ChatModel) -> None:
    local_model._shared().memo.clear()  # type: ignore[attr-defined]  # generate, not recall
    priced = pricing.PricedModel(local_model, pricing.PriceTable.load())
    c = await priced.complete(MESSAGES, params={"temperature": 0, "max_tokens": 16})
    assert isinstance(c, Completion)
    assert c.message.role == "assistant" and c.message.content
    assert c.usage.input_tokens > 0 and 0 < c.usage.output_tokens <= 16
    assert c.usage.cost_usd == 0.0  # priced by name: local/* is free
    assert c.finish_reason in ("stop", "length") and c.latency_s > 0
    assert local_model.supports_tools is False


@pytest.mark.slow
async def test_local_model_cut_at_max_tokens_reports_length(local_model: ChatModel) -> None:
    c = await local_model.complete(MESSAGES, params={"temperature": 0, "max_tokens": 3})
    assert c.finish_reason == "length" and c.usage.output_tokens == 3


@pytest.mark.slow
async def test_local_instances_share_one_llama(local_model: ChatModel) -> None:
    from sharpen.models.local import LocalModel, loaded_models

    a, b = LocalModel(), create_model({"name": "local", "args": {"seed": 7}})
    assert isinstance(b, LocalModel)
    before = loaded_models()
    assert a.llama is b.llama is local_model.llama  # type: ignore[attr-defined]
    assert loaded_models() == before


@pytest.mark.slow
async def test_local_model_remembers_replies_it_would_give_again(
        local_model: ChatModel, monkeypatch: pytest.MonkeyPatch) -> None:
    """A repeated request is answered from the memo, without generating, with the reply and
    usage of the first, even after other requests ran on the shared Llama in between; another
    seed, or a forgotten reply, is generated."""
    from sharpen.models.local import LocalModel

    shared = local_model._shared()  # type: ignore[attr-defined]
    shared.memo.clear()
    params = {"temperature": 0.7, "max_tokens": 24, "seed": 3}
    first = await local_model.complete(MESSAGES, params=params)
    other = [*MESSAGES[:-1], Message(role="user", content="Name three colours.")]
    await local_model.complete(other, params=params)

    calls: list[int] = []
    generate = LocalModel._generate

    def counting(*args: Any) -> Any:
        calls.append(1)
        return generate(*args)

    monkeypatch.setattr(LocalModel, "_generate", staticmethod(counting))
    again = await local_model.complete(MESSAGES, params=params)
    assert calls == [] and again.latency_s == 0.0
    assert again.message.content == first.message.content and again.usage == first.usage
    await local_model.complete(MESSAGES, params={**params, "seed": 4})  # another seed: new
    assert calls == [1]
    shared.memo.clear()
    fresh = await local_model.complete(MESSAGES, params=params)
    assert calls == [1, 1] and fresh.latency_s > 0


def test_local_model_rejects_unknown_params() -> None:
    pytest.importorskip("llama_cpp")
    from sharpen.models.local import LocalModel

    with pytest.raises(UserError, match="does not take params"):
        LocalModel()._kwargs({"temperature": 0, "frobnicate": 1})


@pytest.mark.slow
async def test_replay_of_local_model_needs_no_llama(local_model: ChatModel, tmp_path: Path) -> None:
    cassette = tmp_path / "local.jsonl"
    rec = ReplayModel(str(cassette), mode="record", inner={"name": "local"})
    assert rec.name == "local/smollm2-135m-instruct"
    params = [{"temperature": 0, "max_tokens": 12}, {"temperature": 0, "max_tokens": 6}]
    recorded = [await rec.complete(MESSAGES, params=p) for p in params]
    # Replay in a fresh interpreter where llama_cpp cannot even be imported.
    script = (
        "import sys, json, asyncio\n"
        "sys.modules['llama_cpp'] = None\n"
        "from sharpen.core.messages import Message\n"
        "from sharpen.models.replay import ReplayModel\n"
        "msgs = [Message.model_validate(m) for m in json.loads(sys.argv[2])]\n"
        "params = json.loads(sys.argv[3])\n"
        "m = ReplayModel(sys.argv[1])\n"
        "out = [asyncio.run(m.complete(msgs, params=p)).model_dump(mode='json') for p in params]\n"
        "assert 'llama_cpp' not in sys.modules or sys.modules['llama_cpp'] is None\n"
        "print(json.dumps(out))\n"
    )
    msgs_json = json.dumps([m.model_dump(mode="json") for m in MESSAGES])
    argv = [sys.executable, "-c", script, str(cassette), msgs_json, json.dumps(params)]
    proc = await asyncio.to_thread(
        subprocess.run, argv, capture_output=True, text=True, timeout=60, check=True
    )
    replayed = json.loads(proc.stdout)
    assert replayed == [c.model_dump(mode="json") for c in recorded]


async def test_local_model_without_llama_cpp_names_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sharpen.models.local import LocalModel

    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp now fails
    with pytest.raises(UserError, match=r"sharpen\[local\]") as info:
        model = LocalModel(n_ctx=333)  # a (path, n_ctx) never loaded in this process
        await model.complete(MESSAGES)
    assert "GGML_NATIVE=OFF" in str(info.value)


@pytest.mark.slow
async def test_local_model_takes_tool_call_history(local_model: ChatModel) -> None:
    from sharpen.core.messages import ToolCall

    history = [
        *MESSAGES,
        Message(role="assistant", content=None,
                tool_calls=[ToolCall(id="c1", name="submit", arguments={"code": "x"})]),
        Message(role="tool", tool_call_id="c1", content="1 test failed"),
    ]
    c = await local_model.complete(history, params={"temperature": 0, "max_tokens": 4})
    assert c.usage.output_tokens > 0


@pytest.mark.slow
async def test_local_sampling_is_a_function_of_request_and_seed(local_model: ChatModel) -> None:
    hot = {"temperature": 1.0, "max_tokens": 24, "seed": 11}
    first = await local_model.complete(MESSAGES, params=hot)
    await local_model.complete([Message(role="user", content="Name a colour.")], params=hot)
    again = await local_model.complete(MESSAGES, params=hot)
    assert again.message.content == first.message.content


def test_local_threads_are_the_cores_the_load_leaves_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    from sharpen.models.local import LocalModel, default_threads

    monkeypatch.delenv("SHARPEN_THREADS", raising=False)
    assert [default_threads(load, 2) for load in (0.0, 0.4, 0.6, 1.4, 1.6, 15.0)] == [2, 2, 1, 1, 1, 1]
    assert [default_threads(load, 16) for load in (0.3, 4.2, 15.7, 40.0)] == [16, 12, 1, 1]
    monkeypatch.setenv("SHARPEN_THREADS", "3")
    assert default_threads(15.0, 2) == 3  # the environment wins over the load
    assert LocalModel().n_threads == 3
    assert LocalModel(n_threads=1).n_threads == 1  # and an explicit argument over both
    monkeypatch.setenv("SHARPEN_THREADS", "all")
    with pytest.raises(UserError, match="SHARPEN_THREADS"):
        default_threads()
