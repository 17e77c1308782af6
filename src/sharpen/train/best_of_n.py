"""Best-of-N selection over a stored run: N attempts per task (a run with ``epochs=N``), one kept
per task — the one a scorer rates highest — so a reward model (or any pointwise judge) can pick
an answer without the verifier.

The scores are judge feedback already stored on the run (``sharpen judge RUN --judge
reward_model --judge-arg path=CKPT`` stores ``reward``; any pointwise judge's numeric record
works): :func:`best_of_n` reads the newest current record of ``name`` on each trajectory and
keeps, per task, the highest (a tie goes to the lower epoch, so the choice is deterministic).
:func:`random_of_n` is the control: one attempt per task drawn at random with a seeded
generator. The kept trajectory's outcome is the environment's verdict on that attempt, which
the selector never reads.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from sharpen.core.errors import UserError
from sharpen.core.feedback import Feedback
from sharpen.core.trajectory import Trajectory
from sharpen.store import Store


def _current(records: Iterable[Feedback], name: str) -> float | None:
    records = list(records)
    replaced = {f.supersedes for f in records if f.supersedes}
    found = [f for f in records if f.source == "judge" and f.name == name and f.id not in replaced
             and isinstance(f.value, (int, float)) and not isinstance(f.value, bool)]
    if not found:
        return None
    value = max(found, key=lambda f: f.created_at).value
    assert isinstance(value, (int, float))
    return float(value)


def _by_task(trajectories: Iterable[Trajectory]) -> dict[str, list[Trajectory]]:
    groups: dict[str, list[Trajectory]] = {}
    for t in trajectories:
        if t.outcome is not None and t.outcome.counts:
            groups.setdefault(t.task.hash(), []).append(t)
    return {k: sorted(g, key=lambda t: t.epoch) for k, g in groups.items()}


def best_of_n(store: Store, run_id: str, name: str = "reward") -> dict[str, Trajectory]:
    """Task hash → the attempt of run ``run_id`` with the highest ``name`` judge score (module
    doc). Attempts that did not end, or ended in a non-agent error, are not candidates; an
    attempt without a score is never preferred to one with. :class:`UserError` when no
    attempt of the run has a score."""
    out: dict[str, Trajectory] = {}
    scored = 0
    for task, group in _by_task(store.iter_trajectories(run_id, with_steps=False,
                                                        with_messages=False)).items():
        scores = [_current(store.feedback_for(t.id), name) for t in group]
        scored += sum(s is not None for s in scores)
        best = max(range(len(group)),
                   key=lambda i: (scores[i] is not None, scores[i] or 0.0, -group[i].epoch))
        out[task] = group[best]
    if not scored:
        raise UserError(f"no attempt of run {run_id[:12]} has a {name!r} judge score",
                        f"judge it first: sharpen judge {run_id[:12]} --judge reward_model "
                        "--judge-arg path=<reward model>")
    return out


def random_of_n(store: Store, run_id: str, seed: int = 0) -> dict[str, Trajectory]:
    """Task hash → one attempt of run ``run_id`` drawn at random (seeded; the control)."""
    rng = random.Random(seed)
    groups = _by_task(store.iter_trajectories(run_id, with_steps=False, with_messages=False))
    return {task: rng.choice(group) for task, group in sorted(groups.items())}
