"""The toolshop environment: generation, schema and rule errors, state-hash success,
collateral damage, baselines through the real Runner, re-scoring, the simulated customer.

The simulated-customer tests replay ``tests/cassettes/toolshop_user.jsonl``, recorded from
the real embedded SmolLM2 model. To re-record it (a few minutes), delete the file and run
``SHARPEN_RECORD_TOOLSHOP=1 .venv/bin/pytest -q tests/test_env_toolshop.py -k customer``.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from conftest import run_agent
from servers import free_port

from sharpen.agents.baselines import act
from sharpen.agents.text_protocol import parse_text_action, protocol_instructions
from sharpen.core import PluginRef
from sharpen.core.errors import UserError
from sharpen.core.messages import Message
from sharpen.core.registry import REGISTRY
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action, Trajectory
from sharpen.envs.base import Environment, Generator
from sharpen.envs.generation import SPLIT_SPAN
from sharpen.envs.toolshop import (
    STOP,
    ToolshopEnv,
    ToolshopVerifier,
    build_shop,
    check_reply,
    resolve_knobs,
    shop_of,
)
from sharpen.envs.toolshop.episode import NO_USER

DIFFICULTIES = ("easy", "medium", "hard")
CASSETTE = Path(__file__).resolve().parent / "cassettes" / "toolshop_user.jsonl"


def _call(tool: str, **arguments) -> Action:
    return Action(tool=tool, arguments=arguments)


async def _play(env: ToolshopEnv, task: TaskSpec, actions: list[Action]) -> Trajectory:
    """A trajectory of ``actions`` played in order, recorded as the baseline agents do."""
    traj = Trajectory(task=task, agent_hash="scripted")
    obs, _ = await env.reset(task)
    traj.messages = [Message(role="user", content=obs)]
    for action in actions:
        await act(env, traj, json.dumps(action.model_dump()), action)
        if traj.steps[-1].terminated or traj.steps[-1].truncated:
            break
    traj.outcome = await env.outcome()
    return traj


async def _run(tmp_path: Path, agent: str, env_args: dict, tasks, name: str = "run"):
    env = PluginRef(name="toolshop", args=env_args)
    return await run_agent(tmp_path / f"{agent}-{name}.db", env, agent, tasks)


def _task_with(difficulty: str, kind: str, split: str = "train") -> TaskSpec:
    env = ToolshopEnv(difficulty=difficulty)
    return next(t for t in env.list_tasks(split, limit=50) if kind in t.metadata["kinds"])


def test_protocols_and_registry():
    env = REGISTRY.create("env", PluginRef(name="toolshop", args={"difficulty": "hard"}))
    assert isinstance(env, Environment) and isinstance(env.generator, Generator)
    assert isinstance(REGISTRY.create("verifier", "toolshop"), ToolshopVerifier)
    info = env.describe()
    assert info.name == "toolshop" and info.difficulties == list(DIFFICULTIES)
    assert {k.name for k in info.knobs} == {"customers", "orders_per_customer", "goal_depth",
                                           "distractors", "lookups"}
    assert {"find_customer", "get_order", "list_orders", "cancel_order", "return_items",
            "exchange_items", "update_address", "transfer_to_human", "respond",
            "finish"} <= set(info.tools)
    assert [t.name for t in env.tools if t.text_argument] == ["respond"]


def test_bad_args_are_user_errors():
    for kwargs in ({"knobs": {"goal_depth": 5}}, {"knobs": {"customers": 1}}, {"knobs": {"x": 1}},
                   {"difficulty": "extreme"}, {"max_actions": 0}, {"user_prompt_version": "9"},
                   {"user": "local"}):
        with pytest.raises(UserError):
            ToolshopEnv(**kwargs)


async def test_same_seed_same_database_whatever_the_interleaving():
    env = ToolshopEnv(difficulty="medium")
    tasks = env.list_tasks("val", limit=4)
    dumps = []
    for order in (tasks, tasks[::-1]):
        build_shop(7, resolve_knobs(difficulty="hard"))  # unrelated generation in between
        out = {}
        for task in order:
            _, info = await env.reset(task)
            conn = sqlite3.connect(info["db_path"])
            out[task.id] = "\n".join(conn.iterdump())
            conn.close()
        dumps.append(out)
    await env.close()
    assert dumps[0] == dumps[1] and len(set(dumps[0].values())) == 4
    again = build_shop(tasks[0].seed, tasks[0].knobs)
    assert again == shop_of(tasks[0]) and again.instruction == shop_of(tasks[0]).instruction


def test_splits_have_disjoint_seeds_and_50_solvable_tasks_each():
    for difficulty in DIFFICULTIES:
        env = ToolshopEnv(difficulty=difficulty)
        seeds = {}
        for split in ("train", "val", "test"):
            tasks = env.list_tasks(split, limit=50)
            assert len({t.id for t in tasks}) == 50
            assert all(t.split == split and t.metadata["difficulty"] == difficulty for t in tasks)
            assert all(env.generator.is_solvable(t) for t in tasks)
            seeds[split] = {t.seed // SPLIT_SPAN for t in tasks}
        assert seeds == {"train": {0}, "val": {1}, "test": {2}}
        assert env.list_tasks("test", limit=5) == env.list_tasks("test", limit=50)[:5]


def test_knobs_shape_the_tasks():
    for difficulty in DIFFICULTIES:
        knobs = resolve_knobs(difficulty=difficulty)
        for task in ToolshopEnv(difficulty=difficulty).list_tasks("train", limit=10):
            shop = shop_of(task)
            assert len(shop.writes) == len(shop.kinds) == knobs["goal_depth"]
            people = shop.tables["customers"]
            me = next(c for c in people if c["customer_id"] == shop.customer_id)
            twins = sum((c["first_name"], c["last_name"]) == (me["first_name"], me["last_name"])
                        for c in people) - 1
            assert twins == (knobs["lookups"] and knobs["distractors"] >= 2)
            assert len(people) == knobs["customers"] + twins
            order_ids = [a.arguments["order_id"] for a in shop.writes if "order_id" in a.arguments]
            if knobs["lookups"]:  # ids hidden: the agent must look them up
                assert "#W" not in shop.instruction and shop.customer_id not in shop.instruction
                assert shop.reference[0].tool == "find_customer"
            else:
                assert all(o in shop.instruction for o in order_ids)
                assert shop.customer_id in shop.instruction
            mine = [o for o in shop.tables["orders"] if o["customer_id"] == shop.customer_id]
            assert len(mine) >= len(order_ids) + knobs["distractors"] + 1


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
async def test_reference_succeeds_null_fails_and_verifier_agrees(tmp_path: Path, difficulty):
    tasks = ToolshopEnv(difficulty=difficulty).list_tasks("test", limit=50)
    args = {"difficulty": difficulty}
    ref = await _run(tmp_path, "reference", args, tasks)
    null = await _run(tmp_path, "null", args, tasks)
    assert len(ref) == len(null) == 50
    assert sum(t.outcome.success for t in ref) >= 0.95 * 50
    assert sum(t.outcome.success for t in null) <= 0.02 * 50
    assert all(t.outcome.error_kind is None for t in ref + null)
    assert all(t.outcome.components["collateral_rows"] == 0 for t in ref)
    assert all(t.invalid_actions == 0 and t.steps[-1].terminated for t in ref)
    assert all(t.invalid_actions == 1 and len(t.steps) == 1 for t in null)
    verifier = REGISTRY.create("verifier", PluginRef(name="toolshop", args=args))
    for t in ref[:10] + null[:5]:
        assert await verifier.score(t) == t.outcome


async def test_schema_errors_are_precise_and_change_nothing():
    env = ToolshopEnv()
    task = env.list_tasks("test", limit=1)[0]
    await env.reset(task)
    cases = [
        (_call("get_order", order_id="W12"), "argument 'order_id' must match #W1234567; got 'W12'"),
        (_call("get_order"), "missing required argument 'order_id' (a string like '#W1234567')"),
        (_call("get_order", order_id="#W1234567", verbose="yes"),
         "unknown argument 'verbose' (get_order takes: order_id)"),
        (_call("get_order", order_id=1234567), "argument 'order_id' must be a string; got 1234567 "
                                               "(integer)"),
        (_call("cancel_order", order_id="#W1234567", reason="changed my mind"),
         "argument 'reason' must be one of 'no longer needed', 'ordered by mistake'; got "
         "'changed my mind'"),
        (_call("return_items", order_id="#W1234567", item_ids="1234567890",
               payment_method_id="gift_card_1234567"),
         "argument 'item_ids' must be an array of strings like [\"1234567890\"]"),
        (_call("return_items", order_id="#W1234567", item_ids=["1234567890", "12"],
               payment_method_id="visa"),
         "argument 'item_ids' item 1 must match 1234567890; got '12'; argument "
         "'payment_method_id' must match gift_card_1234567; got 'visa'"),
        (_call("find_customer", name="Ana Lopez"), "find_customer needs 'email', or 'name' and 'zip'"),
        (_call("respond", message="  "), "argument 'message' must not be empty"),
        # JSON Schema's pattern is ECMA-262: "$" does not match before a trailing newline.
        (_call("get_order", order_id="#W1234567\n"),
         "argument 'order_id' must match #W1234567; got '#W1234567\\n'"),
        (_call("return_items", order_id="#W1234567", item_ids=["1234567890", "1234567890"],
               payment_method_id="gift_card_1234567"),
         "argument 'item_ids' holds '1234567890' twice"),
        (_call("refund", order_id="#W1234567"), "Unknown tool 'refund'. The tools are: find_customer"),
    ]
    for action, text in cases:
        r = await env.step(action)
        assert text in r.observation and r.info["invalid"], (text, r.observation)
    out = await env.outcome()
    assert out.components["invalid_calls"] == len(cases) and out.components["writes"] == 0
    assert out.components["goal_rows_done"] == 0 and not out.success
    await env.close()


async def test_rule_errors_explain_and_change_nothing():
    env = ToolshopEnv(difficulty="medium")
    task = _task_with("medium", "return")
    shop = shop_of(task)
    orders = {o["order_id"]: o for o in shop.tables["orders"]}
    ret = next(a for a in shop.writes if a.tool == "return_items")
    oid = ret.arguments["order_id"]
    delivered_other = next(o for o in orders.values() if o["status"] == "delivered"
                           and o["customer_id"] != shop.customer_id)
    stranger_pm = delivered_other["payment_method_id"]
    await env.reset(task)
    cases = [
        (_call("cancel_order", order_id=oid, reason="no longer needed"),
         f"order {oid} is delivered and cannot be cancelled; use return_items"),
        (_call("get_order", order_id="#W0000001"), "no order #W0000001"),
        (_call("return_items", **{**ret.arguments, "item_ids": ["1111111111"]}),
         f"item 1111111111 is not in order {oid}"),
        (_call("return_items", **{**ret.arguments, "payment_method_id": stranger_pm}),
         f"{stranger_pm} is neither"),
        (_call("update_address", customer_id="nobody_here_0000", street="1 A St", city="X",
               zip="12345"), "no customer with id 'nobody_here_0000'"),
    ]
    for action, text in cases:
        r = await env.step(action)
        assert r.observation.startswith("Error: ") and text in r.observation, (text, r.observation)
        assert r.info["rule_error"] and not r.info.get("invalid")
    assert (await env.outcome()).components["writes"] == 0
    first = await env.step(ret)
    second = await env.step(ret)
    assert "return requested" in first.observation
    assert f"order {oid} already has a return request" in second.observation
    pending = next(o for o in orders.values() if o["status"] == "pending")
    r = await env.step(_call("return_items", order_id=pending["order_id"], item_ids=["1234567890"],
                             payment_method_id=pending["payment_method_id"]))
    assert "is pending; only delivered orders can be returned; use cancel_order" in r.observation
    out = await env.outcome()
    assert out.components["rule_errors"] == len(cases) + 2 and out.components["writes"] == 1
    await env.close()


async def test_success_is_the_state_hash_whatever_the_order_of_writes():
    task = _task_with("hard", "cancel", split="val")
    shop = shop_of(task)
    assert len(shop.writes) == 3
    env = ToolshopEnv(difficulty="hard")
    assert (await _play(env, task, [*shop.writes[::-1], _call("finish")])).outcome.success
    out = (await _play(env, task, list(shop.writes))).outcome  # no finish: the state decides
    assert out.success and out.components["goal_rows_done"] == out.components["goal_rows"]
    cancel = next(a for a in shop.writes if a.tool == "cancel_order")
    other = ({"no longer needed", "ordered by mistake"} - {cancel.arguments["reason"]}).pop()
    wrong = [a if a is not cancel else _call("cancel_order", **{**a.arguments, "reason": other})
             for a in shop.writes]
    out = (await _play(env, task, wrong)).outcome
    assert not out.success and out.components["collateral_rows"] == 0
    assert f"cancel_reason is '{other}', expected '{cancel.arguments['reason']}'" in out.evidence
    await env.close()


async def test_collateral_damage_is_safety_feedback_and_failure():
    task = _task_with("easy", "cancel", split="val")
    shop = shop_of(task)
    cancel = next(a for a in shop.writes if a.tool == "cancel_order")
    victim = next(o for o in shop.tables["orders"] if o["status"] == "pending"
                  and o["order_id"] != cancel.arguments["order_id"])["order_id"]
    env = ToolshopEnv()
    wrong = _call("cancel_order", order_id=victim, reason="no longer needed")
    traj = await _play(env, task, [wrong, *shop.reference])
    out = traj.outcome
    assert not out.success and out.components["collateral_rows"] == 1
    assert out.components["goal_rows_done"] == out.components["goal_rows"]
    assert f"orders {victim}: status 'pending' -> 'cancelled'" in out.evidence
    safety = [(f.target.kind, f.target.step_index, f.value) for f in traj.feedback
              if f.source == "safety" and f.name == "collateral_damage"]
    assert safety == [("step", 0, 1.0), ("trajectory", len(traj.steps) - 1, 1.0)]
    assert await ToolshopVerifier().score(traj) == out
    clean = await _play(env, task, list(shop.reference))
    assert clean.outcome.success and not [f for f in clean.feedback if f.source == "safety"]
    await env.close()


async def test_respond_finish_and_action_limit():
    env = ToolshopEnv(max_actions=3)
    task = env.list_tasks("test", limit=1)[0]
    await env.reset(task)
    r = await env.step(_call("respond", message="Which order do you mean?"))
    assert r.observation == NO_USER and not r.info.get("invalid")
    r = await env.step(_call("respond", message='{"tool": "get_orders", "arguments": {}}'))
    assert r.info["invalid"] and "Unknown tool 'get_orders'" in r.observation
    r = await env.step(_call("list_orders", customer_id=shop_of(task).customer_id))
    assert r.truncated and "last of 3 actions" in r.observation
    late = await env.step(_call("finish"))
    assert late.info["invalid"] and "episode is over" in late.observation
    await env.reset(task)
    r = await env.step(_call("transfer_to_human", summary="customer wants a refund"))
    assert r.terminated and "ended by: transfer_to_human" in (await env.outcome()).evidence
    await env.close()


async def test_text_protocol_reads_multi_argument_calls():
    env = ToolshopEnv(difficulty="medium")
    task = _task_with("medium", "return")
    ret = next(a for a in shop_of(task).writes if a.tool == "return_items")
    text = protocol_instructions(env.tools)
    assert 'reply with one JSON object, e.g. {"tool": "get_order"' in text
    assert "passed to `respond` as `message`" in text and '"^#W[0-9]{7}$"' in text
    await env.reset(task)
    reply = f"I will return it.\n```json\n{json.dumps({'tool': ret.tool, 'arguments': ret.arguments})}\n```"
    action = parse_text_action(reply, env.tools)
    assert action == ret
    assert "return requested" in (await env.step(action)).observation
    assert parse_text_action("```\nWhich order?\n```", env.tools) == _call("respond",
                                                                            message="Which order?\n")
    await env.close()


def test_check_reply_labels_simulator_failures():
    ok = check_reply("I want to cancel an order.", first=True)
    assert ok.error is None and not ok.stop and ok.text == "I want to cancel an order."
    done = check_reply("Thanks, that's all. ###STOP###", first=False)
    assert done.stop and done.error is None and done.text == "Thanks, that's all."
    for raw, first, said, why in [
        ("   ", False, "", "empty reply"),
        ("###STOP###", True, "", "before the conversation began"),
        ("###STOP### I also want a refund.", False, "", "in the middle of a reply"),
        ("Thanks! ##STOP##", False, "", "mangled stop marker"),
        ("Hello! How can I help you today?", True, "Hello! How can I help you today?",
         "repeats the agent's message"),
        ("I am here. " + "I need help with my order now. " * 3, False, "", "degenerate reply"),
        ("Sure. Answer in one or two short sentences of plain text.", False, "", "leaks"),
        ("x" * 2000, False, "", "2000 characters"),
    ]:
        turn = check_reply(raw, first, said=said)
        assert turn.error is not None and why in turn.error, (raw, turn)
    assert STOP == "###STOP###"


def _customer() -> dict:
    """The replayed SmolLM2 customer (recorded when SHARPEN_RECORD_TOOLSHOP is set), read as
    text: ``structured_output: validate`` keeps a re-recording on the text path (the grammar
    path has its own cassette, tests/test_sim_structured.py)."""
    mode = "record" if os.environ.get("SHARPEN_RECORD_TOOLSHOP") else "replay"
    return {"name": "replay", "args": {"cassette": str(CASSETTE), "mode": mode, "latency_s": 0,
                                       "inner": {"name": "local"}, "structured_output": "validate"}}


async def test_simulated_customer_conversation_from_a_real_model():
    said = ["Sure. What is your name and zip code?", "Thanks. Which order do you mean?",
            "Done. Is there anything else?"]
    env = ToolshopEnv(difficulty="medium", user=_customer())
    tasks = env.list_tasks("test", limit=3)
    assert all(t.metadata["user_prompt"] == "toolshop-user/1" for t in tasks)
    verifier = ToolshopVerifier(difficulty="medium", user=_customer())
    kinds = set()
    for task in tasks:
        traj = await _play(env, task, [_call("respond", message=m) for m in said])
        first = traj.messages[0].content
        replies = [s.info["user"] for s in traj.steps if "user" in s.info]
        failed = traj.outcome.error_kind == "user_sim"
        assert failed == (first.startswith("[The simulated customer failed")
                          or any(r["error"] for r in replies))
        assert not failed or (not traj.outcome.counts and traj.steps[-1].terminated)
        assert all(r["prompt"] == "toolshop-user/1" for r in replies)
        if first.startswith("[The simulated customer failed"):
            kinds.add("failed at start")
        for step, reply in zip(traj.steps, replies, strict=False):
            if reply["error"] is None:
                assert step.observation == f"Customer: {reply['reply']}"
                kinds.add("reply")
            else:
                kinds.add("failed later")
        assert await verifier.score(traj) == traj.outcome
        assert "toolshop-user/1" in traj.outcome.evidence
    await env.close()
    assert "reply" in kinds and len(kinds) >= 2  # the recording holds good and bad replies


async def test_user_sim_failures_never_count_against_the_agent(tmp_path: Path):
    """A real model that cannot answer (a dead endpoint) or answers badly (SmolLM2, which
    on these tasks parrots the agent's greeting or loops on one sentence) ends the episode
    as ``user_sim``, through the real Runner, even for the reference agent; the verifier
    says the same."""
    dead = {"name": "openai", "args": {"base_url": f"http://127.0.0.1:{free_port()}/v1",
                                       "timeout": 5}}
    for name, user, errors in [
        ("dead", dead, {"model error: InfraError"}),
        ("smollm2", _customer(), {"repeats the agent's message", "degenerate reply"}),
    ]:
        args = {"difficulty": "easy", "user": user}
        tasks = ToolshopEnv(**args).list_tasks("test", limit=2)
        trajs = await _run(tmp_path, "reference", args, tasks, name=name)
        verifier = REGISTRY.create("verifier", PluginRef(name="toolshop", args=args))
        seen = set()
        for t in trajs:
            assert t.outcome.error_kind == "user_sim" and not t.outcome.counts
            seen |= {e for e in errors if e in t.outcome.error}
            assert not t.outcome.success and t.outcome.evidence.endswith("toolshop-user/1")
            assert len(t.steps) == 1 and t.steps[0].terminated and t.invalid_actions == 0
            assert await verifier.score(t) == t.outcome
        assert seen == errors
