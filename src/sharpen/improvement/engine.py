"""The improvement engine: propose → gate → validate → archive, within a budget.

One iteration:

1. pick a parent from the archive's Pareto front (seeded RNG);
2. draw a training minibatch and evaluate the parent on it (usually cached);
3. ask the proposer for a child, given the parent's traces on that minibatch, what the
   built-in detectors find in its failures there (:mod:`sharpen.improvement.diagnosis`; shown
   only by a proposer built with ``diagnosis: true``) and the parent's rejection log; an
   invalid proposal (truncated, ``<think>``, too long, unchanged, a repeat of a rejected
   child) is retried up to ``max_invalid`` times, spending tokens but no rollouts;
4. **gate**: evaluate the child on the same minibatch with the same seeds; it must score
   strictly higher than its parent on the objective (with ``success``: solve more tasks),
   else it goes to the parent's rejection log;
5. evaluate the winner on the validation split and archive it.

Every score is the objective's (:mod:`sharpen.improvement.objective`), read from the
evaluator's records: a task the objective left unscored (a judge error) is out of the gate's
comparison and of the candidate's validation scores, and counted in the account.

The engine never sees the test split: it gets training and validation tasks only (the
:class:`~sharpen.improvement.experiment.Experiment` scores test outside the budget). State is
checkpointed after every iteration; :meth:`Engine.run` on an existing checkpoint continues
it, and reaches the same archive as an uninterrupted run when the models are deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.messages import Usage
from sharpen.core.task import TaskSpec
from sharpen.improvement.budget import Budget
from sharpen.improvement.candidate import Candidate
from sharpen.improvement.diagnosis import diagnose_minibatch
from sharpen.improvement.evaluate import Evaluation, Evaluator, paired_totals
from sharpen.improvement.proposal import (
    InvalidProposal,
    NothingToPropose,
    Proposal,
    ProposalContext,
    Proposer,
    ProposerLLM,
    Rejection,
)
from sharpen.improvement.state import CurvePoint, EngineState
from sharpen.models.base import ChatModel

MAX_COMPONENT_CHARS = 6000
"""Longest text component a proposal may set (a bound against runaway prompts)."""


class EngineConfig(BaseModel):
    """How the engine searches."""

    budget: Budget = Field(default_factory=Budget)
    """Rollouts, tokens, dollars."""
    minibatch: int = 4
    """Training tasks per gate."""
    max_invalid: int = 3
    """Retries of an invalid proposal within one iteration."""
    max_idle: int = 8
    """Iterations in a row without a valid proposal that stop the run."""
    max_iterations: int = 1000
    """Hard stop on iterations."""
    reflection_tokens: int = 1500
    """Token budget of the traces in one proposer prompt."""
    proposer_params: dict = Field(default_factory=lambda: {"temperature": 0.7, "max_tokens": 400})
    """Sampling params of proposer calls."""
    seed: int = 0
    """Seed of the engine's RNG (parent choice, minibatches, proposer sampling)."""


