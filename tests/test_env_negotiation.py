"""The negotiation environment: generation, scripted opponents, rules, critic, baselines,
re-scoring, and agent vs agent on a cassette recorded from the embedded model
(benchmarks/cassettes/negotiation_local.jsonl; tests/record_negotiation_cassette.py records it).
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest
from conftest import run_agent
from record_negotiation_cassette import CASSETTE, N_TASKS, env_ref
from record_negotiation_cassette import tasks as cassette_tasks

from sharpen.core import PluginRef
from sharpen.core.errors import UserError
from sharpen.core.registry import REGISTRY
from sharpen.core.trajectory import Action
from sharpen.envs.base import Environment, Generator
from sharpen.envs.generation import SPLIT_SPAN
from sharpen.envs.negotiation import (
    Deal,
    Episode,
    NegotiationEnv,
    NegotiationTaskGenerator,
    NegotiationVerifier,
    OpponentMove,
    build_deal,
    deal_of,
    parse_price,
    parse_reply,
    reference_plan,
    resolve_knobs,
    scripted_comment,
    scripted_counter,
    simulate,
)

DIFFICULTIES = ("easy", "medium", "hard")


def _offer(price) -> Action:
    return Action(tool="offer", arguments={"price": price})


def _deal(**changes) -> Deal:
    base = Deal(item="a used road bike", list_price=400, role="buyer", buyer_value=420,
                seller_value=340, opening=450, max_price=1200, strategy="linear", beta=1.0,
                reciprocity=0.8, max_rounds=5, target_share=0.4)
    return Deal(**{**base.__dict__, **changes})


async def _run(tmp_path: Path, agent: str, env: PluginRef, tasks, name: str = ""):
    label = name or env.args.get("difficulty")
    return await run_agent(tmp_path / f"{agent}-{label}.db", env, agent, tasks)


def test_protocols_and_registry():
    env = REGISTRY.create("env", PluginRef(name="negotiation", args={"difficulty": "hard"}))
    assert isinstance(env, Environment) and isinstance(env.generator, Generator)
    assert isinstance(REGISTRY.create("verifier", "negotiation"), NegotiationVerifier)
    info = env.describe()
    assert info.name == "negotiation" and info.difficulties == list(DIFFICULTIES)
    assert {k.name for k in info.knobs} == {"zopa_width", "strategy", "max_rounds",
                                            "target_share", "role"}
    assert info.tools == ["offer", "accept", "walk_away"]
    assert env.tools[0].text_argument == "price" and "number" in env.tools[0].text_hint


def test_bad_args_are_user_errors():
    for knobs in ({"zopa_width": 0.9}, {"strategy": "greedy"}, {"max_rounds": 1}, {"colour": 1}):
        with pytest.raises(UserError):
            NegotiationEnv(knobs=knobs)
    for args in ({"difficulty": "extreme"}, {"opponent": "gpt"}, {"critic": 3},
                 {"opponent": {"args": {}}}):
        with pytest.raises(UserError):
            NegotiationEnv(**args)


def test_same_seed_same_deal_whatever_the_interleaving():
    gen = NegotiationTaskGenerator()
    knobs = resolve_knobs(difficulty="medium")
    a = [gen.sample(knobs, i, "val") for i in range(12)]
    deals_a = [deal_of(t) for t in a]
    build_deal(123, resolve_knobs(difficulty="hard"))  # interleave other generation
    b = [gen.sample(knobs, i, "val") for i in reversed(range(12))][::-1]
    deals_b = [gen.materialize(t) for t in reversed(b)][::-1]
    assert a == b and deals_a == deals_b
    assert repr(deals_a[3]) == repr(build_deal(a[3].seed, knobs))
    assert len({d.strategy for d in deals_a}) > 1 and len({d.role for d in deals_a}) == 2


def test_splits_have_disjoint_seeds_and_50_solvable_tasks_each():
    for difficulty in DIFFICULTIES:
        env = NegotiationEnv(difficulty=difficulty)
        seeds = {}
        for split in ("train", "val", "test"):
            tasks = env.list_tasks(split, limit=50, seed=0)
            assert len({t.id for t in tasks}) == 50
            assert all(t.split == split and t.metadata["difficulty"] == difficulty for t in tasks)
            assert all(env.generator.is_solvable(t) for t in tasks)
            for deal in map(deal_of, tasks):
                assert deal.width > 0 and 0 <= deal.opening <= deal.max_price
                assert deal.share(deal.opening) < 0  # taking the opening loses money
            seeds[split] = {t.seed // SPLIT_SPAN for t in tasks}
        assert seeds == {"train": {0}, "val": {1}, "test": {2}}
        assert env.list_tasks("test", limit=5, seed=0) == env.list_tasks("test", limit=50)[:5]


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
async def test_reference_succeeds_null_fails_and_verifier_agrees(tmp_path: Path, difficulty):
    env = PluginRef(name="negotiation", args={"difficulty": difficulty})
    tasks = NegotiationEnv(difficulty=difficulty).list_tasks("test", limit=50)
    ref = await _run(tmp_path, "reference", env, tasks)
    null = await _run(tmp_path, "null", env, tasks)
    assert len(ref) == len(null) == 50
    assert sum(t.outcome.success for t in ref) >= 0.95 * 50
    assert sum(t.outcome.success for t in null) <= 0.02 * 50
    assert all(t.outcome.error_kind is None for t in ref + null)
    assert all(t.invalid_actions == 1 and len(t.steps) == 1 for t in null)
    assert all(t.outcome.components["deal"] == 0 and t.outcome.reward == 0 for t in null)
    for t in ref:  # deal rate and price are outcome components
        c, deal = t.outcome.components, deal_of(t.task)
        assert c["deal"] == 1 and c["price"] == t.steps[-1].action.arguments["price"]
        assert c["agent_surplus"] + c["opponent_surplus"] == pytest.approx(deal.width)
        assert c["share_of_zopa"] == pytest.approx(c["agent_surplus"] / c["zopa_width"], abs=1e-5)
        assert c["share_of_zopa"] >= deal.target_share and c["rounds"] == len(t.steps)
        assert t.outcome.reward == pytest.approx(c["share_of_zopa"])
    verifier = REGISTRY.create("verifier", env)
    for t in ref[:10] + null[:5]:
        assert await verifier.score(t) == t.outcome


def test_time_dependent_opponents_concede_by_their_clock():
    early = {}
    for strategy, beta in (("boulware", 0.2), ("linear", 1.0), ("conceder", 4.0)):
        deal = _deal(strategy=strategy, beta=beta, max_rounds=6)
        ep = simulate(deal, [300.0] * 6)  # an offer below the seller's limit: never accepted
        asks = ep.opponent_offers
        assert asks[0] == deal.opening and asks[-1] == deal.seller_value and ep.end == "deadline"
        assert all(a >= b for a, b in pairwise(asks))
        early[strategy] = deal.opening - asks[1]
    assert early["boulware"] < early["linear"] < early["conceder"]


def test_tit_for_tat_mirrors_concessions_and_keeps_its_limit():
    deal = _deal(strategy="tit_for_tat", reciprocity=0.5, max_rounds=6)
    stubborn = simulate(deal, [300.0] * 6)
    first = deal.opening - 0.1 * (deal.opening - deal.seller_value)
    assert stubborn.opponent_offers[1:] == [first] * 6  # the first step, then nothing
    moving = simulate(deal, [300.0, 320.0])
    assert moving.opponent_offers[-1] == pytest.approx(first - 0.5 * 20)
    ep = Episode(deal)
    ep.agent_offers = [100.0]
    assert scripted_counter(deal, ep, 900.0) == deal.seller_value  # never past its limit


async def test_invalid_offers_get_precise_feedback_and_use_turns():
    env = NegotiationEnv(knobs={"max_rounds": 12})
    task = env.list_tasks("test", limit=1)[0]
    deal = deal_of(task)
    await env.reset(task)
    cases = [
        (_offer("about 450"), "must be a number like 450"),
        (_offer(""), "`price` is empty"),
        (_offer(True), "must be a number"),
        (_offer(-5), "is negative"),
        (_offer(deal.max_price + 1), "outside the allowed range"),
        (_offer("accept"), '"tool": "accept"'),
        (Action(tool="offer", arguments={"amount": 3}), "needs the argument `price`"),
        (Action(tool="haggle", arguments={}), "Unknown tool 'haggle'"),
    ]
    for i, (action, text) in enumerate(cases, 1):
        r = await env.step(action)
        assert text in r.observation and r.info["invalid"] and r.reward == 0
        assert r.info["turns"] == i and "opponent" not in r.info
    out = await env.outcome()
    assert out.components["deal"] == 0 and out.components["rounds"] == len(cases)
    r = await env.step(_offer(f" `${deal.max_price:,}`. "))
    assert not r.info.get("invalid") and r.info["offer"] == deal.max_price


def test_prices_are_read_from_numbers_and_number_strings():
    assert [parse_price(x) for x in (450, 450.555, "$1,200.50", "450 dollars", " `300`. ")] == [
        450.0, 450.56, 1200.5, 450.0, 300.0]
    assert [parse_price(x) for x in ("4 5 0", "450-500", "nan", float("inf"), -1, None, True)] == [
        None] * 7


async def test_accepting_the_opening_or_walking_away_fails():
    env = NegotiationEnv(difficulty="medium")
    for task in env.list_tasks("val", limit=5):
        await env.reset(task)
        r = await env.step(Action(tool="accept"))
        out = await env.outcome()
        assert r.terminated and out.components["deal"] == 1
        assert out.components["price"] == deal_of(task).opening and out.components["agent_surplus"] < 0
        assert not out.success and out.reward < 0
        await env.reset(task)
        r = await env.step(Action(tool="walk_away"))
        out = await env.outcome()
        assert r.terminated and not out.success and out.components["deal"] == 0
        late = await env.step(_offer(100))
        assert late.info["invalid"] and "over" in late.observation


async def test_the_deadline_ends_without_a_deal():
    env = NegotiationEnv(knobs={"max_rounds": 3, "role": "buyer"})
    task = env.list_tasks("test", limit=1)[0]
    await env.reset(task)
    results = [await env.step(_offer(1)) for _ in range(3)]
    assert [r.truncated for r in results] == [False, False, True]
    assert "No turns left" in results[-1].observation
    out = await env.outcome()
    assert not out.success and out.components == {**out.components, "deal": 0.0, "rounds": 3.0}


def test_scripted_critic_comments_on_the_last_offer():
    deal = _deal()  # the agent buys; its value is 420
    ep = simulate(deal, [300.0, 360.0])
    assert scripted_comment(deal, ep) == ("You conceded $60 in one move: 50% of the margin you "
                                          "had left before your value of $420.")
    assert "opened at $300" in scripted_comment(deal, simulate(deal, [300.0]))
    assert "loses you money" in scripted_comment(deal, simulate(deal, [300.0, 430.0]))
    assert "moved $20 away" in scripted_comment(deal, simulate(deal, [300.0, 280.0]))


async def test_critic_feedback_is_shown_and_recorded_with_source_critic(tmp_path: Path):
    env = PluginRef(name="negotiation", args={"difficulty": "hard", "critic": "scripted"})
    tasks = NegotiationEnv(difficulty="hard").list_tasks("val", limit=10)
    trajs = await _run(tmp_path, "reference", env, tasks, name="critic")
    multi = [t for t in trajs if len(t.steps) > 1]
    assert multi and all(t.outcome.success for t in trajs)
    for t in multi:
        critiques = [fb for fb in t.feedback if fb.source == "critic"]
        # one comment between rounds: after every offer but the last (the accepted one)
        assert [fb.target.step_index for fb in critiques] == list(range(len(t.steps) - 1))
        for fb in critiques:
            assert fb.name == "critique" and fb.author == "critic:scripted"
            assert fb.target.trajectory_id == t.id and fb.target.kind == "step"
            assert f"Critic: {fb.value}" in t.steps[fb.target.step_index].observation
    plain = await _run(tmp_path, "reference", PluginRef(name="negotiation",
                                                         args={"difficulty": "hard"}), tasks)
    assert not any(fb.source == "critic" for t in plain for fb in t.feedback)
    assert [t.outcome for t in plain] == [t.outcome for t in trajs]  # advice changes no verdict


async def test_verifier_recomputes_a_scripted_opponent_and_ignores_tampered_records(tmp_path: Path):
    env = PluginRef(name="negotiation", args={"difficulty": "medium"})
    tasks = NegotiationEnv(difficulty="medium").list_tasks("train", limit=10)
    ref = await _run(tmp_path, "reference", env, tasks)
    t = next(t for t in ref if len(t.steps) > 1)
    steps = [s.model_copy(update={"info": {**s.info, "opponent": {"kind": "walk"}}}) for s in t.steps]
    tampered = t.model_copy(update={"steps": steps})
    assert await NegotiationVerifier(difficulty="medium").score(tampered) == t.outcome
    assert (await NegotiationVerifier(opponent={"name": "local"}).score(tampered)).components[
        "deal"] == 0  # a model opponent's game is replayed from the record


def test_model_opponent_replies_are_read_leniently():
    deal = _deal()
    assert parse_reply("ACCEPT", deal).kind == "accept"
    assert parse_reply("  walk away.", deal).kind == "walk"
    assert parse_reply("I can't do $400, how about $445?", deal) == OpponentMove(kind="counter",
                                                                                 price=445)
    assert parse_reply("Fine, it's a deal!", deal).kind == "accept"
    assert parse_reply("No deal, sorry.", deal).kind == "walk"
    assert isinstance(parse_reply("Hmm, let me think about it.", deal), str)
    assert isinstance(parse_reply("I want 99999", deal), str)  # above max_price


def test_an_opponent_error_is_an_env_error():
    deal = _deal()
    ep = Episode(deal)
    ep.agent_turn(_offer(380))
    ep.opponent_turn(OpponentMove(kind="error", error="no usable reply twice"))
    out = ep.outcome()
    assert ep.done and out.error_kind == "env" and not out.counts and not out.success


async def test_agent_vs_model_opponent_replays_from_a_real_model_cassette(tmp_path: Path):
    assert CASSETTE.exists(), "record it: .venv/bin/python tests/record_negotiation_cassette.py"
    env = env_ref("replay")
    trajs = await _run(tmp_path, "reference", env, cassette_tasks(), name="model")
    assert len(trajs) == N_TASKS and all(t.outcome.error_kind is None for t in trajs)
    offers = [s for t in trajs for s in t.steps if "offer" in s.info]
    assert offers and all(s.info["opponent"]["replies"] for s in offers)
    assert any(t.outcome.components["deal"] for t in trajs)
    critiques = [fb for t in trajs for fb in t.feedback if fb.source == "critic"]
    assert critiques and all(fb.author.startswith("critic:local/") for fb in critiques)
    verifier = REGISTRY.create("verifier", env)
    for t in trajs:
        assert await verifier.score(t) == t.outcome
    # an unusable answer recorded for the first offer ends the replayed game as an env error
    t = trajs[0]
    first = t.steps[0].model_copy(update={"info": {**t.steps[0].info, "opponent": {
        "kind": "error", "error": "no usable reply twice"}}})
    broken = await verifier.score(t.model_copy(update={"steps": [first, *t.steps[1:]]}))
    assert broken.error_kind == "env" and broken.error == "no usable reply twice"


async def test_a_fenced_price_or_json_reply_is_an_action():
    from sharpen.agents.text_protocol import parse_text_action

    env = NegotiationEnv(knobs={"role": "buyer"})
    task = env.list_tasks("test", limit=1)[0]
    await env.reset(task)
    r = await env.step(parse_text_action("My offer:\n```\n1\n```", env.tools))
    assert not r.info.get("invalid") and r.info["offer"] == 1.0
    r = await env.step(parse_text_action('{"tool": "accept", "arguments": {}}', env.tools))
    assert r.terminated and (await env.outcome()).components["deal"] == 1


@pytest.mark.slow
async def test_the_embedded_model_plays_the_opponent(tmp_path: Path):
    pytest.importorskip("llama_cpp")
    env = PluginRef(name="negotiation", args={"difficulty": "easy", "opponent": {"name": "local"}})
    tasks = NegotiationEnv(difficulty="easy").list_tasks("val", limit=2)
    trajs = await _run(tmp_path, "reference", env, tasks, name="local")
    assert all(s.info["opponent"]["replies"] for t in trajs for s in t.steps)
    for t in trajs:
        assert await REGISTRY.create("verifier", env).score(t) == t.outcome


def test_reference_plan_is_a_success_for_every_listed_task():
    for difficulty in DIFFICULTIES:
        for task in NegotiationEnv(difficulty=difficulty).list_tasks("train", limit=20):
            deal = deal_of(task)
            ep = simulate(deal, list(reference_plan(deal)))
            assert ep.succeeded and ep.turns == len(reference_plan(deal))
