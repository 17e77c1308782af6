"""RunReport: everything ``sharpen report`` says about one run, as one pydantic model.

``sharpen report RUN --json`` prints :meth:`RunReport.model_dump_json`; the terminal view
renders the same object. :func:`build_report` reads the store once through the SQL
aggregates of :mod:`sharpen.store.aggregate` (no message or step is loaded), so a report
over 100,000 trajectories takes about a second (``benchmarks/report_speed.py``).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from pydantic import BaseModel

from sharpen.core.registry import PluginRef
from sharpen.stats.accuracy import Accuracy, accuracy
from sharpen.stats.cost import CostSummary, cost_summary
from sharpen.stats.irt_runs import IRTSection, run_section
from sharpen.stats.judged import CriterionScore, run_scores
from sharpen.stats.power import PowerPlan, pilot_model, plan
from sharpen.stats.reliability import Reliability, reliability
from sharpen.stats.routing import RoutingSection, routing_section
from sharpen.stats.taskdata import TaskTable
from sharpen.stats.validity import ValidityCheck, validity_checks
from sharpen.store import RunRecord, Store
from sharpen.store.aggregate import run_aggregate

ERROR_SHARE_LIMIT = 0.10
"""Above this share of errored attempts a report says its numbers are not trustworthy."""


class RunInfo(BaseModel):
    """Which run the report is about."""

    run_id: str
    """Run id."""
    created_at: datetime
    """When it was created (UTC)."""
    status: str
    """``finished``, ``interrupted``, ``running`` or ``failed``."""
    env: PluginRef
    """Environment ``{name, args}``."""
    model: str
    """Model plug-in name (``none`` for agents that need no model)."""
    agent: str
    """Agent plug-in name (``tool``, ``null``, ``reference``, ...)."""
    agent_name: str
    """AgentSpec name."""
    agent_hash: str
    """AgentSpec content hash."""
    tasks_planned: int
    """Tasks in the run's manifest."""
    epochs_planned: int
    """Epochs in the run's manifest."""
    wall_seconds: float | None
    """The run's wall time from its summary (``None`` before it ended)."""
    decoding: str | None = None
    """How replies were decoded (``free``, ``constrained (grammar)``, ...); ``None`` for runs
    made before the manifest recorded it."""

    @classmethod
    def of(cls, rec: RunRecord) -> RunInfo:
        m = rec.manifest
        wall = (rec.summary or {}).get("wall_seconds")
        return cls(run_id=rec.id, created_at=rec.created_at, status=rec.status, env=m.env,
                   model=rec.agent.model.name, agent=rec.agent.agent.name, agent_name=rec.agent.name,
                   agent_hash=m.agent_hash, tasks_planned=len(m.task_ids), epochs_planned=m.epochs,
                   wall_seconds=None if wall is None else float(wall),
                   decoding=m.extra.get("decoding"))


class ErrorSummary(BaseModel):
    """Attempts left out of every rate, and whether that undermines the numbers."""

    attempts: int
    """Attempts stored."""
    counted: int
    """Valid trials (verdicts and agent failures)."""
    excluded: dict[str, int]
    """Excluded attempts by error kind (``infra``, ``env``, ``judge``, ``user_sim``, ``unscored``)."""
    excluded_share: float
    """Excluded attempts / attempts."""
    limit: float = ERROR_SHARE_LIMIT
    """Share above which the numbers are flagged."""
    trustworthy: bool
    """``excluded_share <= limit``."""


def error_summary(table: TaskTable) -> ErrorSummary:
    """The :class:`ErrorSummary` of ``table``."""
    attempts = int(table.attempts.sum())
    counted = int(table.n.sum())
    share = (attempts - counted) / attempts if attempts else 0.0
    return ErrorSummary(attempts=attempts, counted=counted, excluded=dict(sorted(table.errors.items())),
                        excluded_share=share, trustworthy=share <= ERROR_SHARE_LIMIT)


