"""The OpenAI-compatible model keeps at most an endpoint's capacity in flight: found from
llama-cpp-python's real server on loopback (one request at a time), from a llama.cpp-style
``/props`` (a small real HTTP server that counts what it has in flight), or given."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from servers import ScriptedServer, chat_body, llama_server_fixture

from sharpen.core.episode_end import at_episode_end, playing
from sharpen.core.errors import UserError
from sharpen.core.messages import Message
from sharpen.models.capacity import HOLD_FLOOR_S, TRIAL_HOLDS, Capacity
from sharpen.models.openai_compat import OpenAIModel

llama_server = llama_server_fixture()

MESSAGES = [Message(role="system", content="You are terse."),
            Message(role="user", content="Say hello.")]
PARAMS = {"temperature": 0, "max_tokens": 4, "seed": 1}


class SlotServer:
    """Answers like llama.cpp's ``llama-server`` with ``slots`` slots: ``GET /props`` gives
    ``total_slots``; each chat completion takes ``delay_s``. Records the bodies it got and
    the most requests it had in flight at once (counted by the server itself)."""

    def __init__(self, slots: int, delay_s: float = 0.15) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.in_flight = 0
        self.peak = 0
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _send(self, status: int, obj: object) -> None:
                payload = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                if self.path == "/props":
                    self._send(200, {"total_slots": slots, "build_info": "test"})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with lock:
                    outer.bodies.append(body)
                    outer.in_flight += 1
                    outer.peak = max(outer.peak, outer.in_flight)
                time.sleep(delay_s)
                with lock:
                    outer.in_flight -= 1
                self._send(200, chat_body("hi"))

        ThreadingHTTPServer.daemon_threads = True
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def two_slots() -> Iterator[SlotServer]:
    server = SlotServer(slots=2)
    yield server
    server.close()


async def _many(model: OpenAIModel, n: int) -> None:
    await asyncio.gather(*(model.complete(MESSAGES, params=PARAMS) for _ in range(n)))


@pytest.mark.slow
async def test_llama_cpp_python_is_found_to_serve_one_at_a_time(llama_server: str) -> None:
    model = OpenAIModel(base_url=llama_server, tools=False)
    await _many(model, 5)
    assert model.capacity == Capacity("llama-cpp-python", 1)
    gate = await model.gate()
    assert (gate.limit, gate.peak, gate.in_flight) == (1, 1, 0)
    assert gate.waited >= 1  # the other four queued here, not in the server
    # llama-cpp-python's server takes llama.cpp's field and ignores it (no 422).
    forced = OpenAIModel(base_url=llama_server, tools=False, cache_prompt=True)
    assert forced.build_request(MESSAGES)["cache_prompt"] is True
    c = await forced.complete(MESSAGES, params=PARAMS)
    assert c.usage.output_tokens > 0
    await model.aclose()
    await forced.aclose()


@pytest.mark.slow
async def test_a_given_limit_overrides_what_the_server_says(llama_server: str) -> None:
    model = OpenAIModel(base_url=llama_server, tools=False, max_in_flight=3)
    await _many(model, 6)
    gate = await model.gate()
    assert (gate.limit, gate.peak) == (3, 3)
    await model.aclose()


async def test_props_total_slots_bound_what_the_server_has_in_flight(
        two_slots: SlotServer) -> None:
    model = OpenAIModel(base_url=two_slots.url, tools=False)
    await _many(model, 8)
    assert model.capacity == Capacity("llama.cpp", 2)
    assert two_slots.peak == 2  # counted by the server: never more than its slots
    assert len(two_slots.bodies) == 8
    assert all(b["cache_prompt"] is True for b in two_slots.bodies)
    assert [m["role"] for m in two_slots.bodies[0]["messages"]] == ["system", "user"]
    unlimited = OpenAIModel(base_url=two_slots.url, tools=False, max_in_flight="none",
                            cache_prompt=False)
    two_slots.peak = 0
    await _many(unlimited, 6)
    assert two_slots.peak > 2
    assert "cache_prompt" not in two_slots.bodies[-1]
    await model.aclose()
    await unlimited.aclose()


async def test_every_episode_loop_gets_its_own_gate(two_slots: SlotServer) -> None:
    """A gate belongs to one event loop (as the HTTP client does): a second run of the same
    model instance in another loop gets a fresh one, and the capacity is not asked again."""
    model = OpenAIModel(base_url=two_slots.url, tools=False)

    async def run() -> object:
        await _many(model, 3)
        gate = await model.gate()
        await model.aclose()
        return gate

    first = await run()
    second = await asyncio.to_thread(asyncio.run, run())
    assert first is not second
    assert model.capacity == Capacity("llama.cpp", 2)


async def test_an_unknown_server_is_not_limited_and_gets_no_cache_prompt() -> None:
    with ScriptedServer() as server:
        model = OpenAIModel(base_url=server.base_url("ok"), tools=False)
        await _many(model, 4)
        assert model.capacity == Capacity("unknown", None)
        assert (await model.gate()).limit is None
        assert all("cache_prompt" not in body for _, _, body in server.requests)
        await model.aclose()


async def test_an_unreachable_server_is_asked_again_at_the_next_call() -> None:
    from servers import free_port

    model = OpenAIModel(base_url=f"http://127.0.0.1:{free_port()}/v1", tools=False)
    gate = await model.gate()
    assert gate.limit is None and model.capacity is None
    assert await model.gate() is not gate  # nothing settled


@pytest.mark.parametrize("bad", [0, -1, "four", True, 2.5])
def test_a_bad_max_in_flight_names_the_fix(bad: object) -> None:
    with pytest.raises(UserError, match="max_in_flight"):
        OpenAIModel(max_in_flight=bad)  # type: ignore[arg-type]


async def _conversation(model: OpenAIModel, who: str, turns: int) -> None:
    messages = [Message(role="system", content="You are terse."),
                Message(role="user", content=f"task {who}")]
    for _ in range(turns):
        c = await model.complete(messages, params=PARAMS)
        messages = [*messages, c.message, Message(role="user", content="go on")]
        await asyncio.sleep(0.02)  # the episode's environment step


@pytest.mark.parametrize(("hold_s", "expected"), [(0.0, "ABABAB"), (0.5, "AAABBB")])
async def test_a_held_place_keeps_a_one_slot_server_on_one_conversation(
        hold_s: float, expected: str) -> None:
    """One slot: without a hold the two episodes' calls alternate (each evicting the other's
    prompt from a server that keeps one); with it one conversation finishes its turns
    before the other starts."""
    server = SlotServer(slots=1, delay_s=0.05)
    try:
        model = OpenAIModel(base_url=server.url, tools=False, prefix_hold_s=hold_s)
        first = asyncio.create_task(_conversation(model, "A", 3))
        await asyncio.sleep(0.01)  # A asks first
        await asyncio.gather(first, _conversation(model, "B", 3))
        order = "".join(b["messages"][1]["content"][-1] for b in server.bodies)
        assert order == expected
        assert server.peak == 1
        assert (await model.gate()).resumed == (4 if hold_s else 0)
        await model.aclose()
    finally:
        server.close()


async def test_holds_shrink_to_the_time_conversations_take_to_come_back() -> None:
    """The hold after an episode's last call is never taken up. Once the gate has seen how
    soon conversations come back (a 0.02 s environment step here, four times: A's returns,
    each under the full hold) it holds a few times that, not the 2 s asked, so B gets the
    place soon after A's last call."""
    server = SlotServer(slots=1, delay_s=0.02)
    try:
        model = OpenAIModel(base_url=server.url, tools=False, prefix_hold_s=2.0)
        first = asyncio.create_task(_conversation(model, "A", 5))
        await asyncio.sleep(0.01)  # A asks first
        await asyncio.gather(first, _conversation(model, "B", 5))
        order = "".join(b["messages"][1]["content"][-1] for b in server.bodies)
        assert order == "AAAAABBBBB"
        gate = await model.gate()
        assert gate.resumed >= 4  # A's, at least
        assert HOLD_FLOOR_S <= gate.hold_for() < 0.5
        await model.aclose()
    finally:
        server.close()


