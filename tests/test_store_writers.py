"""Eight OS processes writing one store at once — a SQLite file in WAL mode and a PostgreSQL
database — lose no trajectory and store none twice.

Every writer saves trajectories of keys of its own and of keys every writer shares (the
same task, spec and epoch: what two workers that both ran an episode would write), in its
own shuffled order, in batches of one to four (``save_trajectories``), all starting at the
same moment. Afterwards the rows are counted: one per key, the shared ones written by exactly
the writer whose save said ``True``, with every step and feedback record of it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from sqlalchemy import func, select

from sharpen.core import AgentSpec, PluginRef, RunManifest, TaskSpec
from sharpen.store import Store
from sharpen.store.schema import feedback, steps, trajectories

WRITERS = 8
OWN = 12
"""Keys only one writer saves (per writer)."""
SHARED = 16
"""Keys every writer saves."""
RUN_ID = "run-writers"

WRITER = textwrap.dedent("""
    import json, random, sys, time
    from datetime import UTC, datetime
    from sharpen.core import (Feedback, FeedbackTarget, Message, Outcome, Step, TaskSpec,
                              Trajectory)
    from sharpen.store import Store

    url, run_id, agent_hash, who, own, shared, start_at = sys.argv[1:8]
    who, own, shared, start_at = int(who), int(own), int(shared), float(start_at)

    def traj(task_id, epoch):
        t = Trajectory(run_id=run_id, task=TaskSpec(env="code", id=task_id), epoch=epoch,
                       agent_hash=agent_hash, outcome=Outcome(success=epoch % 2 == 0))
        t.steps = [Step(index=i, messages=[Message(role="assistant", content=f"{who}:{i}")])
                   for i in range(2)]
        t.feedback = [Feedback(source="verifier", value=str(who), target=FeedbackTarget(
            kind="trajectory", run_id=run_id, trajectory_id=t.id))]
        return t

    work = [traj(f"own/{who}/{i}", 0) for i in range(own)]
    work += [traj(f"shared/{i % 4}", i // 4) for i in range(shared)]
    rng = random.Random(who)
    rng.shuffle(work)  # each writer meets the shared keys in another order
    store = Store(url)
    store.finished_keys(run_id)  # connected and migrated before the start line
    while time.time() < start_at:
        time.sleep(0.005)
    saved = []
    while work:
        n = rng.randint(1, 4)
        batch, work = work[:n], work[n:]
        for t, ok in zip(batch, store.save_trajectories(batch)):
            saved.append([t.key, t.id, ok])
    store.close()
    print(json.dumps(saved))
""")


def _make_run(url: str) -> str:
    spec = AgentSpec(name="writers", components={"instructions": "write"})
    tasks = [TaskSpec(env="code", id=f"shared/{i}") for i in range(4)]
    manifest = RunManifest(run_id=RUN_ID, env=PluginRef(name="code"), agent_hash=spec.hash(),
                           task_ids=[t.id for t in tasks], epochs=SHARED // 4, seed=0,
                           config_hash="writers")
    with Store(url) as s:
        s.create_run(manifest, spec, tasks)
    return spec.hash()


def _count(store: Store, table: object) -> int:
    with store.read() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())  # type: ignore[arg-type]


def test_eight_processes_write_one_store_without_losing_or_doubling_a_row(url: str) -> None:
    agent_hash = _make_run(url)
    # Interpreters take a while to import sharpen on a loaded machine: start them all, and
    # let them begin writing together once every one has had time to get ready.
    start_at = time.time() + 8.0
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, url, RUN_ID, agent_hash, str(who), str(OWN),
             str(SHARED), str(start_at)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for who in range(WRITERS)
    ]
    saved: dict[int, list[tuple[str, str, bool]]] = {}
    for who, p in enumerate(procs):
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-3000:]
        saved[who] = [(k, i, ok) for k, i, ok in json.loads(out)]

    with Store(url) as store:
        stored = {t.key: t for t in store.iter_trajectories(RUN_ID)}
        n_rows = _count(store, trajectories)
        n_steps = _count(store, steps)
        n_feedback = _count(store, feedback)
        rec = store.get_run(RUN_ID)

    expected_keys = {k for rows in saved.values() for k, _, _ in rows}
    assert len(expected_keys) == WRITERS * OWN + SHARED
    # None lost, none doubled: one row per key, and the unique key held.
    assert n_rows == len(stored) == len(expected_keys)
    assert set(stored) == expected_keys
    assert rec.n_trajectories == len(expected_keys)
    # Each key was written by exactly one save that said so, and what is stored is that
    # writer's trajectory, with all its steps and its feedback.
    winners: dict[str, list[str]] = {}
    for rows in saved.values():
        for key, tid, ok in rows:
            if ok:
                winners.setdefault(key, []).append(tid)
    assert all(len(ids) == 1 for ids in winners.values()), winners
    assert {k: ids[0] for k, ids in winners.items()} == {k: t.id for k, t in stored.items()}
    assert n_steps == 2 * len(stored) == sum(len(t.steps) for t in stored.values())
    assert n_feedback == len(stored)
    for t in stored.values():
        [fb] = t.feedback
        assert [s.messages[0].content for s in t.steps] == [f"{fb.value}:0", f"{fb.value}:1"]
    # The shared keys really were contended: more than one writer met each of them.
    shared_saves = sum(1 for rows in saved.values() for k, _, _ in rows
                       if stored[k].task.id.startswith("shared/"))
    assert shared_saves == WRITERS * SHARED


def test_the_writers_use_wal_on_sqlite(tmp_path: Path) -> None:
    """The SQLite case above runs in WAL mode (what lets readers and writers overlap)."""
    import sqlite3

    db = tmp_path / "w.db"
    Store(f"sqlite:///{db}").close()
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
