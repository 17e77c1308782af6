"""Token-mask exports (``sharpen export --format tokens``, sharpen.train.tokens): on real
stored runs of the embedded model — its text-protocol replies, and native tool calls through
llama-cpp-python's OpenAI-compatible server — decoding the loss-masked tokens gives back
exactly the assistant text, the environment mask exactly the observations, and all the ids
exactly the conversation the chat template renders; a run of the embedded model with
``logprobs=true`` keeps them on its steps (also through a record/replay cassette) and the
export puts them on exactly the reply tokens they score."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import sharpen
from servers import start_llama_server, stop_server

from sharpen.core.agent_spec import AgentSpec, Limits
from sharpen.core.messages import Message, ToolCall
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.core.trajectory import TokenLogprobs
from sharpen.envs.base import ENV
from sharpen.runner import RunConfig, Runner
from sharpen.store import Store
from sharpen.train import export
from sharpen.train.tokens import embedded_tokenizer, step_logprobs, tokenize_messages

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tok() -> Any:
    return embedded_tokenizer()


def _rendered(messages: list[Message]) -> list[dict[str, str]]:
    """What the embedded model reads of each message: its text, then its tool calls as JSON
    lines (sharpen.models.local renders them so)."""
    out = []
    for m in messages:
        calls = [json.dumps({"name": c.name, "arguments": c.arguments}) for c in m.tool_calls]
        out.append({"role": m.role, "content": "\n".join(([m.content] if m.content else []) + calls)})
    return out


def _check_round_trip(line: dict[str, Any], messages: list[Message], tok: Any) -> None:
    """Every claim a tokens line makes, against the stored conversation ``messages``."""
    ids, loss, env = line["input_ids"], line["loss_mask"], line["env_mask"]
    assert len(ids) == len(loss) == len(env) and not any(a and b for a, b in zip(loss, env, strict=True))
    last = max(i for i, m in enumerate(messages) if m.role == "assistant")
    turns = _rendered(messages[: last + 1])  # the final verdict is left out
    assert tok.decode(ids) == tok.apply_chat_template(turns, tokenize=False)  # the whole conversation
    replies = [t["content"] for t in turns if t["role"] == "assistant"]
    first = next(i for i, t in enumerate(turns) if t["role"] == "assistant")
    observations = [t["content"] for t in turns[first:] if t["role"] in ("user", "tool")]
    spans = _spans(loss)
    assert [tok.decode(ids[a:b - 1]) for a, b in spans] == replies  # exactly the replies' text
    assert all(tok.convert_ids_to_tokens(ids[b - 1]) == tok.eos_token for _, b in spans)
    assert [tok.decode(ids[a:b]) for a, b in _spans(env)] == observations
    assert line["prompt_length"] == spans[0][0]
    assert tok.decode(ids[: line["prompt_length"]]).endswith("<|im_start|>assistant\n")


def _spans(mask: list[int]) -> list[tuple[int, int]]:
    """``[start, end)`` of each run of 1s."""
    out, start = [], None
    for i, v in enumerate([*mask, 0]):
        if v and start is None:
            start = i
        elif not v and start is not None:
            out.append((start, i))
            start = None
    return out


def test_text_protocol_replies_round_trip_through_the_cli(recorded_code_run: tuple[str, str], tok: Any,
                                                          tmp_path: Path) -> None:
    """SmolLM2's own replies (the recorded code run: 46 episodes, up to two submissions each)
    exported by the CLI."""
    url, run_id = recorded_code_run
    out = tmp_path / "tokens.jsonl"
    res = sharpen("export", run_id, "--format", "tokens", "-o", str(out), "--store", url, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    store = Store(url)
    trajectories = {t.id: t for t in store.iter_trajectories(run_id, with_messages=True)}
    assert len(lines) == len(trajectories) >= 40 and f"wrote {len(lines)} trajectories" in res.stderr
    multi_turn = 0
    for line in lines:
        assert line["logprobs"] is None and line["meta"]["tokenizer"] == "embedded"  # none recorded
        t = trajectories[line["meta"]["trajectory_id"]]
        _check_round_trip(line, t.messages, tok)
        multi_turn += sum(line["env_mask"]) > 0
    assert multi_turn >= 5  # second submissions after the tests' feedback: observations masked


@pytest.fixture(scope="module")
def function_calling_server() -> Iterator[str]:
    """The embedded GGUF behind llama-cpp-python's server in its ``chatml-function-calling``
    chat format, which makes the model answer with native tool calls when a request sends
    ``tool_choice: auto`` (the model's ``tools: auto``; the server reads its settings from the
    environment too)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CHAT_FORMAT", "chatml-function-calling")
        base_url, proc = start_llama_server(n_threads=1)
    try:
        yield base_url
    finally:
        stop_server(proc)


