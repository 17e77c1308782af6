"""Diagnosis as proposer context (issue 22, item 9): the engine puts the detectors' findings on
the minibatch's failures into every proposal context, and a proposer built with
``diagnosis: true`` sends them in its prompt — only then.

Trajectories are real: the model-free ``null`` agent (one empty submission: a planted
``limit_hit``) and ``reference`` agent (solved) run through the real Runner on the code
environment. Proposer prompts go to a real HTTP server on loopback that answers like an
OpenAI endpoint, read by the real ``openai`` model, and keeps every request body.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import run_agent
from servers import chat_body

from sharpen.cli.options import parse_kv
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.core.trajectory import Trajectory
from sharpen.diagnose.run import BUILTIN, build_detectors
from sharpen.improvement.budget import Budget
from sharpen.improvement.candidate import Archive, Candidate
from sharpen.improvement.diagnosis import diagnose_minibatch, render_diagnosis
from sharpen.improvement.engine import Engine, EngineConfig
from sharpen.improvement.evaluate import Evaluator
from sharpen.improvement.experiment import ExperimentConfig, split_tasks
from sharpen.improvement.proposal import Proposal, ProposalContext, ProposerLLM
from sharpen.improvement.proposers.evolve import EvolveProposer
from sharpen.store import Store

ENV = PluginRef(name="code", args={"source": "generated", "max_submissions": 1})
NULL = AgentSpec(name="null", agent=PluginRef(name="null"), model=PluginRef(name="none"), params={},
                 components={})
HEAD = "Automatic checks of the"
"""How the rendered diagnosis begins."""
REPLIES = {  # a valid reply per proposer, on the free (fenced text) path
    "evolve": "```\nSubmit a complete function before you run out of steps.\n```",
    "opro": "```\nSubmit a complete function before you run out of steps.\n```",
    "guidelines": "ADD: Always submit a complete function before the step limit.",
}


@pytest.fixture(scope="module")
def trajectories(tmp_path_factory: pytest.TempPathFactory) -> list[Trajectory]:
    """Three failed ``null`` attempts and one solved ``reference`` attempt, on the first
    training tasks of the code environment."""
    import asyncio

    tmp = tmp_path_factory.mktemp("diagnosis")
    tasks = REGISTRY.create("env", ENV).list_tasks(split="train", limit=4, seed=0)
    failed = asyncio.run(run_agent(tmp / "null.db", ENV, "null", tasks[:3]))
    solved = asyncio.run(run_agent(tmp / "ref.db", ENV, "reference", tasks[3:4]))
    assert [t.outcome.success for t in failed + solved] == [False, False, False, True]
    return failed + solved


@pytest.fixture(scope="module")
def server() -> Iterator[ThreadingHTTPServer]:
    """An OpenAI-shaped server on loopback: ``/<proposer>/v1/chat/completions`` answers
    ``REPLIES[proposer]``; ``bodies`` keeps every request body."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            srv.bodies.append(request)  # type: ignore[attr-defined]
            reply = REPLIES[self.path.strip("/").split("/")[0]]
            body = json.dumps(chat_body(reply)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.bodies = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _model(server: ThreadingHTTPServer, proposer: str) -> Any:
    url = f"http://127.0.0.1:{server.server_address[1]}/{proposer}/v1"
    return REGISTRY.create("model", PluginRef(name="openai", args={
        "base_url": url, "model": "scripted", "tools": False, "structured": "none"}))


def _last_prompt(server: ThreadingHTTPServer) -> str:
    messages = server.bodies[-1]["messages"]  # type: ignore[attr-defined]
    return next(m["content"] for m in messages if m["role"] == "user")


def _context(model: Any, minibatch: list[Trajectory], seed: int = 0,
             reflection_tokens: int = 900) -> ProposalContext:
    import random

    spec = AgentSpec(name="seed", components={"instructions": "Write the function the task asks for."})
    parent = Candidate(spec=spec, hash=spec.hash(), proposer="seed", val={"t": 0.0})
    rng = random.Random(seed)
    return ProposalContext(parent=parent, minibatch=minibatch, archive=Archive(candidates=[parent]),
                           iteration=1, rng=rng, reflection_tokens=reflection_tokens,
                           llm=ProposerLLM(model, {"max_tokens": 200}, lambda _u: None, rng))


# -- the diagnosis ------------------------------------------------------------------------

def test_the_diagnosis_holds_each_failed_attempts_findings_and_the_counts(trajectories):
    diagnosis = diagnose_minibatch(trajectories)
    failed, solved = trajectories[:3], trajectories[3]
    assert diagnosis.failed == 3
    assert [c.detector for c in diagnosis.counts] == list(BUILTIN)
    # what each detector finds on its own, on the failed attempts, is what the diagnosis holds
    for t in failed:
        direct = sorted((ref.name, fb.target.step_index, " ".join(fb.rationale.split()))
                        for ref, det in build_detectors() for fb in det.detect(t))
        assert direct, "the null agent's lone empty submission is a planted limit hit"
        assert sorted((f.detector, f.step, f.rationale) for f in diagnosis.of(t)) == direct
    counts = {c.detector: c.failed for c in diagnosis.counts}
    assert counts["limit_hit"] == 3
    assert counts == {ref.name: sum(bool(det.detect(t)) for t in failed)
                      for ref, det in build_detectors()}
    assert solved.id not in diagnosis.findings and diagnosis.of(solved) == []


def test_the_rendering_names_the_shown_failures_and_fits_its_limit(trajectories):
    diagnosis = diagnose_minibatch(trajectories)
    text = render_diagnosis(diagnosis, [("Example 1", trajectories[0]), ("Example 4", trajectories[3])])
    lines = text.splitlines()
    assert lines[0] == f"{HEAD} 3 failed attempts on these tasks:"
    assert "- limit_hit: in 3 of 3" in lines
    assert any(line.startswith("Example 1: limit_hit at step 0: ") for line in lines)
    assert not any(line.startswith("Example 4") for line in lines)  # solved: nothing to say
    short = render_diagnosis(diagnosis, [(f"Example {i}", t) for i, t in enumerate(trajectories, 1)],
                             limit_chars=120)
    assert short.splitlines()[:2] == lines[:2] and "more lines left out" in short
    assert render_diagnosis(diagnose_minibatch(trajectories[3:])) == ""  # no failure, no text


# -- the prompt ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["evolve", "guidelines", "opro"])
async def test_the_prompt_holds_the_diagnosis_only_when_asked(trajectories, server, name):
    prompts = {}
    for flag in (False, True):
        args: dict[str, Any] = {"diagnosis": flag} if flag else {}
        if name == "evolve":
            args["merge_prob"] = 0.0
        proposer = REGISTRY.create("proposer", PluginRef(name=name, args=args))
        # room for every trace in full: evolve's traces get what the rest of the prompt
        # leaves, so under a tight budget the diagnosis takes its room from them
        proposal = await proposer.propose(_context(_model(server, name), trajectories,
                                                   reflection_tokens=8000))
        assert isinstance(proposal, Proposal)
        prompts[flag] = _last_prompt(server)
    assert HEAD not in prompts[False] and "limit_hit" not in prompts[False]
    assert f"{HEAD} 3 failed attempts on these tasks:\n- limit_hit: in 3 of 3" in prompts[True]
    if name == "opro":  # no trace is shown, so no per-trajectory finding either
        assert "at step 0" not in prompts[True]
    else:
        label = "The failed task" if name == "guidelines" else "Example 1"
        assert f"{label}: limit_hit at step 0: the episode stopped" in prompts[True]
    # the rest of the prompt is unchanged: taking the diagnosis out gives the default prompt
    start = prompts[True].index(HEAD)
    found = prompts[True][start:prompts[True].index("\n\n", start)]
    around = ("\n", "\n") if name == "opro" else ("\n\n", "")
    assert prompts[True].replace(around[0] + found + around[1], "", 1) == prompts[False]


# -- the engine and the experiment id ------------------------------------------------------

class Recording(EvolveProposer):
    """``evolve`` with the diagnosis, keeping every context it is shown."""

    def __init__(self) -> None:
        super().__init__(merge_prob=0.0, diagnosis=True)
        self.seen: list[ProposalContext] = []

    async def propose(self, ctx: ProposalContext) -> Proposal:
        self.seen.append(ctx)
        return await super().propose(ctx)


async def test_the_engine_gives_every_context_the_diagnosis_of_its_minibatch(tmp_path: Path, server):
    tasks = split_tasks(ENV, ExperimentConfig(env=ENV, train=4, val=2, test=1))
    proposer = Recording()
    engine = Engine(
        proposer=proposer, proposer_name="evolve", seed_spec=NULL, train=tasks["train"],
        val=tasks["val"], evaluator=Evaluator(Store(f"sqlite:///{tmp_path}/s.db"), ENV, seed=0),
        proposer_model=_model(server, "evolve"),
        config=EngineConfig(budget=Budget(rollouts=14), minibatch=3, max_iterations=2),
        checkpoint=tmp_path / "state.json")
    await engine.run()
    assert proposer.seen
    for ctx in proposer.seen:
        assert ctx.diagnosis is not None and ctx.diagnosis.failed == len(ctx.minibatch) == 3
        assert set(ctx.diagnosis.findings) == {t.id for t in ctx.minibatch}
        assert all(ctx.diagnosis.of(t) for t in ctx.minibatch)  # the null agent's limit hits
    assert "- limit_hit: in 3 of 3" in _last_prompt(server)


def test_the_default_keeps_experiment_ids_and_the_cli_arg_turns_it_on():
    # the default proposer ref carries no diagnosis arg, so an experiment's id (its folder)
    # is what it was before diagnosis existed; the pin was computed at the commit before this change
    plain = ExperimentConfig(env=ENV, proposer=PluginRef(name="evolve"))
    assert plain.experiment_id() == "ee8109aea530"
    assert REGISTRY.create("proposer", plain.proposer).diagnosis is False
    # `sharpen improve --proposer-arg diagnosis=true` builds the ref this way
    ref = PluginRef(name="evolve", args=parse_kv(["diagnosis=true"], "--proposer-arg"))
    assert ref.args == {"diagnosis": True}
    assert REGISTRY.create("proposer", ref).diagnosis is True
    on = ExperimentConfig(env=ENV, proposer=ref)
    assert on.experiment_id() != plain.experiment_id()
