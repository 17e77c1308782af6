"""Simulated parties that reply in a schema (issue 19, item 5).

The toolshop customer replies as ``REPLY_SCHEMA`` JSON when its model constrains decoding;
that path is replayed from ``tests/cassettes/sim_structured.jsonl``, recorded from the real
embedded SmolLM2 model with its grammar (``tests/record_sim_structured_cassette.py``), and,
marked slow, run on the embedded model itself. The negotiation opponent's JSON moves are an
option, off by default (``benchmarks/results/sim_parsing.md`` says why); their schema and
reading are checked here.
"""

from __future__ import annotations

import json

import pytest
from record_sim_structured_cassette import CASSETTE, FAILED, N_TASKS, customer_ref, said

from sharpen.agents.baselines import act
from sharpen.core.messages import Message
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.core.trajectory import Action, Trajectory
from sharpen.envs.negotiation import Deal, Episode, OpponentMove
from sharpen.envs.negotiation.opponents import ModelOpponent, move_schema, read_move
from sharpen.envs.toolshop import STOP, ToolshopEnv, ToolshopVerifier, check_reply
from sharpen.envs.toolshop.generator import shop_of
from sharpen.envs.toolshop.user import MAX_STRUCTURED_CHARS, REPLY_SCHEMA, SimulatedUser
from sharpen.models.replay import CassetteMissError
from sharpen.models.structured import StructuredOutputError, structured_output


def _deal() -> Deal:
    return Deal(item="a used road bike", list_price=400, role="buyer", buyer_value=420,
                seller_value=340, opening=450, max_price=1200, strategy="linear", beta=1.0,
                reciprocity=0.8, max_rounds=5, target_share=0.4)


def test_a_structured_reply_ends_the_conversation_by_its_done_field():
    done = check_reply("Thanks, that is all.", first=False, done=True)
    assert done.stop and done.error is None and done.text == "Thanks, that is all."
    assert check_reply("", first=False, done=True).stop  # nothing more to say is fine when done
    assert check_reply("", first=False).error == "empty reply"  # but not otherwise
    marker = check_reply(f"Bye. {STOP}", first=False, done=False)  # the prompt's marker counts too
    assert marker.stop and marker.error is None and marker.text == "Bye."
    early = check_reply("I need help.", first=True, done=True)
    assert early.error is not None and "before the conversation began" in early.error
    parrot = check_reply("Which order do you mean?", first=False, said="Which order do you mean?",
                         done=False)
    assert parrot.error is not None and "repeats the agent's message" in parrot.error


def test_the_reply_schema_bounds_the_message_and_needs_done():
    assert REPLY_SCHEMA.parse('{"message": "Hi", "done": false}') == {"message": "Hi", "done": False}
    for bad in ['{"message": "Hi"}', '{"message": "Hi", "done": "no"}', f"Hi {STOP}",
                json.dumps({"message": "x" * (MAX_STRUCTURED_CHARS + 1), "done": False})]:
        with pytest.raises(StructuredOutputError):
            REPLY_SCHEMA.parse(bad)


def test_an_opponent_move_schema_and_its_reading():
    deal = _deal()
    rs = move_schema(deal)
    assert read_move(rs.parse('{"move": "accept"}'), deal) == OpponentMove(kind="accept")
    assert read_move(rs.parse('{"move": "walk"}'), deal) == OpponentMove(kind="walk")
    assert read_move(rs.parse('{"move": "counter", "price": 445}'), deal) == OpponentMove(
        kind="counter", price=445)
    for bad in ['{"move": "counter"}', '{"move": "accept", "price": 3}', '{"move": "maybe"}',
                '{"move": "counter", "price": 44.5}']:
        with pytest.raises(StructuredOutputError):
            rs.parse(bad)
    # the grammar cannot bound an integer: the range is checked when the move is read
    assert "not a price from 0 to $1,200" in str(read_move({"move": "counter", "price": 5000}, deal))
    assert "not a price" in str(read_move({"move": "counter", "price": -1}, deal))


