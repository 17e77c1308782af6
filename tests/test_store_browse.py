"""The store's browsing reads on a real SQLite file: one counting rule behind every rate, run
records with cost and time, listing filters, and two runs paired task by task."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sharpen.core import AgentSpec, Outcome, PluginRef, RunManifest, TaskSpec, Trajectory, Usage
from sharpen.store import Store, browse
from sharpen.store.aggregate import run_aggregate

T0 = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)

OUTCOMES: list[Outcome | None] = [
    Outcome(success=True, reward=1.0),
    Outcome(success=False, error_kind="agent"),
    Outcome(success=False),
    Outcome(success=False, error_kind="infra", error="503"),
    Outcome(success=True, error_kind="judge", error="the judge broke after a success"),
    Outcome(success=False, error_kind="env"),
    Outcome(success=False, error_kind="user_sim"),
    None,
]
"""Every kind of ending: counted passes and fails, each excluded error kind, no outcome."""


@pytest.fixture
def store(tmp_path: Path):
    st = Store(f"sqlite:///{tmp_path / 'browse.db'}")
    yield st
    st.close()


def tasks(n: int, env: str = "code") -> list[TaskSpec]:
    return [TaskSpec(env=env, id=f"t/{i}", seed=i, metadata={"difficulty": "easy" if i % 2 else "hard"})
            for i in range(n)]


def new_run(store: Store, run_id: str, ts: list[TaskSpec], *, env: str = "code", epochs: int = 1,
            created_at: datetime = T0, model: PluginRef | None = None) -> AgentSpec:
    spec = AgentSpec(name=f"spec-{run_id}", model=model or PluginRef(name="local"))
    store.create_run(RunManifest(run_id=run_id, created_at=created_at, env=PluginRef(name=env),
                                 agent_hash=spec.hash(), task_ids=[t.id for t in ts], epochs=epochs,
                                 seed=0, config_hash=run_id), spec, ts)
    return spec


def attempt(run_id: str, task: TaskSpec, spec: AgentSpec, epoch: int, outcome: Outcome | None, *,
            cost: float | None = 0.25, start: datetime = T0, seconds: float = 2.0) -> Trajectory:
    return Trajectory(run_id=run_id, task=task, agent_hash=spec.hash(), epoch=epoch, outcome=outcome,
                      usage=Usage(input_tokens=10, output_tokens=5, calls=1, cost_usd=cost),
                      started_at=start, ended_at=start + timedelta(seconds=seconds))


def test_every_rate_counts_by_the_one_rule(store: Store) -> None:
    ts = tasks(len(OUTCOMES))
    spec = new_run(store, "r", ts)
    for task, o in zip(ts, OUTCOMES, strict=True):
        store.save_trajectory(attempt("r", task, spec, 0, o))
    counted = [o is not None and o.counts for o in OUTCOMES]
    solved = [c and o is not None and o.success for c, o in zip(counted, OUTCOMES, strict=True)]
    assert (sum(counted), sum(solved)) == (3, 1)  # the judge's broken success is not counted
    rec = store.get_run("r")
    assert (rec.n_trajectories, rec.n_counted, rec.n_success, rec.n_errors) == (8, 3, 1, 5)
    agg = run_aggregate(store, "r")
    assert sum(t.counted for t in agg.tasks) == 3 and sum(t.successes for t in agg.tasks) == 1
    page = browse.run_page(store, "r", per_page=50)
    verdicts = {row.task.id: row.trajectories[0].verdict for row in page.tasks}
    expected = ["pass" if s else "fail" if c else "excluded" for c, s in zip(counted, solved, strict=True)]
    assert [verdicts[t.id] for t in ts] == expected
    by_difficulty = {d: (s, n) for d, s, n in browse.success_by_difficulty(store, "r")}
    assert sum(s for s, _ in by_difficulty.values()) == 1
    assert sum(n for _, n in by_difficulty.values()) == 3


def test_run_record_cost_time_and_labels(store: Store) -> None:
    ts = tasks(3)
    spec = new_run(store, "r", ts, model=PluginRef(name="openai", args={"model": "acme-chat"}))
    assert store.get_run("r").wall_seconds is None and store.get_run("r").cost_usd == 0.0
    store.save_trajectory(attempt("r", ts[0], spec, 0, Outcome(success=True), start=T0, seconds=4.0))
    store.save_trajectory(attempt("r", ts[1], spec, 0, Outcome(success=False),
                                  start=T0 + timedelta(seconds=10), seconds=5.0))
    rec = store.get_run("r")
    assert rec.cost_usd == pytest.approx(0.5)
    assert rec.wall_seconds == pytest.approx(15.0)  # first start to last end, before a summary
    assert (rec.model_label, rec.env, rec.agent_name, rec.epochs, rec.n_tasks) == (
        "openai:acme-chat", "code", "spec-r", 1, 3)
    store.save_trajectory(attempt("r", ts[2], spec, 0, Outcome(success=True), cost=None))
    assert store.get_run("r").cost_usd is None  # one unknown price makes the total unknown
    store.set_run_status("r", "finished", {"wall_seconds": 99.5})
    assert store.get_run("r").wall_seconds == 99.5


def test_list_runs_filters_by_env_and_status(store: Store) -> None:
    for i, env in enumerate(["code", "sql", "code"]):
        new_run(store, f"r{i}", tasks(1, env), env=env, created_at=T0 + timedelta(minutes=i))
    store.set_run_status("r0", "finished")
    assert [r.id for r in store.list_runs(None)] == ["r2", "r1", "r0"]
    assert [r.id for r in store.list_runs(env="code")] == ["r2", "r0"]
    assert [r.id for r in store.list_runs(env="code", status="finished")] == ["r0"]
    assert store.list_runs(status="no-such-status") == []


def test_paired_tasks_match_by_hash_and_rate_by_verdict(store: Store) -> None:
    ts = tasks(3)
    a = new_run(store, "a", ts, epochs=2)
    b = new_run(store, "b", ts[1:], epochs=2, created_at=T0 + timedelta(hours=1))
    for e, (oa, ob) in enumerate([(Outcome(success=True), Outcome(success=False)),
                                  (Outcome(success=False, error_kind="infra"), Outcome(success=True))]):
        for task in ts:
            store.save_trajectory(attempt("a", task, a, e, oa))
        for task in ts[1:]:
            store.save_trajectory(attempt("b", task, b, e, ob))
    pairs = browse.paired_tasks(store, "a", "b")
    assert sorted(p.task.id for p in pairs) == ["t/1", "t/2"]  # t/0 only ran in A
    for p in pairs:
        assert [t.verdict for t in p.a] == ["pass", "excluded"]
        assert [t.verdict for t in p.b] == ["fail", "pass"]
        assert (p.rate_a, p.rate_b, p.delta) == (1.0, 0.5, -0.5)
