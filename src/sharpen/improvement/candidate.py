"""Candidates and the archive: every accepted AgentSpec with its validation scores.

Parent selection follows GEPA: a candidate is on the Pareto front when it is the best (ties
included) on at least one validation task, and parents are drawn from the front with
probability proportional to how many tasks each one leads — so a candidate that is the only
one solving some task keeps getting chances even when its mean is lower. Scores are the
objective's (:mod:`sharpen.improvement.objective`); a task a candidate was not scored on (a
judge error) is left out of its comparisons, never read as a 0.
"""

from __future__ import annotations

import random
from collections.abc import Collection

from pydantic import BaseModel, Field

from sharpen.core.agent_spec import AgentSpec


class Candidate(BaseModel):
    """One accepted AgentSpec."""

    spec: AgentSpec
    """The spec (its ``parents`` hold the lineage)."""
    hash: str
    """``spec.hash()``."""
    proposer: str
    """Who made it (``seed`` for the starting spec)."""
    change: str = ""
    """What the proposer changed, in one line."""
    iteration: int = 0
    """Engine iteration that accepted it (0 = seed)."""
    val: dict[str, float] = Field(default_factory=dict)
    """Objective score (success by default) per validation task hash it was scored on."""

    @property
    def val_score(self) -> float:
        """Mean validation score over the tasks it was scored on."""
        return sum(self.val.values()) / len(self.val) if self.val else 0.0


class Archive(BaseModel):
    """Accepted candidates in order of acceptance."""

    candidates: list[Candidate] = Field(default_factory=list)
    """Candidates; the first one is the seed."""

    def add(self, candidate: Candidate) -> None:
        """Append ``candidate``."""
        self.candidates.append(candidate)

    def get(self, spec_hash: str) -> Candidate:
        """The candidate with ``spec_hash``."""
        return next(c for c in self.candidates if c.hash == spec_hash)

    def has(self, spec_hash: str) -> bool:
        """Whether a candidate with ``spec_hash`` was accepted."""
        return any(c.hash == spec_hash for c in self.candidates)

    def best(self) -> Candidate:
        """Highest mean validation success. Ties go to the later candidate: every archived
        child beat its parent on a gate, so on equal validation it has more evidence."""
        return max(self.candidates, key=lambda c: (c.val_score, c.iteration))

    def front(self) -> dict[str, int]:
        """Pareto front: candidate hash -> number of validation tasks it leads (ties count
        for every leader). A candidate leading no task is not on the front."""
        tasks = sorted({t for c in self.candidates for t in c.val})
        wins: dict[str, int] = {}
        for t in tasks:
            scored = [c for c in self.candidates if t in c.val]
            top = max(c.val[t] for c in scored)
            for c in scored:
                if c.val[t] == top:
                    wins[c.hash] = wins.get(c.hash, 0) + 1
        # A candidate that only ties on tasks everyone solves is still a leader there; drop
        # those that are dominated on every task by one other candidate.
        return {h: n for h, n in wins.items() if not self._dominated(h)} or wins

    def _dominated(self, spec_hash: str) -> bool:
        me = self.get(spec_hash)
        for other in self.candidates:
            if other.hash == spec_hash:
                continue
            if any(t not in other.val for t in me.val):
                continue  # no score where ``me`` has one: nothing shows ``other`` is as good
            ge = all(other.val[t] >= v for t, v in me.val.items())
            gt = any(other.val[t] > v for t, v in me.val.items())
            if ge and gt:
                return True
        return False

    def select_parent(self, rng: random.Random, exclude: Collection[str] = ()) -> Candidate | None:
        """A parent from the Pareto front, weighted by tasks led, leaving out ``exclude``
        (parents the proposer has nothing more for); ``None`` when no one is left."""
        front = {h: n for h, n in self.front().items() if h not in exclude}
        if not front:
            return None
        hashes = sorted(front, key=lambda h: [c.hash for c in self.candidates].index(h))
        chosen = rng.choices(hashes, weights=[front[h] for h in hashes], k=1)[0]
        return self.get(chosen)

    def lineage(self, spec_hash: str) -> list[Candidate]:
        """The chain seed → ... → ``spec_hash`` through first parents."""
        chain = [self.get(spec_hash)]
        while chain[-1].spec.parents and self.has(chain[-1].spec.parents[0]):
            chain.append(self.get(chain[-1].spec.parents[0]))
        return list(reversed(chain))

    def ancestors(self, spec_hash: str) -> set[str]:
        """Every archived ancestor of ``spec_hash`` (through all parents), itself included."""
        seen: set[str] = set()
        todo = [spec_hash]
        while todo:
            h = todo.pop()
            if h in seen or not self.has(h):
                continue
            seen.add(h)
            todo.extend(self.get(h).spec.parents)
        return seen
