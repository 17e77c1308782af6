"""sharpen.store against real SQLite files (and real subprocesses for concurrency)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, event, inspect

from sharpen.core import (
    Action,
    AgentSpec,
    Feedback,
    FeedbackTarget,
    Message,
    Outcome,
    PluginRef,
    RunManifest,
    Step,
    TaskSpec,
    ToolCall,
    Trajectory,
    Usage,
    UserError,
)
from sharpen.store import RunRecord, Store
from sharpen.store.migrate import VERSION_TABLE, make_config
from sharpen.store.schema import metadata

T0 = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
TABLES = {"agent_specs", "runs", "tasks", "run_tasks", "trajectories", "steps", "feedback"}


# -- builders -------------------------------------------------------------------------------------


def make_spec(name: str = "base") -> AgentSpec:
    return AgentSpec(name=name, components={"instructions": f"be careful ({name})"})


def make_tasks(n: int = 3) -> list[TaskSpec]:
    return [
        TaskSpec(
            env="code",
            id=f"HumanEval/{i}",
            seed=i,
            knobs={"level": i},
            split="val",
            metadata={"source": "test", "tags": ["a", "b"]},
        )
        for i in range(n)
    ]


def make_manifest(
    spec: AgentSpec,
    tasks: list[TaskSpec],
    run_id: str,
    *,
    config_hash: str = "cfg1",
    created_at: datetime = T0,
) -> RunManifest:
    return RunManifest(
        run_id=run_id,
        created_at=created_at,
        env=PluginRef(name="code", args={"k": 1}),
        agent_hash=spec.hash(),
        task_ids=[t.id for t in tasks],
        epochs=2,
        seed=7,
        config_hash=config_hash,
        isolation="rlimits",
        extra={"argv": ["sharpen", "run"]},
    )


def make_run(
    store: Store, run_id: str = "run-aaaa", **kw: object
) -> tuple[AgentSpec, list[TaskSpec]]:
    spec, tasks = make_spec(), make_tasks()
    store.create_run(make_manifest(spec, tasks, run_id, **kw), spec, tasks)  # type: ignore[arg-type]
    return spec, tasks


def make_trajectory(
    run_id: str,
    task: TaskSpec,
    agent_hash: str,
    epoch: int = 0,
    *,
    outcome: Outcome | None = None,
    started_at: datetime = T0,
) -> Trajectory:
    t = Trajectory(
        run_id=run_id,
        task=task,
        agent_hash=agent_hash,
        epoch=epoch,
        seed=40 + epoch,
        started_at=started_at,
        ended_at=started_at + timedelta(seconds=3.25),
    )
    call = ToolCall(id="call_1", name="submit", arguments={"code": "def f():\n    return 1"})
    t.messages = [
        Message(role="system", content="You are careful."),
        Message(role="user", content="Write f. ünïcödé ✓"),
        Message(role="assistant", content=None, tool_calls=[call]),
        Message(role="tool", content="2/3 tests passed", tool_call_id="call_1"),
        Message(role="assistant", content="no tool here"),
        Message(role="user", content="Reply with a tool call."),
    ]
    t.steps = [
        Step(
            index=0,
            messages=t.messages[2:4],
            action=Action(tool="submit", arguments=call.arguments),
            observation="2/3 tests passed",
            reward=0.5,
            usage=Usage(input_tokens=100, output_tokens=20, calls=1, cost_usd=None),
            model_seconds=1.5,
            env_seconds=0.25,
            info={"tests": [True, True, False]},
        ),
        Step(
            index=1,
            messages=t.messages[4:6],
            invalid_action="no tool call",
            terminated=True,
            truncated=True,
            usage=Usage(input_tokens=130, output_tokens=5, calls=1, cost_usd=0.001),
        ),
    ]
    t.outcome = (
        outcome
        if outcome is not None
        else Outcome(
            success=False,
            reward=2 / 3,
            components={"tests_passed": 2, "tests_total": 3},
            error_kind="agent",
            error="ran out of steps",
            evidence="assert f() == 2",
        )
    )
    t.usage = t.steps[0].usage + t.steps[1].usage
    t.invalid_actions = 1
    t.infra_retries = 2
    t.feedback = [
        Feedback(
            source="verifier",
            target=FeedbackTarget(kind="trajectory", run_id=run_id, trajectory_id=t.id),
            name="tests_passed",
            value=2.0,
            rationale="2 of 3",
            created_at=T0 + timedelta(seconds=9),
        ),
        Feedback(
            source="execution",
            target=FeedbackTarget(kind="step", run_id=run_id, trajectory_id=t.id, step_index=0),
            name="ok",
            value=True,
            created_at=T0,
        ),
        Feedback(
            source="critic",
            target=FeedbackTarget(kind="span", trajectory_id=t.id, step_index=1, span=(3, 11)),
            name="label",
            value="format",
            author="gpt-x",
        ),
        Feedback(
            source="human",
            target=FeedbackTarget(kind="trajectory", trajectory_id=t.id),
            value=None,
            rationale="looked fine",
        ),
    ]
    return t


@pytest.fixture
def store(url: str):
    s = Store(url)
    yield s
    s.close()


def dump_all(store: Store, run_id: str) -> list[dict]:
    return [t.model_dump() for t in store.iter_trajectories(run_id)]


# -- round trips ----------------------------------------------------------------------------------


def test_trajectory_round_trip_with_steps_tool_calls_and_feedback(store: Store) -> None:
    spec, tasks = make_run(store)
    t = make_trajectory("run-aaaa", tasks[0], spec.hash())
    assert store.save_trajectory(t) is True
    [back] = store.iter_trajectories("run-aaaa")
    assert back.model_dump() == t.model_dump()
    assert back.steps[0].messages[0].tool_calls[0].arguments["code"].startswith("def f")
    assert store.feedback_for(t.id) == t.feedback


def test_round_trip_survives_reopening_and_outcome_none(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    with Store(url) as s:
        spec, tasks = make_run(s)
        t = make_trajectory("run-aaaa", tasks[1], spec.hash())
        t.outcome, t.ended_at, t.steps, t.feedback = None, None, [], []
        s.save_trajectory(t)
    with Store(url) as s:
        assert [x.model_dump() for x in s.iter_trajectories("run-aaaa")] == [t.model_dump()]
        assert s.get_run("run-aaaa").n_counted == 0


def test_light_listing_reads_no_messages(store: Store) -> None:
    spec, tasks = make_run(store)
    t = make_trajectory("run-aaaa", tasks[0], spec.hash())
    store.save_trajectory(t)
    statements: list[str] = []
    # The one use of the private engine: only it sees every statement of every connection.
    event.listen(
        store._engine, "before_cursor_execute", lambda conn, cur, stmt, *a: statements.append(stmt)
    )
    [light] = store.iter_trajectories("run-aaaa", with_steps=False)
    assert light.steps == [] and light.messages == []
    assert light.model_dump(exclude={"steps", "messages"}) == t.model_dump(
        exclude={"steps", "messages"}
    )
    assert not any("messages" in s for s in statements)
    [with_msgs] = store.iter_trajectories("run-aaaa", with_steps=False, with_messages=True)
    assert with_msgs.messages == t.messages and with_msgs.steps == []


def test_iteration_in_batches_keeps_order_and_ties(store: Store) -> None:
    spec, tasks = make_run(store)
    saved = []
    for i in range(10):
        # pairs share a start time: the id breaks the tie
        t = make_trajectory(
            "run-aaaa",
            tasks[i % 3],
            spec.hash(),
            epoch=i,
            started_at=T0 + timedelta(seconds=i // 2),
        )
        t.steps, t.feedback = [], []
        store.save_trajectory(t)
        saved.append(t)
    got = [t.id for t in store.iter_trajectories("run-aaaa", batch_size=3)]
    assert got == [t.id for t in sorted(saved, key=lambda t: (t.started_at, t.id))]
    assert list(store.iter_trajectories("no-such-run")) == []


def test_codec_covers_every_field_of_the_core_types() -> None:
    from sharpen.store.codec import COVERED_FIELDS

    for model, covered in COVERED_FIELDS.items():
        assert set(model.model_fields) == covered, f"store codec is out of date for {model}"


# -- idempotence and resume -----------------------------------------------------------------------


def test_duplicate_save_returns_false_and_writes_nothing(store: Store) -> None:
    spec, tasks = make_run(store)
    first = make_trajectory("run-aaaa", tasks[0], spec.hash(), epoch=1)
    assert store.save_trajectory(first)
    again = make_trajectory("run-aaaa", tasks[0], spec.hash(), epoch=1)  # same key, new ids
    assert again.id != first.id and again.key == first.key
    assert store.save_trajectory(again) is False
    assert store.save_trajectory(first) is False
    assert dump_all(store, "run-aaaa") == [first.model_dump()]
    assert store.feedback_for(again.id) == []
    with store.read() as conn:
        assert conn.exec_driver_sql("select count(*) from steps").scalar() == 2
        assert conn.exec_driver_sql("select count(*) from feedback").scalar() == 4


def test_finished_keys_and_find_resumable(store: Store) -> None:
    spec, tasks = make_run(store, "run-old", config_hash="c1", created_at=T0)
    make_run(store, "run-new", config_hash="c1", created_at=T0 + timedelta(hours=1))
    make_run(store, "run-other", config_hash="c2", created_at=T0 + timedelta(hours=2))
    assert store.finished_keys("run-new") == set()
    a = make_trajectory("run-new", tasks[0], spec.hash(), epoch=0)
    b = make_trajectory("run-new", tasks[2], spec.hash(), epoch=1)
    store.save_trajectory(a)
    store.save_trajectory(b)
    assert store.finished_keys("run-new") == {a.key, b.key}
    assert store.finished_keys("run-old") == set()
    assert store.find_resumable("c1") == "run-new"
    assert store.find_resumable("c3") is None


def test_create_run_is_idempotent_and_keeps_task_order(store: Store) -> None:
    spec, tasks = make_spec(), make_tasks(4)
    order = [tasks[2], tasks[0], tasks[3], tasks[0], tasks[1]]
    manifest = make_manifest(spec, order, "run-x")
    store.create_run(manifest, spec, order)
    store.set_run_status("run-x", "interrupted", {"done": 3})
    store.create_run(manifest, spec, order)  # resume: nothing changes
    rec = store.get_run("run-x")
    assert rec.status == "interrupted" and rec.summary == {"done": 3}
    assert rec.manifest == manifest and rec.agent == spec
    assert store.tasks_for("run-x") == [tasks[2], tasks[0], tasks[3], tasks[1]]
    assert store.save_agent_spec(spec) == spec.hash()
    with pytest.raises(ValueError, match="config hash"):
        store.create_run(make_manifest(spec, order, "run-x", config_hash="other"), spec, order)
    with pytest.raises(ValueError, match="hash"):
        store.create_run(make_manifest(spec, order, "run-y"), make_spec("other"), order)


def test_save_trajectory_validates_before_writing(store: Store) -> None:
    spec, tasks = make_run(store)
    t = make_trajectory("run-aaaa", tasks[0], spec.hash())
    t.feedback[0].target.trajectory_id = "someone-else"
    with pytest.raises(ValueError, match="targets another trajectory"):
        store.save_trajectory(t)
    orphan = make_trajectory("run-missing", tasks[0], spec.hash())
    with pytest.raises(ValueError, match="create_run"):
        store.save_trajectory(orphan)
    assert store.finished_keys("run-aaaa") == set()


# -- runs -----------------------------------------------------------------------------------------


def test_run_records_count_only_agent_failures(store: Store) -> None:
    spec, tasks = make_run(store)
    outcomes = [
        Outcome(success=True, reward=1.0),
        Outcome(success=False, error_kind="agent"),
        Outcome(success=False, error_kind="infra", error="503"),
        Outcome(success=False, error_kind="judge"),
    ]
    for epoch, o in enumerate(outcomes):
        store.save_trajectory(make_trajectory("run-aaaa", tasks[0], spec.hash(), epoch, outcome=o))
    rec = store.get_run("run-aaaa")
    assert isinstance(rec, RunRecord)
    assert (rec.n_trajectories, rec.n_success, rec.n_counted) == (4, 1, 2)
    assert rec.success_rate == 0.5 and rec.status == "running" and rec.id == "run-aaaa"
    assert rec.created_at == T0
    store.set_run_status("run-aaaa", "finished", {"success_rate": 0.5})
    store.set_run_status("run-aaaa", "finished")  # None keeps the summary
    assert store.get_run("run-aaaa").summary == {"success_rate": 0.5}
    with pytest.raises(ValueError):
        store.set_run_status("run-aaaa", "done")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="sharpen runs"):
        store.set_run_status("nope", "failed")


def test_list_runs_newest_first(store: Store) -> None:
    for i in range(5):
        make_run(store, f"run-{i}", created_at=T0 + timedelta(minutes=i))
    listed = store.list_runs(limit=3)
    assert [r.id for r in listed] == ["run-4", "run-3", "run-2"]
    assert all(r.n_trajectories == 0 for r in listed)


def test_resolve_run(store: Store) -> None:
    with pytest.raises(UserError, match="no runs"):
        store.resolve_run("latest")
    make_run(store, "abc123", created_at=T0)
    make_run(store, "abd456", created_at=T0 + timedelta(minutes=1))
    make_run(store, "ab", created_at=T0 - timedelta(minutes=1))
    assert store.resolve_run("abc") == "abc123"
    assert store.resolve_run("abd456") == "abd456"
    assert store.resolve_run("ab") == "ab"  # a full id wins over being a prefix
    assert store.resolve_run("latest") == store.resolve_run("last") == "abd456"
    with pytest.raises(UserError, match="ambiguous") as ambiguous:
        store.resolve_run("a")
    assert "sharpen runs" in str(ambiguous.value)
    with pytest.raises(UserError, match="sharpen runs"):
        store.resolve_run("zzz")
    with pytest.raises(UserError, match="sharpen runs"):
        store.resolve_run("a%")  # LIKE wildcards are literal
    with pytest.raises(UserError, match="sharpen runs"):
        store.get_run("zzz")


# -- feedback -------------------------------------------------------------------------------------


def test_add_feedback_appends_in_order_and_is_idempotent(store: Store) -> None:
    spec, tasks = make_run(store)
    t = make_trajectory("run-aaaa", tasks[0], spec.hash())
    store.save_trajectory(t)
    early = T0 - timedelta(days=1)  # written last, dated earliest: write order still wins
    edit = Feedback(
        source="human",
        target=FeedbackTarget(kind="step", trajectory_id=t.id, step_index=0),
        value=0.25,
        supersedes=t.feedback[0].id,
        created_at=early,
    )
    store.add_feedback(edit)
    store.add_feedback(edit)
    run_note = Feedback(source="human", target=FeedbackTarget(kind="run", run_id="run-aaaa"))
    store.add_feedback(run_note)
    assert store.feedback_for(t.id) == [*t.feedback, edit]
    [back] = store.iter_trajectories("run-aaaa")
    assert back.feedback == [*t.feedback, edit]


def test_add_feedbacks_in_a_batch_as_one_by_one(store: Store) -> None:
    """A batch is stored as add_feedback would store its records in order: after each
    trajectory's last record, ids already stored (or repeated) skipped, run-level records
    too; the count is of the new ones."""
    spec, tasks = make_run(store)
    a = make_trajectory("run-aaaa", tasks[0], spec.hash())
    b = make_trajectory("run-aaaa", tasks[1], spec.hash())
    store.save_trajectory(a)
    store.save_trajectory(b)

    def on(t: Trajectory, name: str) -> Feedback:
        return Feedback(source="detector", name=name,
                        target=FeedbackTarget(kind="step", trajectory_id=t.id, step_index=0))

    first, second, other = on(a, "loop"), on(a, "stall"), on(b, "loop")
    note = Feedback(source="human", target=FeedbackTarget(kind="run", run_id="run-aaaa"))
    assert store.add_feedbacks([first, other, first, second, a.feedback[0], note]) == 4
    assert store.feedback_for(a.id) == [*a.feedback, first, second]
    assert store.feedback_for(b.id) == [*b.feedback, other]
    assert store.add_feedbacks([second, other, note]) == 0
    later = on(a, "limit_hit")
    store.add_feedback(later)
    assert store.feedback_for(a.id)[-1] == later


# -- backend setup, concurrency --------------------------------------------------------------------


def test_sqlite_file_is_in_wal_mode_with_foreign_keys(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'db' / 'sharpen.db'}")
    with sqlite3.connect(tmp_path / "db" / "sharpen.db") as con:
        assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    with store.read() as conn:
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 1000


def test_default_url_is_under_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with Store() as s:
        assert (tmp_path / ".sharpen" / "sharpen.db").exists()
        assert s.url == f"sqlite:///{(tmp_path / '.sharpen' / 'sharpen.db').resolve()}"


WRITER = textwrap.dedent("""
    import sys
    from datetime import UTC, datetime
    from sharpen.core import Outcome, Step, Message, TaskSpec, Trajectory
    from sharpen.store import Store
    url, run_id, agent_hash, who, n = sys.argv[1:6]
    store = Store(url)
    for i in range(int(n)):
        task = TaskSpec(env="code", id=f"{who}/{i}")
        t = Trajectory(run_id=run_id, task=task, agent_hash=agent_hash,
                       outcome=Outcome(success=i % 2 == 0),
                       steps=[Step(index=0, messages=[Message(role="assistant", content="x")])])
        assert store.save_trajectory(t)
    store.close()
