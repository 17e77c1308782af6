"""The improvement engine and the experiment protocol, with model-free agents.

The proposers here are plug-ins written for the test: ``upgrade`` swaps the agent for the
environment's reference solver (so a child can truly beat its parent), ``flaky`` emits
invalid proposals first. Rollouts are real: the code environment runs every submission in
the sandbox and the runner stores every episode.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.registry import PluginRef, Registry
from sharpen.improvement.budget import Budget, preflight
from sharpen.improvement.candidate import Archive, Candidate
from sharpen.improvement.engine import Engine, EngineConfig
from sharpen.improvement.evaluate import Evaluator
from sharpen.improvement.experiment import Experiment, ExperimentConfig, split_tasks
from sharpen.improvement.models import SharedModels
from sharpen.improvement.proposal import BaseProposer, InvalidProposal, Proposal, ProposalContext
from sharpen.improvement.report import selection_note
from sharpen.improvement.state import CurvePoint, EngineState
from sharpen.store import Store

ENV = PluginRef(name="code", args={"source": "generated", "max_submissions": 1})
NULL = AgentSpec(name="null", agent=PluginRef(name="null"), model=PluginRef(name="none"), params={},
                 components={})


class Upgrade(BaseProposer):
    """Proposes the reference agent; records every context it is shown."""

    def __init__(self, fail_first: int = 0, interrupt_at: int | None = None) -> None:
        self.seen: list[ProposalContext] = []
        self.fail_first = fail_first
        self.interrupt_at = interrupt_at
        self.calls = 0

    async def propose(self, ctx: ProposalContext) -> Proposal:
        self.calls += 1
        self.seen.append(ctx)
        if self.interrupt_at is not None and self.calls == self.interrupt_at:
            raise KeyboardInterrupt
        if self.calls <= self.fail_first:
            raise InvalidProposal("not yet")
        if ctx.parent.spec.agent.name == "reference":
            raise InvalidProposal("nothing left to improve")
        child = ctx.parent.spec.model_copy(update={"agent": PluginRef(name="reference"), "parents": []})
        return Proposal(spec=child, change="use the reference solver")


def _engine(tmp_path: Path, proposer, store: Store, budget: int = 20, name: str = "state") -> Engine:
    tasks = split_tasks(ENV, ExperimentConfig(env=ENV, train=6, val=4, test=4))
    return Engine(
        proposer=proposer, proposer_name="upgrade", seed_spec=NULL, train=tasks["train"],
        val=tasks["val"], evaluator=Evaluator(store, ENV, seed=0), proposer_model=None,
        config=EngineConfig(budget=Budget(rollouts=budget), minibatch=3),
        checkpoint=tmp_path / f"{name}.json",
    )


async def test_gate_accepts_a_better_child_and_the_budget_holds(tmp_path: Path):
    store = Store(f"sqlite:///{tmp_path}/s.db")
    proposer = Upgrade(fail_first=2)
    state = await _engine(tmp_path, proposer, store).run()
    a = state.account
    assert [c.proposer for c in state.archive.candidates] == ["seed", "upgrade"]
    assert state.archive.best().val_score == 1.0 and state.archive.candidates[0].val_score == 0.0
    assert a.invalid >= 2 and a.accepted == 1 and a.proposals == a.accepted + a.gated_out
    assert state.spend.rollouts <= 20
    # Seed on val (4), parent and child on a minibatch (3 + 3), child on val (4) = 14; then
    # the reference parent solves its minibatch (skipped, cached tasks cost nothing), and the
    # run stops before a gate (2 × 3 rollouts) would overshoot the budget.
    assert 14 <= state.spend.rollouts <= 20 - 2 * 3 + 5
    assert a.skipped >= 1
    assert state.stop_reason == f"rollout budget ({state.spend.rollouts} of 20 used; a gate takes about 6)"
    assert state.archive.candidates[1].spec.parents == [state.archive.candidates[0].hash]
    # Every proposer context holds training tasks only.
    train = {t.hash() for t in _engine(tmp_path, Upgrade(), store, name="x").train}
    assert all(t.task.hash() in train for ctx in proposer.seen for t in ctx.minibatch)


async def test_a_resumed_engine_reaches_the_same_archive(tmp_path: Path):
    one = await _engine(tmp_path, Upgrade(fail_first=1), Store(f"sqlite:///{tmp_path}/a.db"),
                        name="a").run()
    store_b = Store(f"sqlite:///{tmp_path}/b.db")
    with pytest.raises(KeyboardInterrupt):
        await _engine(tmp_path, Upgrade(fail_first=1, interrupt_at=2), store_b, name="b").run()
    assert (tmp_path / "b.json").exists()
    two = await _engine(tmp_path, Upgrade(fail_first=0), store_b, name="b").run()
    assert [c.hash for c in two.archive.candidates] == [c.hash for c in one.archive.candidates]
    assert [c.val for c in two.archive.candidates] == [c.val for c in one.archive.candidates]
    assert two.spend.rollouts == one.spend.rollouts


async def test_experiment_scores_test_outside_the_budget_and_reports_the_gain(tmp_path: Path):
    registry_proposer = Upgrade()
    config = ExperimentConfig(env=ENV, seed_spec=NULL, proposer=PluginRef(name="upgrade"), train=6,
                              val=4, test=30, engine=EngineConfig(budget=Budget(rollouts=20), minibatch=3))
    store = Store(f"sqlite:///{tmp_path}/s.db")
    reg = Registry()
    reg.register("proposer", "upgrade")(lambda: registry_proposer)
    exp = Experiment(config, store, tmp_path / "exp", models=SharedModels(), registry=reg)
    result = await exp.run()
    r = result.results[0]
    assert result.baseline_test_score == 0.0 and r.test_score == 1.0
    assert r.comparison.significant and r.comparison.direction == "better"
    assert r.comparison.discordant == (0, 30)
    assert r.spend.rollouts <= 20  # the 60 test episodes are outside the budget
    test_hashes = {t.hash() for t in split_tasks(ENV, config)["test"]}
    dumped = json.dumps([ctx.model_dump(mode="json", exclude={"rng", "llm"})
                         for ctx in registry_proposer.seen])
    assert not any(h in dumped for h in test_hashes)
    roles = {r.manifest.extra.get("role") for r in store.list_runs()}
    assert roles == {"improve:upgrade", "test"}
    assert [e.proposer for e in r.lineage] == ["seed", "upgrade"]
    # Four validation tasks cannot separate even a perfect child from a null seed (exact
    # McNemar p = 2 / 2⁴); the report says so, and that the held-out verdict decides.
    assert r.val_discordant == (0, 4)
    assert selection_note(r) == ("validation cannot tell the winner from the seed: 4 validation "
                                 "tasks only the winner solved, 0 only the seed (exact McNemar "
                                 "p = 0.125); the held-out verdict decides")
    assert selection_note(r.model_copy(update={"val_discordant": (0, 6)})) is None  # p = 0.031
    assert selection_note(r.model_copy(update={"lineage": r.lineage[:1]})) is None  # the seed won
    assert selection_note(r.model_copy(update={"val_discordant": None})) is None  # an older result


def test_rollouts_to_best_count_to_the_winners_own_acceptance():
    """A child that ties the seed on validation wins (ties go to the later candidate), but it
    was not reached when the seed's score was: it counts from its own acceptance."""
    val = {"t1": 1.0, "t2": 0.0}
    seed = Candidate(spec=NULL, hash="seed", proposer="seed", val=val)
    child = Candidate(spec=NULL.model_copy(update={"agent": PluginRef(name="reference")}), hash="child",
                      proposer="p", iteration=3, val=val)
    curve = [CurvePoint(rollouts=8, tokens=0, best_val=0.5, iteration=0),
             CurvePoint(rollouts=151, tokens=900, best_val=0.5, iteration=3),
             CurvePoint(rollouts=160, tokens=990, best_val=0.5, iteration=3)]  # the run's last point
    state = EngineState(archive=Archive(candidates=[seed, child]), curve=curve)
    assert state.archive.best() is child
    assert (state.rollouts_to(child), state.rollouts_to(seed)) == (151, 8)


def test_preflight_says_what_the_budget_buys():
    line = preflight(Budget(rollouts=100), val_size=10, minibatch=4)
    assert "about 8 proposals" in line


def test_a_budget_describes_its_limits():
    assert Budget(rollouts=120).describe() == "120 rollouts"
    assert Budget(rollouts=None, tokens=50_000, usd=1.5).describe() == "50,000 tokens · $1.5"


async def test_a_task_listed_twice_is_run_once(tmp_path: Path):
    tasks = split_tasks(ENV, ExperimentConfig(env=ENV, train=2, val=1, test=1))["train"]
    evaluator = Evaluator(Store(f"sqlite:///{tmp_path}/s.db"), ENV, seed=0)
    spec = NULL.model_copy(update={"agent": PluginRef(name="reference")})
    ev = await evaluator.evaluate(spec, [tasks[0], tasks[1], tasks[0]], "train")
    assert ev.new_rollouts == 2 and ev.successes == 3
    trajs = evaluator.trajectories(ev)
    assert [t.task.hash() for t in trajs] == [tasks[0].hash(), tasks[1].hash(), tasks[0].hash()]
    assert trajs[0].id == trajs[2].id
