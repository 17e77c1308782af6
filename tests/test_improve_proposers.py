"""The ``evolve``, ``opro`` and ``best_of_n`` proposers (issue 5).

Proposals and engine runs replay tests/cassettes/improve_proposers.jsonl, recorded from the
embedded model by tests/record_improve_proposers_cassette.py (the scenarios live there, so a
replay makes exactly the recorded requests). Junk replies come from a real HTTP server on
loopback that answers like an OpenAI endpoint, read by the real ``openai`` model. Merges need
no model at all.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from record_improve_proposers_cassette import (
    CASSETTE,
    ENV,
    OPRO_TEXTS,
    REJECTED_CHANGE,
    LoggedModels,
    candidate,
    context,
    experiment,
    experiment_config,
    first_valid,
    minibatch,
    model_ref,
    opro_archive,
    seed_spec,
    train_tasks,
    unit_cases,
)
from servers import chat_body

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import UserError
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action, Step, Trajectory
from sharpen.improvement.candidate import Archive
from sharpen.improvement.engine import MAX_COMPONENT_CHARS
from sharpen.improvement.experiment import split_tasks
from sharpen.improvement.proposal import InvalidProposal, NothingToPropose
from sharpen.improvement.proposers.evolve import EvolveProposer, merge_pairs
from sharpen.improvement.proposers.rewrite import SYSTEM, fenced_text, one_line, tokens
from sharpen.improvement.state import EngineState
from sharpen.store.store import Store

NAMES = ("evolve", "opro", "best_of_n")
GOOD = "Read each step of the docstring and do them in order. Test your function on the examples."


def _run(coro):
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> dict[str, Any]:
    """The recorded scenarios, replayed: the minibatch, one valid proposal per proposer with
    the requests it made, and the tiny experiment (evolve with opro and best_of_n)."""
    assert CASSETTE.exists(), "record it: .venv/bin/python tests/record_improve_proposers_cassette.py"
    tmp = tmp_path_factory.mktemp("proposers")
    store = Store(f"sqlite:///{tmp / 'replay.db'}")
    models = LoggedModels()

    async def go() -> dict[str, Any]:
        try:
            out: dict[str, Any] = {"store": store, "folder": tmp / "exp"}
            out["minibatch"] = await minibatch("replay", store, models)
            model = models.get(model_ref("replay"))
            out["unit"] = {}
            for name, (proposer, make_ctx) in unit_cases("replay", out["minibatch"], model).items():
                start = len(models.log)
                proposal, ctx, reasons = await first_valid(proposer, make_ctx)
                out["unit"][name] = (proposal, ctx, models.log[start:], reasons)
            start = len(models.log)
            out["result"] = await experiment("replay", store, out["folder"], models)
            out["experiment_log"] = models.log[start:]
            return out
        finally:
            await models.aclose()

    return _run(go())


def _prompt(request) -> str:
    messages, _params = request
    return messages[-1].content or ""


def _proposer_requests(log) -> list:
    return [r for r in log if r[0][0].role == "system" and r[0][0].content == SYSTEM]


# -- one valid proposal per proposer ----------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_proposer_returns_a_valid_child_that_changes_the_instructions(replayed, name):
    proposal, ctx, _log, _reasons = replayed["unit"][name]
    base = ctx.archive.best() if name == "opro" else ctx.parent
    child, parent = proposal.spec, base.spec
    assert child.components.keys() == parent.components.keys()
    assert child.components["instructions"] != parent.components["instructions"]
    assert fenced_text(f"```\n{child.components['instructions']}\n```") == child.components["instructions"]
    # nothing but the intended component changed
    same = {"model", "agent", "params", "limits"}
    assert child.model_dump(include=same) == parent.model_dump(include=same)
    assert proposal.change.startswith(f"{name} instructions: “")
    if name == "opro":  # built on the archive's best, not on the parent the engine drew
        assert ctx.parent.hash != base.hash
        assert child.parents == [base.hash]
    else:
        assert child.parents == []  # the engine sets the parent


def test_evolve_prompt_holds_traces_feedback_and_the_rejection_log(replayed):
    _proposal, ctx, log, reasons = replayed["unit"]["evolve"]
    requests = _proposer_requests(log)
    assert len(requests) == len(reasons) + 1  # one request per try, no hidden retries
    prompt = _prompt(requests[-1])
    assert one_line(REJECTED_CHANGE, 200) in prompt
    assert ctx.parent.spec.components["instructions"] in prompt
    for t in ctx.minibatch:  # each training trace: its task, the agent's reply, the feedback
        task = next(m.content for m in t.messages if m.role == "user")
        assert next(ln for ln in task.splitlines() if ">>>" in ln) in prompt
        assert t.steps[0].observation.splitlines()[0] in prompt
    assert "Verdict: FAILURE" in prompt and "tests passed" in prompt
    assert tokens(prompt) <= ctx.reflection_tokens


def test_opro_prompt_lists_scores_ascending_with_the_best_last(replayed):
    _proposal, ctx, log, _reasons = replayed["unit"]["opro"]
    prompt = _prompt(_proposer_requests(log)[-1])
    scores = [int(s) for s in re.findall(r"^score: (\d+)%$", prompt, re.MULTILINE)]
    assert scores == [0, 25, 50]
    seed_text = ctx.archive.candidates[0].spec.components["instructions"]
    where = [prompt.index(t) for t in (seed_text, OPRO_TEXTS[1][0], OPRO_TEXTS[0][0])]
    assert where == sorted(where)
    assert "Verdict" not in prompt and "tests passed" not in prompt  # scores only, no traces


def test_best_of_n_asks_for_a_sampled_rewrite_without_feedback(replayed):
    _proposal, ctx, log, _reasons = replayed["unit"]["best_of_n"]
    requests = _proposer_requests(log)
    prompt = _prompt(requests[-1])
    assert ctx.parent.spec.components["instructions"] in prompt
    assert "Verdict" not in prompt and "tests passed" not in prompt and "score" not in prompt
    seeds = {params["seed"] for _m, params in requests}
    assert all(params["temperature"] == 1.0 for _m, params in requests)
    assert len(seeds) == len(requests)


# -- junk replies -------------------------------------------------------------------------------

JUNK: dict[str, tuple[str, str]] = {  # path segment -> (reply, finish_reason)
    "noblock": ("You should be careful and solve the task step by step, checking everything.", "stop"),
    "truncated": ("Here are the new instructions:\n```\nRead the task carefully and then", "length"),
    "code": ("```python\ndef transform_number(n: int) -> int:\n    return n // 4\n```", "stop"),
    "bare_code": ("```\nimport math\ndef f(n):\n    return math.floor(n / 4)\n```", "stop"),
    "short": ("```\nBe careful.\n```", "stop"),
    "think": ("<think>maybe add tests</think>\n```\n" + GOOD + "\n```", "stop"),
    "good": ("Here are better instructions:\n```\n" + GOOD + "\n```\nGood luck!", "stop"),
    "open": ("New instructions:\n```\n" + GOOD, "stop"),
    # Cut at max_tokens after the model had closed its block: the closed block counts ...
    "cut_after_block": ("New instructions:\n```\n" + GOOD + "\n```\nI also think that", "length"),
    "cut_in_second_block": ("```\n" + GOOD + "\n```\nOr else:\n```\nRead the task and", "length"),
    # ... but never the cut text, and a closed block is checked as any other.
    "cut_after_code": ("```python\ndef f(n):\n    return n // 4\n```\nThis works because", "length"),
    "cut_after_think": ("<think>hm</think>\n```\n" + GOOD + "\n```\nAlso", "length"),
}


@pytest.fixture(scope="module")
def junk_server():
    """An OpenAI-shaped server on loopback answering ``/<kind>/v1/chat/completions`` with
    ``JUNK[kind]``; ``requests`` counts the calls."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            server.requests += 1
            reply, finish = JUNK[self.path.strip("/").split("/")[0]]
            body = json.dumps(chat_body(reply, finish_reason=finish)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.requests = 0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _junk_model(server, kind: str):
    url = f"http://127.0.0.1:{server.server_address[1]}/{kind}/v1"
    # structured: none — the junk replies are fenced text, so the proposers must take the
    # free path (a model that constrains gets JSON edits: tests/test_proposers_structured.py)
    return REGISTRY.create("model", PluginRef(name="openai", args={"base_url": url, "model": "junk",
                                                                   "tools": False, "structured": "none"}))


def _ctx(name: str, model, archive: Archive | None = None, parent: int = 0):
    """The context of the ``name`` unit scenario without traces, asking ``model``."""
    if archive is None:
        archive = opro_archive("replay") if name == "opro" else Archive(
            candidates=[candidate(seed_spec("replay"), 0.0, 0)])
        parent = 2 if name == "opro" else 0
    return context("replay", model, [], archive, archive.candidates[parent], 0)


def _propose(junk_server, name: str, kind: str):
    args = {"merge_prob": 0.0} if name == "evolve" else {}
    proposer = REGISTRY.create("proposer", PluginRef(name=name, args=args))
    ctx = _ctx(name, _junk_model(junk_server, kind))
    return _run(proposer.propose(ctx)), ctx


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("kind", ["noblock", "truncated", "code", "bare_code", "short", "think",
                                  "cut_after_code", "cut_after_think"])
def test_junk_replies_are_invalid_proposals(junk_server, name, kind):
    with pytest.raises(InvalidProposal):
        _propose(junk_server, name, kind)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("kind", ["good", "open", "cut_after_block", "cut_in_second_block"])
def test_the_fenced_text_becomes_the_component(junk_server, name, kind):
    proposal, _ctx = _propose(junk_server, name, kind)
    assert proposal.spec.components["instructions"] == GOOD


def test_a_reply_repeating_the_current_text_is_invalid():
    with pytest.raises(InvalidProposal, match="repeats"):
        fenced_text("```\n" + GOOD + "\n```", current="  " + GOOD.replace(" ", "\n", 1))


# -- merge ------------------------------------------------------------------------------------


def _spec(instructions: str, guidelines: str, parents: list[str] | None = None) -> AgentSpec:
    return seed_spec("replay").model_copy(update={
        "components": {"instructions": instructions, "guidelines": guidelines}, "parents": parents or []})


def _merge_archive() -> Archive:
    """Seed S; A changed the instructions, B the guidelines, C both; A2 is A's child. A leads
    tasks t0-t1, B t2-t3 (C is dominated by nobody only where it ties)."""
    s = candidate(_spec("I0 solve the task.", "G0 no rules yet."), 0.0, 0)
    a = candidate(_spec("I1 read the docstring first.", "G0 no rules yet.", [s.hash]), 0.5, 1, "evolve")
    b = candidate(_spec("I0 solve the task.", "G1 test on the examples.", [s.hash]), 0.5, 2, "evolve")
    a.val, b.val = {"t0": 1.0, "t1": 1.0, "t2": 0.0, "t3": 0.0}, {"t0": 0.0, "t1": 0.0, "t2": 1.0, "t3": 1.0}
    return Archive(candidates=[s, a, b])


def _merge_ctx(junk_server, archive: Archive, kind: str = "noblock"):
    return _ctx("evolve", _junk_model(junk_server, kind), archive, parent=1)


def test_merge_takes_each_component_from_the_lineage_that_changed_it(junk_server):
    archive = _merge_archive()
    _s, a, b = archive.candidates
    before = junk_server.requests
    proposal = _run(EvolveProposer(merge_prob=1.0).propose(_merge_ctx(junk_server, archive)))
    assert junk_server.requests == before  # a merge asks no model
    assert proposal.spec.components == {"instructions": "I1 read the docstring first.",
                                        "guidelines": "G1 test on the examples."}
    assert proposal.spec.parents == [a.hash, b.hash]
    assert proposal.change.startswith(f"merge of {a.hash[:8]} and {b.hash[:8]}")


def test_merge_prefers_the_higher_scoring_text_when_both_changed_it(junk_server):
    archive = _merge_archive()
    s, a, b = archive.candidates
    # both changed the instructions; only A the guidelines; B scores higher (75% vs 50%)
    a.spec = _spec("I1 read the docstring first.", "G2 keep functions short.", [s.hash])
    b.spec = _spec("I2 write short code.", "G0 no rules yet.", [s.hash])
    a.hash, b.hash = a.spec.hash(), b.spec.hash()
    b.val = {"t0": 0.0, "t1": 1.0, "t2": 1.0, "t3": 1.0}  # A still leads t0: both on the front
    proposal = _run(EvolveProposer(merge_prob=1.0).propose(_merge_ctx(junk_server, archive)))
    assert proposal.spec.components == {"instructions": "I2 write short code.",
                                        "guidelines": "G2 keep functions short."}
    assert proposal.spec.parents == [a.hash, b.hash]


def test_merge_skips_a_lineage_pair_and_is_never_repeated(junk_server):
    archive = _merge_archive()
    s, a, b = archive.candidates
    # A's child A2 leads t0 with A: A and A2 are one lineage and must not be merged
    a2 = candidate(_spec("I3 think, then code.", "G0 no rules yet.", [a.hash]), 0.5, 3, "evolve")
    a2.val = dict(a.val)
    archive.add(a2)
    pairs = {(x.hash, y.hash) for x, y, _ in merge_pairs(archive)}
    assert (a.hash, a2.hash) not in pairs and (a.hash, b.hash) in pairs and (b.hash, a2.hash) in pairs
    assert all(anc.hash == s.hash for *_, anc in merge_pairs(archive))
    proposer = EvolveProposer(merge_prob=1.0)
    first = _run(proposer.propose(_merge_ctx(junk_server, archive)))
    second = _run(proposer.propose(_merge_ctx(junk_server, archive)))
    assert first.change.startswith("merge of") and second.change.startswith("merge of")
    assert first.spec.parents != second.spec.parents
    restored = EvolveProposer(merge_prob=1.0)
    restored.load_state(json.loads(json.dumps(proposer.state())))
    # both pairs are used up: the next proposal is a mutation (here the junk reply: invalid)
    with pytest.raises(InvalidProposal):
        _run(restored.propose(_merge_ctx(junk_server, archive)))
    good = _run(restored.propose(_merge_ctx(junk_server, archive, "good")))
    assert good.change.startswith("evolve ")


def test_evolve_round_robins_over_named_components(junk_server):
    proposer = EvolveProposer(components=["instructions", "guidelines"], merge_prob=0.0)
    ctx = _merge_ctx(junk_server, _merge_archive(), "good")
    changed = []
    for it in (1, 2, 3):
        ctx.iteration = it
        spec = _run(proposer.propose(ctx)).spec
        changed.append([k for k, v in spec.components.items() if ctx.parent.spec.components.get(k) != v])
    assert changed == [["instructions"], ["guidelines"], ["instructions"]]
    # a component the spec lacks starts empty and is added
    ctx.parent = candidate(seed_spec("replay"), 0.0, 0)
    ctx.iteration = 2
    assert _run(proposer.propose(ctx)).spec.components["guidelines"] == GOOD


# -- the engine, per proposer, under replay -----------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_engine_run_completes_with_a_consistent_archive(replayed, name):
    result = replayed["result"]
    r = next(x for x in result.results if x.proposer.name == name)
    cfg = experiment_config("replay")
    state = EngineState.load(replayed["folder"] / name / "state.json")
    val = split_tasks(ENV, cfg)["val"]
    arch = state.archive
    assert state.stop_reason == r.stop_reason and r.stop_reason
    assert arch.candidates[0].proposer == "seed" and arch.candidates[0].hash == cfg.seed_spec.hash()
    seen: set[str] = set()
    for c in arch.candidates:
        assert c.hash == c.spec.hash() and c.hash not in seen
        assert set(c.val) == {t.hash() for t in val}
        assert all(p in seen for p in c.spec.parents)  # parents were archived before
        assert all(len(t) <= MAX_COMPONENT_CHARS for t in c.spec.components.values())
        if c.proposer != "seed":
            assert c.proposer == name and c.spec.parents
        seen.add(c.hash)
    a = state.account
    assert a.accepted == len(arch.candidates) - 1 == r.archive_size - 1
    assert a.proposals == a.gated_out + a.accepted
    assert a.proposals + a.invalid >= 1  # the proposer was asked
    assert len(state.invalid_reasons) == a.invalid
    rejected = {x.child_hash for xs in state.rejected.values() for x in xs}
    assert len(rejected) == a.gated_out and not rejected & seen
    assert state.spend.rollouts <= cfg.engine.budget.rollouts + cfg.val
    best = [p.best_val for p in state.curve]
    assert best == sorted(best) and best[-1] == arch.best().val_score == r.val_score
    assert r.winner.hash() == arch.best().hash


def _task_lines(tasks) -> dict[str, set[str]]:
    env = REGISTRY.create("env", ENV)

    async def text(t):
        return (await env.reset(t))[0]

    return {t.hash(): {ln.strip() for ln in _run(text(t)).splitlines() if len(ln.strip()) >= 12}
            for t in tasks}


def test_no_proposer_prompt_holds_a_validation_or_test_task(replayed):
    splits = split_tasks(ENV, experiment_config("replay"))
    train = set().union(*_task_lines(splits["train"] + train_tasks()).values())
    held_out = set().union(*_task_lines(splits["val"] + splits["test"]).values()) - train
    assert held_out  # the probe lines exist
    prompts = [_prompt(r) for r in _proposer_requests(replayed["experiment_log"])]
    prompts += [_prompt(r) for *_, log, _ in replayed["unit"].values() for r in _proposer_requests(log)]
    assert prompts
    leaks = [ln for ln in held_out for p in prompts if ln in p]
    assert leaks == []
    # the probe can fail: lines only the training tasks have do reach evolve's prompts
    train_only = train - set().union(*_task_lines(splits["val"] + splits["test"]).values())
    assert any(ln in p for ln in train_only for p in prompts)



# -- reflexion --------------------------------------------------------------------------------


def test_reflexion_offers_most_trials_first_then_each_memory_until_nothing_is_left():
    proposer = REGISTRY.create("proposer", PluginRef(name="reflexion", args={"max_trials": 3}))
    seed = candidate(seed_spec("replay"), 0.0, 0)
    ctx = context("replay", None, [], Archive(candidates=[seed]), seed, 0)
    offered = []
    while True:
        try:
            p = _run(proposer.propose(ctx))
        except NothingToPropose:
            break
        args = p.spec.agent.args
        offered.append((args["trials"], args["memory"]))
        assert p.spec.agent.name == "reflexion" and f"memory {args['memory']}" in p.change
        assert p.spec.components == seed.spec.components  # the spec's text is untouched
        ctx.tried.add(p.spec.hash())
    assert offered == [(t, m) for t in (3, 2) for m in ("none", "feedback", "reflections")]
    # A child of a 3-trial parent may change its memory, never lower its trials.
    parent = candidate(proposer.child(seed.spec, 3, "none"), 0.0, 1, "reflexion")
    ctx = context("replay", None, [], Archive(candidates=[seed, parent]), parent, 0)
    assert _run(proposer.propose(ctx)).spec.agent.args == {**parent.spec.agent.args, "memory": "feedback"}


def test_reflexion_result_memory_carries_the_verdict_not_the_answer():
    """``memory: result`` shows a retry what the environment said and never the failed code
    (which a small model copies); ``feedback`` shows both. Neither asks the model anything."""
    failed = Trajectory(task=TaskSpec(env="code", id="t"), agent_hash="x", steps=[Step(
        index=0, messages=[], action=Action(tool="submit", arguments={"code": "return 41"}),
        observation="0/1 tests passed.\nFailed:\n- `assert candidate() == 42`: returned 41")])
    entries = {}
    for memory in ("result", "feedback"):
        agent = REGISTRY.create("agent", PluginRef(name="reflexion", args={"memory": memory}))
        entries[memory] = _run(agent._remember(None, None, failed, failed, 0))
    assert "returned 41" in entries["result"] and "return 41" not in entries["result"]
    assert "returned 41" in entries["feedback"] and "code: return 41" in entries["feedback"]
    assert not failed.feedback  # no reflection was asked for


def test_reflexion_memory_keeps_the_top_of_a_long_verdict_up_to_result_chars():
    """``result_chars`` bounds what of the environment's verdict an entry carries (the score
    and the first failure come first), and the proposer hands it to every child."""
    report = "0/5 tests passed.\nFailed:\n" + "".join(
        f"- `assert candidate({i}) == {i + 1}`: candidate({i}) returned {i}, expected {i + 1}\n"
        for i in range(5))
    failed = Trajectory(task=TaskSpec(env="code", id="t"), agent_hash="x", steps=[Step(
        index=0, messages=[], action=Action(tool="submit", arguments={"code": "return n"}),
        observation=report)])
    agent = REGISTRY.create("agent", PluginRef(name="reflexion",
                                               args={"memory": "result", "result_chars": 120}))
    entry = _run(agent._remember(None, None, failed, failed, 0))
    assert "0/5 tests passed" in entry and "candidate(0) == 1" in entry
    assert "candidate(4)" not in entry and entry.endswith("…[cut]")
    whole = _run(REGISTRY.create("agent", PluginRef(name="reflexion", args={"memory": "result"}))
                 ._remember(None, None, failed, failed, 0))
    assert "candidate(4) returned 4" in whole  # the default keeps a report this size whole
    proposer = REGISTRY.create("proposer", PluginRef(name="reflexion", args={"result_chars": 120}))
    assert proposer.child(seed_spec("replay"), 2, "result").agent.args["result_chars"] == 120
    assert "result_chars" not in REGISTRY.create("proposer", PluginRef(name="reflexion")).child(
        seed_spec("replay"), 2, "result").agent.args
    for kind in ("agent", "proposer"):  # a typo fails before any rollout is spent
        with pytest.raises(UserError, match="result_chars: 200"):
            REGISTRY.create(kind, PluginRef(name="reflexion", args={"result_chars": 5}))


def test_reflexion_names_the_fix_for_an_unknown_memory():
    with pytest.raises(UserError, match="unknown or no memories"):
        REGISTRY.create("proposer", PluginRef(name="reflexion", args={"memories": ["reflection"]}))
    with pytest.raises(UserError, match="memory to one of"):
        REGISTRY.create("agent", PluginRef(name="reflexion", args={"memory": "episodic"}))