async def _converse(env: ToolshopEnv, verifier: ToolshopVerifier, task) -> list[dict]:
    """The customer's replies to the recording's agent lines; checks the verifier agrees."""
    traj = Trajectory(task=task, agent_hash="scripted")
    obs, _ = await env.reset(task)
    traj.messages = [Message(role="user", content=obs)]
    if not obs.startswith(FAILED):
        for message in said():
            action = Action(tool="respond", arguments={"message": message})
            await act(env, traj, json.dumps(action.model_dump()), action)
            if traj.steps[-1].terminated:
                break
    traj.outcome = await env.outcome()
    assert await verifier.score(traj) == traj.outcome
    return [s.info["user"] for s in traj.steps if "user" in s.info]


async def test_a_constraining_customer_replays_its_json_turns():
    assert CASSETTE.exists(), "record it: .venv/bin/python tests/record_sim_structured_cassette.py"
    ref = customer_ref("replay")
    assert structured_output(REGISTRY.create("model", PluginRef.model_validate(ref))) == "grammar"
    env = ToolshopEnv(difficulty="medium", user=ref)
    verifier = ToolshopVerifier(difficulty="medium", user=ref)
    replies = []
    for task in env.list_tasks("test", limit=N_TASKS):
        replies += await _converse(env, verifier, task)
    await env.close()
    assert replies and all(r["prompt"] == "toolshop-user/1" for r in replies)
    # the grammar leaves no format failure and bounds the message
    assert all(r["error"] is None and len(r["reply"]) <= MAX_STRUCTURED_CHARS for r in replies)
    recorded = [json.loads(json.loads(line)["completion"]["message"]["content"])
                for line in CASSETTE.open()]
    assert {r["reply"] for r in replies} <= {v["message"].strip() for v in recorded}


async def test_the_same_model_presented_as_unconstrained_asks_in_text():
    """The request differs by mode: replayed as ``validate``, the customer sends no schema,
    and the recording (made with one) has no answer for it."""
    ref = customer_ref("replay")
    ref["args"]["structured_output"] = "validate"
    env = ToolshopEnv(difficulty="medium", user=ref)
    task = env.list_tasks("test", limit=1)[0]
    with pytest.raises(CassetteMissError):
        await env.reset(task)
    await env.close()


@pytest.mark.slow
async def test_the_embedded_model_as_a_structured_customer():
    pytest.importorskip("llama_cpp")
    model = REGISTRY.create("model", PluginRef(name="local"))
    env = ToolshopEnv(difficulty="easy")
    for task in env.list_tasks("val", limit=2):
        user = SimulatedUser(model, shop_of(task).instruction, params={"max_tokens": 128,
                                                                       "temperature": 0.0})
        assert user.constrained
        for turn in [await user.start(), await user.reply("Which order do you mean?")]:
            assert turn.error is None or "no valid reply" not in turn.error, turn
            assert len(turn.text) <= MAX_STRUCTURED_CHARS
        assert all(REPLY_SCHEMA.parse(m.content or "") for m in user.messages[1:]
                   if m.role == "assistant")


@pytest.mark.slow
async def test_the_embedded_model_as_a_structured_opponent():
    pytest.importorskip("llama_cpp")
    model = REGISTRY.create("model", PluginRef(name="local"))
    deal = _deal()

    def offered() -> Episode:
        ep = Episode(deal)
        ep.agent_turn(Action(tool="offer", arguments={"price": 360}))
        return ep

    move = await ModelOpponent(model, deal, seed=1, structured=True).respond(deal, offered(), 360.0)
    assert move.kind in ("accept", "counter", "walk") and move.replies
    assert move_schema(deal).parse(move.replies[-1])
    text = await ModelOpponent(model, deal, seed=1).respond(deal, offered(), 360.0)
    assert text.replies and not text.replies[-1].lstrip().startswith("{")  # the default: text