class RunReport(BaseModel):
    """The report of one run (docs/evaluation.md defines every number)."""

    run: RunInfo
    """Which run."""
    errors: ErrorSummary
    """Excluded attempts."""
    accuracy: Accuracy
    """Mean success, pass@k, pass^k with intervals."""
    cost: CostSummary
    """Tokens, dollars, time per task and per success."""
    reliability: Reliability
    """Consistency, robustness, calibration, safety."""
    power: PowerPlan
    """Tasks × epochs needed to detect ``power.effect`` against another agent, and what
    this run's design can detect."""
    validity: list[ValidityCheck]
    """Null-agent ceiling and reference-agent floor of the environment."""
    trustworthy: bool
    """``False`` when any alarm is raised."""
    alarms: list[str]
    """Why the numbers are not trustworthy: a failed validity check, too many errored
    attempts. Printed in a red panel."""
    warnings: list[str]
    """What else weakens the numbers (unscored tasks, an unfinished run, a missing validity
    run)."""
    judges: list[CriterionScore] = []
    """Judge scores per judge and criterion (``sharpen judge``), with intervals over tasks."""
    judge_errors: dict[str, int] = {}
    """Judgements that gave no verdict (error kind ``judge``), per judge: left out of the
    judge scores, never counted against the agent."""
    irt: IRTSection | None = None
    """Ability of this run's agent spec next to other specs' on the same tasks, and the
    hardest tasks (:mod:`sharpen.stats.irt_runs`); ``None`` in reports made before it."""
    routing: RoutingSection | None = None
    """Calls per route and the router's cost–success point next to each fixed route's, for
    a run of the ``router`` model (:mod:`sharpen.stats.routing`); ``None`` for any other."""


def report_from_table(
    rec: RunRecord, table: TaskTable, validity: list[ValidityCheck], *, effect: float = 0.10,
    alpha: float = 0.05, power: float = 0.8,
) -> RunReport:
    """Assemble the report from an aggregated run (pure: no store access, no randomness)."""
    acc = accuracy(table)
    errs = error_summary(table)
    epochs = acc.trials_max or rec.manifest.epochs
    pw = plan(pilot_model(table), effect, alpha=alpha, power=power, tasks=acc.n_tasks, epochs=epochs)
    alarms = [v.message for v in validity if v.status == "failed"]
    if not errs.trustworthy:
        kinds = ", ".join(f"{k} {v}" for k, v in errs.excluded.items())
        alarms.append(
            f"{errs.excluded_share:.1%} of attempts errored ({kinds}), more than "
            f"{ERROR_SHARE_LIMIT:.0%}: these numbers are not trustworthy"
            + ("; `sharpen run ... --resume` retries infra errors" if "infra" in errs.excluded else "")
        )
    warnings: list[str] = []
    if acc.n_unscored:
        warnings.append(f"{acc.n_unscored} task(s) have no valid trial (every attempt errored) "
                        "and are left out of every rate")
    planned = len(rec.manifest.task_ids) * rec.manifest.epochs
    if errs.attempts < planned:
        warnings.append(f"run is {rec.status}: {errs.attempts} of {planned} attempts stored")
    warnings += [v.message for v in validity if v.status == "missing"]
    return RunReport(
        run=RunInfo.of(rec), errors=errs, accuracy=acc, cost=cost_summary(table),
        reliability=reliability(table), power=pw, validity=validity, trustworthy=not alarms,
        alarms=alarms, warnings=warnings,
    )


def load_table(store: Store, run_id: str) -> TaskTable:
    """The :class:`TaskTable` of a stored run, aggregated in SQL."""
    return TaskTable.from_aggregate(run_aggregate(store, run_id))


def build_report(store: Store, run_id: str, **kwargs: float) -> RunReport:
    """The report of stored run ``run_id`` (a full id; see ``Store.resolve_run``).
    ``kwargs`` go to :func:`report_from_table`."""
    rec = store.get_run(run_id)
    table = load_table(store, run_id)
    validity = validity_checks(store, rec.manifest.env, len(rec.manifest.task_ids))
    report = report_from_table(rec, table, validity, **kwargs)
    report.judges = run_scores(store, run_id)
    failed = Counter(j.judge for j in store.judgements(run_id) if j.status == "error")
    report.judge_errors = dict(sorted(failed.items()))
    report.irt = run_section(store, rec, table)
    report.routing = routing_section(store, rec)
    return report
