"""The SQL aggregates of a real SQLite store agree with the same sums over Trajectory
objects; reliability, cost and report models computed from them."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from stats_helpers import make_table

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.core.manifest import RunManifest
from sharpen.core.messages import Message, Usage
from sharpen.core.outcome import Outcome
from sharpen.core.registry import PluginRef
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Trajectory
from sharpen.stats.cost import FrontierPoint, cost_summary, frontier
from sharpen.stats.reliability import consistency, reliability, robustness
from sharpen.stats.report import RunReport, build_report, load_table
from sharpen.stats.taskdata import TaskTable, aggregate_trajectories
from sharpen.store import Store
from sharpen.store.aggregate import run_aggregate


def _traj(run_id: str, task: TaskSpec, epoch: int, outcome: Outcome | None, *, cost: float | None = 0.001,
          confidence: float | None = None, safety: int = 0, seconds: float = 1.5) -> Trajectory:
    tid = uuid.uuid4().hex
    if outcome is not None and confidence is not None:
        outcome = outcome.model_copy(update={"components": {**outcome.components, "confidence": confidence}})
    start = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=epoch, seconds=hash(task.id) % 50)
    fb = [Feedback(source="execution", name="tests_passed", value=1.0,
                   target=FeedbackTarget(kind="trajectory", run_id=run_id, trajectory_id=tid))]
    fb += [Feedback(source="safety", name="unsafe", value=True,
                    target=FeedbackTarget(kind="trajectory", run_id=run_id, trajectory_id=tid))
           for _ in range(safety)]
    return Trajectory(id=tid, run_id=run_id, task=task, agent_hash="x", epoch=epoch, outcome=outcome,
                      messages=[Message(role="user", content="hi " * 50)], feedback=fb,
                      usage=Usage(input_tokens=100 + epoch, output_tokens=20, calls=1, cost_usd=cost),
                      started_at=start, ended_at=start + timedelta(seconds=seconds))


@pytest.fixture
def store_and_trajs(url: str) -> tuple[Store, str, list[Trajectory]]:
    """A stored run on each backend (the aggregate's SQL differs between them)."""
    store = Store(url)
    spec = AgentSpec(name="t")
    tasks = [TaskSpec(env="code", id=f"gen/t/{i}", seed=i,
                      metadata={"cluster": f"c{i // 2}"} if i < 6 else {}) for i in range(9)]
    run_id = "run1"
    store.create_run(RunManifest(run_id=run_id, env=PluginRef(name="code"), agent_hash=spec.hash(),
                                 task_ids=[t.id for t in tasks], epochs=3, seed=0, config_hash="h"),
                     spec, tasks)
    rng = np.random.default_rng(0)
    trajs = []
    for e in range(3):
        for i, t in enumerate(tasks):
            if i == 8:
                outcome = Outcome(success=False, error_kind="infra", error="429")  # never scored
            elif i == 7 and e == 2:
                outcome = None  # no verdict stored
            elif i == 6 and e == 1:
                outcome = Outcome(success=False, error_kind="env", error="boom")
            else:
                outcome = Outcome(success=bool(rng.random() < 0.5), reward=0.5)
            trajs.append(_traj(run_id, t, e, outcome, cost=None if (i == 3 and e == 0) else 0.001,
                               confidence=float(rng.random()) if i % 2 else None,
                               safety=1 if (i == 2 and e == 1) else 0, seconds=1.0 + i / 7))
    for t in trajs:
        assert store.save_trajectory(t)
    return store, run_id, trajs


def test_sql_aggregate_equals_the_trajectory_path(store_and_trajs) -> None:
    store, run_id, trajs = store_and_trajs
    sql = run_aggregate(store, run_id)
    py = aggregate_trajectories(run_id, store.iter_trajectories(run_id, with_steps=False))
    mem = aggregate_trajectories(run_id, trajs)
    for other in (py, mem):
        assert sql.errors == other.errors == {"infra": 3, "unscored": 1, "env": 1}
        assert [t.task_hash for t in sql.tasks] == [t.task_hash for t in other.tasks]
        for a, b in zip(sql.tasks, other.tasks, strict=True):
            assert (a.task_id, a.metadata, a.attempts, a.counted, a.successes, a.input_tokens,
                    a.output_tokens, a.cost_unknown) == (b.task_id, b.metadata, b.attempts, b.counted,
                                                         b.successes, b.input_tokens, b.output_tokens,
                                                         b.cost_unknown)
            assert a.cost_usd == pytest.approx(b.cost_usd)
            assert a.episode_seconds == pytest.approx(b.episode_seconds, abs=0.003 * a.attempts)
        assert (sql.safety_trajectories, sql.safety_records) == (other.safety_trajectories,
                                                                 other.safety_records) == (1, 1)
        assert [(c.bin, c.n, c.successes) for c in sql.calibration] == [
            (c.bin, c.n, c.successes) for c in other.calibration]
        for a, b in zip(sql.calibration, other.calibration, strict=True):
            assert a.confidence_sum == pytest.approx(b.confidence_sum)
            assert a.squared_error_sum == pytest.approx(b.squared_error_sum)


def test_report_of_a_stored_run(store_and_trajs) -> None:
    store, run_id, _ = store_and_trajs
    rep = build_report(store, run_id)
    assert RunReport.model_validate_json(rep.model_dump_json()) == rep
    assert rep.accuracy.n_tasks == 8 and rep.accuracy.n_unscored == 1
    assert rep.accuracy.cluster_key == "cluster" and rep.accuracy.n_clusters == 5
    assert rep.errors.excluded == {"env": 1, "infra": 3, "unscored": 1}
    assert not rep.errors.trustworthy  # 5 of 27 errored
    assert not rep.trustworthy and any("not trustworthy" in w for w in rep.alarms)
    assert rep.cost.cost_usd is None and rep.cost.cost_unknown_attempts == 1
    assert rep.reliability.calibration.available and rep.reliability.safety.flagged == 1
    assert [v.status for v in rep.validity] == ["missing", "missing"]
    assert len(rep.accuracy.pass_at_k) == 3 and rep.accuracy.pass_at_k[2].n_undefined == 2


def test_consistency() -> None:
    c = consistency(make_table([3, 3, 3, 1], [0, 3, 1, 1]))
    assert c.available and c.tasks == 3
    assert c.all_agree == pytest.approx(2 / 3)
    assert c.mean_task_variance == pytest.approx((0 + 0 + 1 / 3) / 3)
    assert not consistency(make_table([1, 1], [0, 1])).available


def test_robustness_only_under_declared_perturbations() -> None:
    assert robustness(make_table([2, 2], [1, 2])).declared is False
    meta = [{}, {}, {"perturbation": "paraphrase", "base_task": "t/0"},
            {"perturbation": "paraphrase", "base_task": "t/1"}, {"perturbation": "tool_order"}]
    r = robustness(make_table([2, 2, 2, 2, 2], [2, 2, 1, 0, 2], metadata=meta))
    assert r.declared
    para, order = r.perturbations
    assert (para.name, para.tasks, para.paired) == ("paraphrase", 2, True)
    assert para.rate == pytest.approx(0.25) and para.base_rate == 1.0 and para.drop == pytest.approx(0.75)
    assert (order.paired, order.base_rate, order.drop) == (False, 1.0, 0.0)


def test_calibration_ece_and_brier_by_hand() -> None:
    task = TaskSpec(env="code", id="x")
    trajs = [_traj("r", task, e, Outcome(success=s), confidence=p)
             for e, (p, s) in enumerate([(0.95, True), (0.92, False), (0.15, False), (0.1, False)])]
    rel = reliability(TaskTable.from_aggregate(aggregate_trajectories("r", trajs)))
    cal = rel.calibration
    # bin 9: conf 0.935, success 0.5 (2 of 4); bins 1: conf 0.125, success 0 (2 of 4)
    assert cal.ece == pytest.approx(0.5 * abs(0.5 - 0.935) + 0.5 * 0.125)
    assert cal.brier == pytest.approx((0.05**2 + 0.92**2 + 0.15**2 + 0.1**2) / 4)
    assert cal.n == 4 and rel.safety.flagged == 0
    assert not reliability(make_table([1], [1])).calibration.available


def test_cost_unknown_stays_unknown_and_frontier() -> None:
    table = make_table([2, 2], [1, 2])
    table.cost_usd[:] = [0.2, 0.1]
    table.input_tokens[:] = [100, 300]
    s = cost_summary(table)
    assert s.cost_usd == pytest.approx(0.3) and s.cost_per_success == pytest.approx(0.1)
    assert s.tokens_per_task == 100 and s.tokens_per_success == pytest.approx(400 / 3)
    table.cost_unknown[0] = 1
    s = cost_summary(table)
    assert s.cost_usd is None and s.cost_per_task is None and s.cost_per_success is None

    def pt(label: str, acc: float, usd: float | None, tokens: float) -> FrontierPoint:
        return FrontierPoint(run_id=label, label=label, accuracy=acc, ci_low=0, ci_high=1,
                             cost_per_task=usd, tokens_per_task=tokens)

    f = frontier([pt("A", 0.5, 0.01, 100), pt("B", 0.4, 0.02, 50), pt("C", 0.7, 0.05, 900)])
    assert f.axis == "cost_usd" and [p.on_frontier for p in f.points] == [True, False, True]
    f = frontier([pt("A", 0.5, None, 100), pt("B", 0.4, 0.02, 50), pt("C", 0.7, 0.05, 900)])
    assert f.axis == "tokens" and [p.on_frontier for p in f.points] == [True, True, True]


def test_load_table_of_an_empty_run(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'e.db'}")
    spec = AgentSpec()
    store.create_run(RunManifest(run_id="e", env=PluginRef(name="code"), agent_hash=spec.hash(),
                                 task_ids=["a"], epochs=1, seed=0, config_hash="h"),
                     spec, [TaskSpec(env="code", id="a")])
    table = load_table(store, "e")
    assert len(table) == 0
    rep = build_report(store, "e")
    assert rep.accuracy.success.value is None and rep.errors.attempts == 0


def test_plot_without_matplotlib_is_a_clear_user_error(tmp_path: Path, monkeypatch) -> None:
    import sys

    from sharpen.core.errors import UserError
    from sharpen.stats.plot import plot_frontier

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now fails
    f = frontier([FrontierPoint(run_id="a", label="A", accuracy=0.5, ci_low=0.4, ci_high=0.6,
                                cost_per_task=None, tokens_per_task=10)])
    with pytest.raises(UserError) as err:
        plot_frontier(f, tmp_path)
    assert "matplotlib" in err.value.message and "sharpen[plot]" in (err.value.fix or "")