@pytest.mark.slow  # a server of its own (as tests/test_models_server.py)
async def test_native_tool_calls_round_trip(function_calling_server: str, tok: Any, tmp_path: Path) -> None:
    """One native ``move`` call per episode: llama-cpp-python's server refuses a conversation
    that carries an assistant tool call back with ``"content": null`` (its request type wants
    a string; HTTP 500), so a second turn is not reachable this way. The tool messages after
    a reply are covered in memory below."""
    env_ref = PluginRef(name="gridsafety")
    tasks = REGISTRY.create(ENV, env_ref).list_tasks("test")[:2]
    spec = AgentSpec(name="native", model=PluginRef(name="openai", args={
        "base_url": function_calling_server, "tools": "auto", "structured": "none"}),
        params={"temperature": 0.0, "max_tokens": 40}, decoding="free", limits=Limits(max_steps=1))
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    summary = await Runner(store, progress=False).run(RunConfig(env=env_ref, agent=spec, tasks=tasks))
    trajectories = {t.id: t for t in store.iter_trajectories(summary.run_id, with_messages=True)}
    assert any(m.tool_calls for t in trajectories.values() for m in t.messages)
    assert any(m.role == "tool" for t in trajectories.values() for m in t.messages)
    lines, count = export(store, [summary.run_id], "tokens", tokenizer=tok)
    lines = list(lines)
    assert count.written == len(lines) == len(trajectories) == 2
    for line in lines:
        _check_round_trip(line, trajectories[line["meta"]["trajectory_id"]].messages, tok)


def test_in_memory_conversation_with_logprobs_and_markup_lookalikes(tok: Any) -> None:
    """What GRPO's rollouts pass in: messages never stored, replies that look like the
    template's own markup, a reply's logprobs placed on its tokens."""
    messages = [Message(role="system", content="Act."), Message(role="user", content="Go."),
                Message(role="assistant", content="user"),
                Message(role="user", content="assistant\n"),
                Message(role="assistant", content="\n", tool_calls=[
                    ToolCall(id="c1", name="submit", arguments={"code": "x = 1"})]),
                Message(role="tool", tool_call_id="c1", content="1/1 tests passed."),
                Message(role="assistant", content="Done.")]
    first = len(tok("user", add_special_tokens=False)["input_ids"])
    r = tokenize_messages(messages, tok, reply_logprobs=[[-0.5] * first, None, None])
    line = r.to_json()
    _check_round_trip(line, messages, tok)
    assert sum(r.env_mask) == len(tok("assistant\n", add_special_tokens=False)["input_ids"]) + len(
        tok("1/1 tests passed.", add_special_tokens=False)["input_ids"])  # tool results are env
    reply = next(s for s in r.segments if s.kind == "assistant")
    assert r.logprobs is not None and r.logprobs[reply.start:reply.end] == [-0.5] * first + [None]
    assert sum(v is not None for v in r.logprobs) == first  # the other replies gave none
    assert tokenize_messages(messages, tok).logprobs is None


def test_a_template_that_rewrites_text_is_refused(tok: Any) -> None:
    trimming = copy.deepcopy(tok)
    trimming.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
                              "{{ m['content'] | trim }}<|im_end|>\n{% endfor %}")
    messages = [Message(role="user", content="Go."), Message(role="assistant", content=" padded ")]
    with pytest.raises(ValueError, match="changes the messages' text"):
        tokenize_messages(messages, trimming)
    assert sum(tokenize_messages(messages, tok).loss_mask) == len(
        tok(" padded ", add_special_tokens=False)["input_ids"]) + 1


def test_an_unknown_tokenizer_is_a_user_error(tmp_path: Path) -> None:
    from sharpen.core.errors import UserError
    from sharpen.train.tokens import load_tokenizer

    with pytest.raises(UserError, match="neither a gguf file nor a checkpoint folder"):
        load_tokenizer(str(tmp_path / "missing"))


TINY_AGENT = {"name": "tiny", "model": {"name": "local"}, "params": {"temperature": 0.0, "max_tokens": 24},
              "components": {"instructions": "Answer with the complete function in one ```python block."},
              "limits": {"max_steps": 2, "max_tokens": 4000, "max_seconds": 120}}
CODE_RUN = ["run", "code", "-E", "source=generated", "-E", "difficulty=easy", "-E", "max_submissions=2",
            "--seed", "0", "--json"]