class Engine:
    """Runs one proposer over one (train, val) pair of task lists (see the module doc)."""

    def __init__(
        self, *, proposer: Proposer, proposer_name: str, seed_spec: AgentSpec,
        train: Sequence[TaskSpec], val: Sequence[TaskSpec], evaluator: Evaluator,
        proposer_model: ChatModel, config: EngineConfig, checkpoint: Path,
        on_event: Callable[[str], None] | None = None,
    ) -> None:
        if not train or not val:
            raise ValueError("the engine needs training and validation tasks")
        self.proposer = proposer
        self.proposer_name = proposer_name
        self.seed_spec = seed_spec
        self.train = list(train)
        self.val = list(val)
        self.evaluator = evaluator
        self.proposer_model = proposer_model
        self.config = config
        self.checkpoint = checkpoint
        self.on_event = on_event or (lambda _msg: None)
        self.state = EngineState.load(checkpoint) if checkpoint.exists() else EngineState()
        self.evaluator.cache = self.state.cache
        if self.state.proposer_state:
            proposer.load_state(self.state.proposer_state)

    # -- bookkeeping -------------------------------------------------------------------

    def _charge_rollouts(self, n: int, usage: Usage) -> None:
        s = self.state.spend
        s.rollouts += n
        s.rollout_usage = s.rollout_usage + usage

    def _charge_proposer(self, usage: Usage) -> None:
        self.state.spend.proposer_usage = self.state.spend.proposer_usage + usage

    def _point(self, iteration: int) -> None:
        s = self.state
        s.curve.append(CurvePoint(rollouts=s.spend.rollouts, tokens=s.spend.tokens,
                                  best_val=s.archive.best().val_score, iteration=iteration))

    def _save(self, rng) -> None:
        self.state.save_rng(rng)
        self.state.proposer_state = self.proposer.state()
        self.state.save(self.checkpoint)

    async def _evaluate(self, spec: AgentSpec, tasks: Sequence[TaskSpec], split: str,
                        who: str) -> Evaluation:
        ev = await self.evaluator.evaluate(spec, tasks, split, who)
        self._charge_rollouts(ev.new_rollouts, ev.new_usage)
        self.state.spend.judge_usage = self.state.spend.judge_usage + ev.new_judge_usage
        self.state.account.judge_errors += ev.new_judge_errors
        return ev

    @staticmethod
    def _val_scores(tasks: Sequence[TaskSpec], ev: Evaluation) -> dict[str, float]:
        """Objective score per validation task hash; unscored tasks are left out."""
        return {t.hash(): r.score for t, r in zip(tasks, ev.records, strict=True)
                if r.score is not None}

    # -- the loop ----------------------------------------------------------------------

    async def run(self) -> EngineState:
        """Run (or continue) until the budget, ``max_iterations`` or ``max_idle`` stops it."""
        s = self.state
        rng = s.rng(self.config.seed)
        if not s.archive.candidates:
            ev = await self._evaluate(self.seed_spec, self.val, "val", "seed")
            s.archive.add(Candidate(
                spec=self.seed_spec, hash=ev.spec_hash, proposer="seed", change="the starting spec",
                val=self._val_scores(self.val, ev)))
            self._point(0)
            self.on_event(f"seed: val {s.archive.best().val_score:.1%}{self._of()}")
            self._save(rng)
        m = min(self.config.minibatch, len(self.train))
        while s.stop_reason is None:
            why = s.spend.exhausted(self.config.budget, next_rollouts=2 * m)
            if why is None and s.iteration >= self.config.max_iterations:
                why = f"max_iterations ({self.config.max_iterations})"
            if why is None and s.idle >= self.config.max_idle:
                why = f"no valid proposal in {s.idle} iterations in a row"
            if why is not None:
                s.stop_reason = why
                break
            valid = await self._iterate(rng, m)
            if s.stop_reason is not None:
                break
            s.idle = 0 if valid else s.idle + 1
            s.iteration += 1
            self._save(rng)
        last = s.curve[-1] if s.curve else None
        if last is None or (last.rollouts, last.tokens) != (s.spend.rollouts, s.spend.tokens):
            self._point(s.iteration)  # the curve runs to what was spent in all, not to the last acceptance
        self._save(rng)
        self.on_event(f"stopped: {s.stop_reason}")
        return s

    async def _iterate(self, rng, m: int) -> bool:
        """One iteration; ``False`` when no valid proposal came (or none was needed)."""
        s = self.state
        it = s.iteration + 1
        parent = s.archive.select_parent(rng, exclude=s.exhausted)
        if parent is None:
            s.stop_reason = "the proposer has nothing left to propose for any parent on the front"
            return False
        s.account.iterations += 1
        batch = rng.sample(self.train, m)
        parent_ev = await self._evaluate(parent.spec, batch, "train", "parent")
        if parent_ev.perfect:
            s.account.skipped += 1
            self.on_event(f"#{it}: parent {parent.hash[:8]} has the best score on the whole "
                          "minibatch; skipped")
            return True
        shown = self.evaluator.trajectories(parent_ev)
        ctx = ProposalContext(
            parent=parent, minibatch=shown, diagnosis=diagnose_minibatch(shown),
            rejected=list(s.rejected.get(parent.hash, [])), archive=s.archive, iteration=it,
            tried={c.hash for c in s.archive.candidates}
            | {r.child_hash for rs in s.rejected.values() for r in rs},
            rng=rng, reflection_tokens=self.config.reflection_tokens,
            llm=ProposerLLM(self.proposer_model, self.config.proposer_params, self._charge_proposer,
                            rng),
        )
        proposal = await self._propose(ctx)
        if proposal is None:
            return False
        child = proposal.spec
        child_ev = await self._evaluate(child, batch, "train", "gate: child")
        parent_score, child_score = paired_totals(parent_ev, child_ev)
        accepted = child_score > parent_score
        self.proposer.observe(parent, proposal, accepted)
        if not accepted:
            s.account.gated_out += 1
            success = self.evaluator.objective.label() == "success"
            s.rejected.setdefault(parent.hash, []).append(Rejection(
                child_hash=child.hash(), change=proposal.change, parent_successes=parent_ev.successes,
                child_successes=child_ev.successes, minibatch=m,
                parent_score=None if success else parent_score,
                child_score=None if success else child_score))
            self.on_event(f"#{it}: {proposal.change} — gated out "
                          f"({child_score:g}/{m} vs parent {parent_score:g}/{m}{self._of()})")
            return True
        val_ev = await self._evaluate(child, self.val, "val", "child")
        s.archive.add(Candidate(
            spec=child, hash=child.hash(), proposer=self.proposer_name, change=proposal.change,
            iteration=it,
            val=self._val_scores(self.val, val_ev)))
        s.account.accepted += 1
        self._point(it)
        self.on_event(f"#{it}: {proposal.change} — accepted, val "
                      f"{s.archive.get(child.hash()).val_score:.1%} (best {s.archive.best().val_score:.1%})"
                      f"{self._of()}")
        return True

    def _of(self) -> str:
        """`` on OBJECTIVE`` after a score that is not success, else nothing."""
        label = self.evaluator.objective.label()
        return "" if label == "success" else f" on {label}"

    async def _propose(self, ctx: ProposalContext) -> Proposal | None:
        """A validated proposal, or ``None`` after ``max_invalid`` + 1 invalid ones."""
        s = self.state
        for _ in range(self.config.max_invalid + 1):
            try:
                proposal = await self.proposer.propose(ctx)
                proposal = self._validate(ctx.parent, proposal)
            except InvalidProposal as exc:
                s.account.invalid += 1
                s.invalid_reasons.append(str(exc))
                self.on_event(f"#{ctx.iteration}: invalid proposal: {exc}")
                if isinstance(exc, NothingToPropose):
                    s.exhausted.append(ctx.parent.hash)
                    return None
                continue
            s.account.proposals += 1
            return proposal
        return None

    def _validate(self, parent: Candidate, proposal: Proposal) -> Proposal:
        """``proposal`` with lineage set, or :class:`InvalidProposal`."""
        spec = proposal.spec
        if not spec.parents:
            spec = spec.model_copy(update={"parents": [parent.hash]})
        h = spec.hash()
        for name, text in spec.components.items():
            if len(text) > MAX_COMPONENT_CHARS:
                raise InvalidProposal(f"component {name!r} is longer than {MAX_COMPONENT_CHARS} characters")
        if h == parent.hash:
            raise InvalidProposal("the proposal does not change the parent")
        if self.state.archive.has(h):
            raise InvalidProposal("the proposal repeats an archived candidate")
        if any(r.child_hash == h for rs in self.state.rejected.values() for r in rs):
            raise InvalidProposal("the proposal repeats a rejected child")
        return proposal.model_copy(update={"spec": spec})
