"""IRT over stored runs: the ability section of ``sharpen report`` and the ability line of
``sharpen compare`` (the model itself is :mod:`sharpen.stats.irt`).

``sharpen report RUN`` fits over this run and, for every *other* agent spec (manifest
``agent_hash``), the newest finished run on the same environment (name and args) that shares
at least one task with it; with no such run there is nothing to fit and the section only says
what is needed — the store is read for run records only, so a lone run's report costs nothing
more. ``sharpen compare A B ...`` fits over the compared runs and gives each run's ability
difference from ``A`` with a delta-method interval from the fit's covariance.

Cells are (run, task) valid trials and successes over epochs, tasks matched by hash as in
paired comparisons. The 2PL model is fitted when at least :data:`MIN_2PL_AGENTS` agents are
(fewer say little about a task's discrimination), the 1PL otherwise; above
:data:`MAX_TASKS` tasks the fit is skipped, so that a report stays quick.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel

from sharpen.stats.irt import Z95, IRTFit, IRTModel, Responses, ability_difference, fit
from sharpen.stats.taskdata import TaskTable
from sharpen.store import RunRecord, Store
from sharpen.store.aggregate import run_aggregate

MIN_2PL_AGENTS = 3
"""Fewest agents for which the 2PL (with per-task discrimination) is fitted."""
MAX_TASKS = 5000
"""Most tasks fitted (the optimiser's time grows with the parameters, two per task)."""
TOP = 5
"""Tasks listed as hardest and as most discriminating."""
RUN_LIMIT = 200
"""Newest finished runs on the environment searched for other agent specs."""


class AgentAbility(BaseModel):
    """One agent spec's ability in the joint fit."""

    rank: int
    """1 for the most able."""
    agent_name: str
    """AgentSpec name."""
    agent_hash: str
    """AgentSpec content hash."""
    run_id: str
    """The run that stands for the spec (this run, or the spec's newest finished run)."""
    this_run: bool
    """Whether it is the reported run."""
    theta: float
    """Ability (MAP), on the fit's scale: the agents' prior is N(0, 1)."""
    low: float
    """Lower end of the 95% Laplace interval."""
    high: float
    """Upper end."""
    success: float | None
    """The run's mean success over its scored tasks, for comparison."""
    tasks: int
    """Tasks of the run in the fit."""


class TaskDifficulty(BaseModel):
    """One task's parameters in the joint fit."""

    task_id: str
    difficulty: float
    """The ability at which the task is solved half the time."""
    low: float
    """Lower end of the difficulty's 95% Laplace interval."""
    high: float
    """Upper end."""
    discrimination: float
    """1.0 under the 1PL."""
    solved: int
    """Successful valid trials over the fitted runs."""
    attempts: int
    """Valid trials over the fitted runs."""


class IRTSection(BaseModel):
    """The IRT section of a run's report."""

    available: bool
    """Whether a fit was made."""
    note: str
    """What was fitted, or why nothing was and what is needed."""
    model: IRTModel | None = None
    """``1pl`` or ``2pl``; ``None`` without a fit."""
    tasks: int = 0
    """Tasks fitted (the union of the runs' scored tasks)."""
    converged: bool = True
    """Whether the optimiser converged."""
    agents: list[AgentAbility] = []
    """Every fitted spec, most able first."""
    hardest: list[TaskDifficulty] = []
    """The :data:`TOP` most difficult tasks."""
    most_discriminating: list[TaskDifficulty] = []
    """The :data:`TOP` most discriminating tasks (2PL only)."""


class AbilityDifference(BaseModel):
    """One compared run's ability minus the baseline's, from the joint fit."""

    label_b: str
    """``B``, ``C``, ..."""
    difference: float
    """``theta_b - theta_a``."""
    se: float
    """Delta-method standard error from the fit's covariance."""
    low: float
    """Lower end of the 95% interval."""
    high: float
    """Upper end."""
    theta_a: float
    theta_b: float


class IRTComparison(BaseModel):
    """The joint fit over compared runs."""

    model: IRTModel
    tasks: int
    """Tasks fitted (the union of the runs' scored tasks)."""
    converged: bool
    differences: list[AbilityDifference]
    """``B`` vs ``A``, ``C`` vs ``A``, ..."""


def responses(tables: Sequence[tuple[str, TaskTable]]) -> tuple[Responses, dict[str, str]]:
    """The response matrix of labelled runs — rows in ``tables`` order, columns the scored
    tasks' hashes — and each task hash's id."""
    ids: dict[str, str] = {}
    for _, t in tables:
        for h, task_id, n in zip(t.task_hash, t.task_id, t.n, strict=True):
            if n > 0:
                ids.setdefault(h, task_id)
    col = {h: j for j, h in enumerate(ids)}
    s = np.zeros((len(tables), len(ids)), dtype=int)
    n_ = np.zeros_like(s)
    for i, (_, t) in enumerate(tables):
        for h, n, c in zip(t.task_hash, t.n, t.c, strict=True):
            if n > 0:
                s[i, col[h]] += int(c)
                n_[i, col[h]] += int(n)
    return Responses(agents=[label for label, _ in tables], tasks=list(ids),
                     successes=s.tolist(), attempts=n_.tolist()), ids


def model_for(agents: int) -> IRTModel:
    """The model fitted over ``agents`` agents (see the module doc)."""
    return "2pl" if agents >= MIN_2PL_AGENTS else "1pl"


def comparable_runs(store: Store, rec: RunRecord) -> list[RunRecord]:
    """For every agent spec other than ``rec``'s, its newest finished run on ``rec``'s
    environment (name and args) sharing a task id with ``rec``; newest first."""
    mine = set(rec.manifest.task_ids)
    seen = {rec.manifest.agent_hash}
    out: list[RunRecord] = []
    for r in store.list_runs(RUN_LIMIT, env=rec.manifest.env.name, status="finished"):
        h = r.manifest.agent_hash
        if (h not in seen and r.manifest.env == rec.manifest.env and r.n_counted
                and mine.intersection(r.manifest.task_ids)):
            seen.add(h)
            out.append(r)
    return out


def section_from_runs(runs: Sequence[tuple[RunRecord, TaskTable]], this_run: str) -> IRTSection:
    """The IRT section of run ``this_run`` from the fitted runs, one per spec (pure)."""
    if len(runs) < 2:
        return IRTSection(available=False, note=(
            "needs a finished run of at least one other agent spec on this environment (same "
            "args) sharing its tasks: `sharpen run` another agent (e.g. --agent-name null, "
            "reference) on the same tasks"))
    if not any(t.valid.any() for r, t in runs if r.id == this_run):
        return IRTSection(available=False, note="this run has no scored task yet: nothing to "
                          "place it by")
    resp, ids = responses([(r.id, t) for r, t in runs])
    if len(resp.tasks) > MAX_TASKS:
        return IRTSection(available=False, note=(
            f"skipped: {len(resp.tasks)} tasks, more than {MAX_TASKS} (to keep the report quick; "
            "sharpen.stats.irt.fit fits any number)"))
    model = model_for(len(runs))
    result = fit(resp, model)
    order = sorted(range(len(runs)), key=lambda i: -result.abilities[i].theta)
    agents = []
    for rank, i in enumerate(order, start=1):
        rec, table, ab = runs[i][0], runs[i][1], result.abilities[i]
        rates = table.c[table.valid] / table.n[table.valid]
        agents.append(AgentAbility(
            rank=rank, agent_name=rec.agent.name, agent_hash=rec.manifest.agent_hash,
            run_id=rec.id, this_run=rec.id == this_run, theta=ab.theta, low=ab.low, high=ab.high,
            success=float(rates.mean()) if rates.size else None, tasks=int(table.valid.sum())))
    tasks = _tasks(result, ids)
    names = ", ".join(a.agent_name for a in agents)
    return IRTSection(
        available=True, model=model, tasks=len(resp.tasks), converged=result.converged,
        note=f"{model.upper()} fit over {len(runs)} agent specs ({names}) on {len(resp.tasks)} tasks",
        agents=agents, hardest=sorted(tasks, key=lambda t: -t.difficulty)[:TOP],
        most_discriminating=(sorted(tasks, key=lambda t: -t.discrimination)[:TOP]
                             if model == "2pl" else []))


def _tasks(result: IRTFit, ids: dict[str, str]) -> list[TaskDifficulty]:
    return [TaskDifficulty(task_id=ids[t.task], difficulty=t.difficulty,
                           low=t.difficulty - Z95 * t.difficulty_se,
                           high=t.difficulty + Z95 * t.difficulty_se,
                           discrimination=t.discrimination, solved=t.solved, attempts=t.attempts)
            for t in result.tasks]


def run_section(store: Store, rec: RunRecord, table: TaskTable) -> IRTSection:
    """The IRT section of stored run ``rec`` (its ``table`` already loaded): other runs'
    tables are loaded, and the model fitted, only when :func:`comparable_runs` finds some."""
    others = comparable_runs(store, rec)
    runs = [(rec, table)] + [(r, TaskTable.from_aggregate(run_aggregate(store, r.id)))
                             for r in others]
    return section_from_runs(runs, rec.id)


def compare_abilities(labels: Sequence[str], tables: Sequence[TaskTable]) -> IRTComparison | None:
    """The joint fit over compared runs (the first the baseline) and each other run's ability
    difference from it; ``None`` when a run has no scored task (its ability would be the
    prior's) or there are more than :data:`MAX_TASKS` tasks."""
    resp, _ = responses(list(zip(labels, tables, strict=True)))
    if not all(t.valid.any() for t in tables) or len(resp.tasks) > MAX_TASKS:
        return None
    model = model_for(len(tables))
    result = fit(resp, model)
    diffs = []
    for k in range(1, len(tables)):
        d, se = ability_difference(result, 0, k)
        diffs.append(AbilityDifference(label_b=labels[k], difference=d, se=se, low=d - Z95 * se,
                                       high=d + Z95 * se, theta_a=result.abilities[0].theta,
                                       theta_b=result.abilities[k].theta))
    return IRTComparison(model=model, tasks=len(resp.tasks), converged=result.converged,
                         differences=diffs)