async def test_holds_nobody_takes_up_stop() -> None:
    """One-call conversations (a judge's) never come back for a held place: after the trial
    holds the gate stops holding, and the calls no longer wait out a hold each."""
    server = SlotServer(slots=1, delay_s=0.01)
    try:
        model = OpenAIModel(base_url=server.url, tools=False, prefix_hold_s=0.2)

        async def one(i: int) -> None:
            await model.complete([Message(role="user", content=f"judge {i}")], params=PARAMS)

        await asyncio.gather(*(one(i) for i in range(20)))
        gate = await model.gate()
        assert (gate.holds, gate.resumed) == (TRIAL_HOLDS, 0)
        assert len(server.bodies) == 20
        await model.aclose()
    finally:
        server.close()


def test_what_is_registered_while_playing_runs_once_when_the_agent_is_done() -> None:
    """Registered under a key once (the first kept), run when the block ends — also when it
    raises; outside a block nothing is registered."""
    ran: list[str] = []
    assert not at_episode_end("a", lambda: ran.append("outside"))
    with pytest.raises(RuntimeError), playing():
        assert at_episode_end("a", lambda: ran.append("a"))
        assert at_episode_end("a", lambda: ran.append("a again"))
        assert at_episode_end("b", lambda: ran.append("b"))
        assert ran == []
        raise RuntimeError("the agent failed")
    assert ran == ["a", "b"]
    assert not at_episode_end("c", lambda: ran.append("c"))


