"""The engine's checkpoint: everything needed to continue a run exactly where it stopped.

Written atomically (temp file + rename) after every iteration, so a killed run loses at most
the iteration in flight — and even that one's rollouts are found again in the store when
the resumed run repeats it with the same seeds.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from sharpen.core.errors import UserError
from sharpen.improvement.budget import Spend
from sharpen.improvement.candidate import Archive, Candidate
from sharpen.improvement.evaluate import EvalRecord
from sharpen.improvement.proposal import Rejection


class Account(BaseModel):
    """Post-run account of proposals."""

    iterations: int = 0
    """Iterations started."""
    proposals: int = 0
    """Valid proposals that reached their gate."""
    invalid: int = 0
    """Proposals rejected by validation (truncated, ``<think>``, too long, unchanged, repeats)."""
    skipped: int = 0
    """Iterations whose parent solved the whole minibatch (nothing for a child to beat)."""
    gated_out: int = 0
    """Children that did not beat their parent on the minibatch."""
    accepted: int = 0
    """Children that won their gate and were validated and archived."""
    judge_errors: int = 0
    """Train and val episodes the objective's judge left unscored (error kind ``judge``);
    always 0 with ``success``."""


class CurvePoint(BaseModel):
    """One point of the anytime curve."""

    rollouts: int
    """Rollouts spent when the point was taken."""
    tokens: int
    """Tokens spent (rollouts and proposers)."""
    best_val: float
    """Best validation success in the archive."""
    iteration: int
    """The iteration that took the point (0 for the seed; for the last point, the iterations
    completed)."""


class EngineState(BaseModel):
    """The whole mutable state of an :class:`~sharpen.improvement.engine.Engine`."""

    iteration: int = 0
    """Iterations completed."""
    idle: int = 0
    """Iterations in a row without a valid proposal (``max_idle`` stops the run)."""
    archive: Archive = Field(default_factory=Archive)
    """Accepted candidates."""
    spend: Spend = Field(default_factory=Spend)
    """Budget used."""
    account: Account = Field(default_factory=Account)
    """Counts of what happened to proposals."""
    rng_state: list[Any] | None = None
    """``random.Random.getstate()`` after the last completed iteration."""
    cache: dict[str, EvalRecord] = Field(default_factory=dict)
    """(spec, task) evaluations already run."""
    rejected: dict[str, list[Rejection]] = Field(default_factory=dict)
    """Rejection log per parent hash."""
    invalid_reasons: list[str] = Field(default_factory=list)
    """Why proposals were invalid, in order (for the account)."""
    curve: list[CurvePoint] = Field(default_factory=list)
    """Anytime curve."""
    exhausted: list[str] = Field(default_factory=list)
    """Parents the proposer said it has nothing more for (never drawn again)."""
    proposer_state: dict[str, Any] = Field(default_factory=dict)
    """What the proposer learned (its ``state()``)."""
    stop_reason: str | None = None
    """Why the run stopped; ``None`` while it can go on."""

    def rollouts_to(self, candidate: Candidate) -> int:
        """Rollouts spent when ``candidate`` entered the archive: the curve point its iteration
        took (the seed's is the first). A winner that only ties an earlier candidate on
        validation still counts from its own acceptance."""
        return next((p.rollouts for p in self.curve if p.iteration == candidate.iteration), 0)

    def rng(self, seed: int) -> random.Random:
        """The RNG at the checkpoint (a fresh one seeded with ``seed`` at the start)."""
        rng = random.Random(seed)
        if self.rng_state is not None:
            version, internal, gauss = self.rng_state
            rng.setstate((version, tuple(internal), gauss))
        return rng

    def save_rng(self, rng: random.Random) -> None:
        """Remember ``rng``'s state."""
        version, internal, gauss = rng.getstate()
        self.rng_state = [version, list(internal), gauss]

    def save(self, path: Path) -> None:
        """Write atomically to ``path``."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(self.model_dump_json())
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> EngineState:
        """Read a checkpoint; a damaged one is a UserError naming the file."""
        try:
            return cls.model_validate_json(path.read_text())
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot read the improvement checkpoint {path}: {exc}",
                            "delete it to start over, or rerun without --resume") from None