""")


def test_two_processes_write_concurrently_without_losing_rows(url: str) -> None:
    with Store(url) as s:
        spec, _ = make_run(s)
    n = 40
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, url, "run-aaaa", spec.hash(), who, str(n)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for who in ("a", "b")
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    with Store(url) as s:
        assert len(s.finished_keys("run-aaaa")) == 2 * n
        rec = s.get_run("run-aaaa")
        assert (rec.n_trajectories, rec.n_success) == (2 * n, n)
        assert sum(len(t.steps) for t in s.iter_trajectories("run-aaaa")) == 2 * n


def test_processes_opening_a_new_database_together_migrate_once(url: str) -> None:
    code = "import sys; from sharpen.store import Store; Store(sys.argv[1]).close()"
    procs = [
        subprocess.Popen([sys.executable, "-c", code, url], stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert set(inspect(create_engine(url)).get_table_names()) >= TABLES


def test_threads_share_one_store(store: Store) -> None:
    spec, tasks = make_run(store)
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for e in range(5):
                t = make_trajectory("run-aaaa", tasks[k % 3], spec.hash(), epoch=10 * k + e)
                assert store.save_trajectory(t)
                store.get_run("run-aaaa")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert store.get_run("run-aaaa").n_trajectories == 30


# -- migrations -----------------------------------------------------------------------------------


def test_migrations_upgrade_downgrade_and_match_metadata(url: str) -> None:
    if url.startswith("sqlite:///"):
        Path(url[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    cfg = make_config(url)
    command.upgrade(cfg, "head")
    engine = create_engine(url)
    try:
        assert set(inspect(engine).get_table_names()) >= TABLES
        with engine.connect() as conn:
            ctx = MigrationContext.configure(
                conn, opts={"version_table": VERSION_TABLE, "compare_type": True}
            )
            assert compare_metadata(ctx, metadata) == []
        command.downgrade(cfg, "base")
        assert set(inspect(engine).get_table_names()) == {VERSION_TABLE}
        command.upgrade(cfg, "head")
        assert set(inspect(engine).get_table_names()) >= TABLES
    finally:
        engine.dispose()
    with Store(url) as s:  # a store opens a database migrated by hand
        assert s.list_runs() == []


def test_a_database_from_a_newer_sharpen_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    Store(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as con:
        con.execute(f"update {VERSION_TABLE} set version_num = '9999'")
    with pytest.raises(UserError, match="upgrade sharpen"):
        Store(f"sqlite:///{path}")


def test_migrations_ship_inside_the_package() -> None:
    from sharpen.store import migrate

    root = Path(migrate.__file__).parent / "migrations"
    assert (root / "env.py").is_file()
    assert (root / "versions" / "0001_initial.py").is_file()
    assert Path(make_config().get_main_option("script_location") or "") == root


# -- bad URLs -------------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["not a url", "nosuchdb://x/y", "postgresql+nosuchdriver://h/db"])
def test_bad_url_is_a_user_error(url: str) -> None:
    with pytest.raises(UserError) as info:
        Store(url)
    assert "--store" in str(info.value) and "sqlite:///" in str(info.value)


def test_unopenable_sqlite_path_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="--store"):
        Store(f"sqlite:///{tmp_path}")  # a directory, not a database file


def test_discard_trajectories_removes_only_the_named_error_kinds(tmp_path):
    from sharpen.core.outcome import Outcome

    store = Store(f"sqlite:///{tmp_path / 'd.db'}")
    spec = AgentSpec()
    tasks = [TaskSpec(env="code", id=f"t{i}") for i in range(3)]
    manifest = RunManifest(run_id="r1", env=PluginRef(name="code"), agent_hash=spec.hash(),
                           task_ids=[t.id for t in tasks], epochs=1, seed=0, config_hash="c")
    store.create_run(manifest, spec, tasks)
    kinds = [None, "infra", "agent"]
    for task, kind in zip(tasks, kinds, strict=True):
        t = Trajectory(run_id="r1", task=task, agent_hash=spec.hash(),
                       outcome=Outcome(success=False, error_kind=kind))
        t.steps.append(Step(index=0, messages=[Message(role="assistant", content="x")]))
        assert store.save_trajectory(t)
    assert store.discard_trajectories("r1", ["infra"]) == 1
    left = {t.task.id for t in store.iter_trajectories("r1")}
    assert left == {"t0", "t2"}
    assert store.discard_trajectories("r1", ["infra"]) == 0