async def test_the_place_held_after_an_episodes_last_call_goes_on_when_its_agent_is_done(
) -> None:
    """A's last call's place is held for 30 s (too few returns seen to fit a shorter hold),
    yet B, waiting for it, gets it as soon as A's agent is done: the gate counts the hold
    as ended, not as one nobody took up."""
    server = SlotServer(slots=1, delay_s=0.02)
    try:
        model = OpenAIModel(base_url=server.url, tools=False, prefix_hold_s=30.0)

        async def episode(who: str) -> None:
            with playing():
                await _conversation(model, who, 2)

        first = asyncio.create_task(episode("A"))
        await asyncio.sleep(0.01)  # A asks first
        await asyncio.wait_for(asyncio.gather(first, episode("B")), timeout=10)
        order = "".join(b["messages"][1]["content"][-1] for b in server.bodies)
        assert order == "AABB"
        gate = await model.gate()
        assert (gate.holds, gate.resumed, gate.ended) == (4, 2, 2)
        assert gate.in_flight == 0
        await model.aclose()
    finally:
        server.close()


async def test_the_runner_gives_a_held_place_back_when_an_episode_ends(tmp_path: Path) -> None:
    """Through the real runner: two episodes on a one-slot endpoint with a 30 s hold, at
    concurrency 2 — the second episode's calls go out as soon as the first episode's agent is
    done, so the run ends in seconds, with every episode's last hold ended."""
    from sharpen.core.agent_spec import AgentSpec, Limits
    from sharpen.core.registry import REGISTRY, PluginRef
    from sharpen.envs.base import ENV
    from sharpen.runner.config import RunConfig
    from sharpen.runner.runner import Runner
    from sharpen.store import Store

    server = SlotServer(slots=1, delay_s=0.02)
    try:
        args = {"base_url": server.url, "tools": False, "prefix_hold_s": 30.0}
        model = OpenAIModel(**args)  # the run's model, kept to read its gate after the run
        env = PluginRef(name="sql")
        spec = AgentSpec(model=PluginRef(name="openai", args=args),
                         params={"temperature": 0.0, "max_tokens": 8}, limits=Limits(max_steps=2))
        config = RunConfig(env=env, agent=spec, concurrency=2,
                           tasks=REGISTRY.create(ENV, env).list_tasks("test")[:2])
        store = Store(f"sqlite:///{tmp_path / 'runs.db'}")
        runner = Runner(store, progress=False, model_factory=lambda _: model)
        summary = await asyncio.wait_for(runner.run(config), timeout=20)
        trajs = list(store.iter_trajectories(summary.run_id))
        assert len(trajs) == 2 and all(t.outcome.error_kind is None for t in trajs)
        gate = await model.gate()
        assert gate.peak == 1 and gate.ended == 2
        assert len(server.bodies) == sum(t.usage.calls for t in trajs) >= 3
    finally:
        server.close()