def _run(tmp_path: Path, store: str, *args: str) -> str:
    """A run of the tiny agent on generated code tasks through the CLI; its id."""
    res = sharpen(*CODE_RUN, "--agent", str(tmp_path / "tiny.yaml"), *args, "--store", store, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    return str(json.loads(res.stdout)["run"]["id"])


@pytest.mark.slow  # the embedded model, loaded with logits_all
def test_a_run_with_logprobs_stores_them_and_the_export_places_them(tok: Any, tmp_path: Path) -> None:
    """``--model-arg logprobs=true``: every step of the embedded model stores one logprob (≤ 0)
    and token text per generated token (the texts join to the reply); the tokens export puts
    each reply's on that reply's tokens — as many floats as the step stored — and nothing
    elsewhere. The same through a record/replay cassette: recorded, then replayed alike."""
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY_AGENT))
    url = f"sqlite:///{tmp_path / 's.db'}"
    run_id = _run(tmp_path, url, "--tasks", "2", "--model", "local", "--model-arg", "logprobs=true")
    store = Store(url)
    trajectories = {t.id: t for t in store.iter_trajectories(run_id)}
    steps = [s for t in trajectories.values() for s in t.steps]
    assert len(trajectories) == 2 and len(steps) >= 2
    for s in steps:
        lp = s.logprobs
        assert lp is not None and lp.tokens is not None and len(lp.tokens) == len(lp.logprobs) > 0
        assert all(v <= 0 for v in lp.logprobs) and min(lp.logprobs) < 0
        assert "".join(lp.tokens) == s.messages[0].content  # the reply, token by token
    assert not any(s.logprobs for t in store.iter_trajectories(run_id, with_messages=False) for s in t.steps)

    lines, count = export(store, [run_id], "tokens", tokenizer=tok)
    lines = list(lines)
    assert count.written == 2 and count.unaligned == 0
    for line in lines:
        t = trajectories[line["meta"]["trajectory_id"]]
        _check_round_trip(line, t.messages, tok)
        ids, logprobs, loss = line["input_ids"], line["logprobs"], line["loss_mask"]
        assert logprobs is not None and len(logprobs) == len(ids)
        assert all((v is None) or (m == 1 and v <= 0) for v, m in zip(logprobs, loss, strict=True))
        replies = [seg for seg in line["segments"] if seg["kind"] == "assistant"]
        stored = step_logprobs(t, t.messages)
        assert len(replies) == len(stored) == len(t.steps)
        for seg, lp in zip(replies, stored, strict=True):
            assert lp is not None
            assert logprobs[seg["start"]:seg["end"]] == [*lp.logprobs, None]  # the end-of-turn: none given

    cassette = tmp_path / "lp.jsonl"
    inner = "inner={name: local, args: {logprobs: true}}"
    recorded = _run(tmp_path, url, "--tasks", "1", "--model", "replay", "--model-arg", f"cassette={cassette}",
                    "--model-arg", "mode=record", "--model-arg", inner)
    replayed = _run(tmp_path, url, "--tasks", "1", "--model", "replay", "--model-arg", f"cassette={cassette}")
    kept = [[s.logprobs for t in store.iter_trajectories(r) for s in t.steps] for r in (recorded, replayed)]
    assert kept[0] == kept[1] and all(lp is not None and lp.logprobs for lp in kept[0])


def test_logprobs_that_do_not_align_are_left_out_and_counted(tok: Any) -> None:
    """A step's logprobs whose token texts or ids are not the tokenizer's, or whose count
    differs, are never shifted onto the reply's tokens: that reply gets none, and it is
    counted; aligned ones are placed."""
    reply = "def f(x):\n    return x"
    ids = tok(reply, add_special_tokens=False)["input_ids"]
    texts = [tok.decode([i]) for i in ids]
    messages = [Message(role="user", content="Go."), Message(role="assistant", content=reply),
                Message(role="user", content="Again."), Message(role="assistant", content=reply)]
    good = TokenLogprobs(logprobs=[-0.25] * len(ids), tokens=texts)
    for bad in (TokenLogprobs(logprobs=[-0.25] * len(ids), tokens=[*texts[1:], texts[0]]),  # same count
                TokenLogprobs(logprobs=[-0.25] * len(ids), token_ids=[*ids[:-1], ids[-1] + 1]),
                TokenLogprobs(logprobs=[-0.25] * (len(ids) + 2), tokens=[*texts, "x", "y"]),
                [-0.25] * (len(ids) - 1)):
        r = tokenize_messages(messages, tok, reply_logprobs=[bad, good])
        first, second = (seg for seg in r.segments if seg.kind == "assistant")
        assert r.unaligned == 1 and r.logprobs is not None
        assert r.logprobs[first.start:first.end] == [None] * (first.end - first.start)
        assert r.logprobs[second.start:second.end] == [-0.25] * len(ids) + [None]
        assert tokenize_messages(messages, tok, reply_logprobs=[bad, None]).logprobs is None
    with_ids = TokenLogprobs(logprobs=[-0.5] * len(ids), token_ids=ids)
    assert tokenize_messages(messages, tok, reply_logprobs=[with_ids, None]).unaligned == 0
