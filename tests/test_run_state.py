"""Run state that is true: a run killed by SIGTERM or SIGKILL is ``interrupted``, never
``running``; ``latest`` skips runs in flight; ``show`` says when a run is incomplete."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import SHARPEN, sharpen

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.manifest import RunManifest
from sharpen.core.registry import PluginRef
from sharpen.core.task import TaskSpec
from sharpen.store import Store
from sharpen.store.owner import RunOwner

TASKS = 400  # the reference agent does ~80 episodes a second: long enough to kill mid-run
RUN = ["run", "code", "-E", "source=generated", "--agent-name", "reference",
       "--tasks", str(TASKS), "--concurrency", "1", "--no-progress"]


def _raw(db: Path, sql: str) -> list[tuple[object, ...]]:
    """Read the SQLite file directly (no Store: opening one settles orphans)."""
    conn = sqlite3.connect(db, timeout=30)
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.OperationalError:  # the tables are not created yet
        return []
    finally:
        conn.close()


def _stored(db: Path) -> int:
    rows = _raw(db, "select count(*) from trajectories")
    return int(rows[0][0]) if rows else 0  # type: ignore[call-overload]


def _statuses(tmp_path: Path, url: str) -> dict[str, str]:
    """Run id → status, as `sharpen runs --json` reports it."""
    res = sharpen("runs", "--json", "--store", url, cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    rows = data["runs"] if isinstance(data, dict) else data
    return {r["id"]: r["status"] for r in rows}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_killed_run_is_interrupted_and_resumes_to_completion(
    tmp_path: Path, sig: signal.Signals
) -> None:
    db = tmp_path / "s.db"
    url = f"sqlite:///{db}"
    proc = subprocess.Popen([*SHARPEN, *RUN, "--store", url], cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while _stored(db) < 5:
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "no trajectories stored in 120 s"
            time.sleep(0.02)
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stored = _stored(db)
    assert 5 <= stored < TASKS, out
    [(run_id, raw_status)] = _raw(db, "select id, status from runs")
    if sig == signal.SIGTERM:
        assert proc.returncode == 128 + signal.SIGTERM, out
        assert "--resume" in out
        assert raw_status == "interrupted"  # written by the runner itself, on the way out
    else:
        assert proc.returncode == -signal.SIGKILL
        assert raw_status == "running"  # nothing could be written: the reader must notice

    assert _statuses(tmp_path, url) == {run_id: "interrupted"}
    assert _raw(db, "select status from runs") == [("interrupted",)]  # and it was written
    show = sharpen("show", "latest", "--store", url, cwd=tmp_path, timeout=120)
    assert show.returncode == 0, show.stderr
    assert f"incomplete: {stored} of {TASKS} episodes stored" in show.stdout

    resumed = sharpen(*RUN, "--resume", "--store", url, cwd=tmp_path, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert _stored(db) == TASKS
    assert _raw(db, "select count(distinct key) from trajectories") == [(TASKS,)]
    assert _statuses(tmp_path, url) == {run_id: "finished"}
    show = sharpen("show", str(run_id), "--store", url, cwd=tmp_path, timeout=120)
    assert "incomplete" not in show.stdout and "(not run)" not in show.stdout


def test_resume_refuses_a_run_whose_process_is_still_running(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    url = f"sqlite:///{db}"
    long_run = [*RUN[:-4], "2000", *RUN[-3:]]  # still running when the resume is tried
    assert long_run[RUN.index("--tasks")] == "--tasks"
    proc = subprocess.Popen([*SHARPEN, *long_run, "--store", url], cwd=tmp_path, text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while _stored(db) < 1:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        second = sharpen(*long_run, "--resume", "--store", url, cwd=tmp_path, timeout=120)
        alive = proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
    assert alive, "the first run ended before the resume was tried; the test proves nothing"
    assert second.returncode == 2, second.stdout + second.stderr
    assert f"is in flight in process {proc.pid}" in second.stdout + second.stderr
    assert _statuses(tmp_path, url) == {_raw(db, "select id from runs")[0][0]: "interrupted"}


def test_sigterm_under_the_python_api_stores_the_run_interrupted(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    url = f"sqlite:///{db}"
    code = ("import sharpen, sys\n"
            "try:\n"
            f"    sharpen.run('code', agent='reference', tasks={TASKS}, concurrency=1,\n"
            f"                env_args={{'source': 'generated'}}, store={url!r})\n"
            "except sharpen.runner.signals.Terminated:\n"
            "    sys.exit(43)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path,
                            stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while _stored(db) < 3:
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 43, err
    assert _raw(db, "select status from runs") == [("interrupted",)]


# -- the owner and the reader, in process ---------------------------------------------------


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_owner_is_alive_for_this_process_and_gone_for_a_finished_one() -> None:
    me = RunOwner.current()
    assert not me.gone()
    assert RunOwner(host=me.host, pid=_dead_pid(), start=me.start).gone()
    # Pid reuse: a live pid whose start token differs is another process.
    assert RunOwner(host=me.host, pid=me.pid, start="other-boot:1").gone()
    # Another machine's process cannot be seen from here: never called gone.
    assert not RunOwner(host=me.host + "-elsewhere", pid=_dead_pid()).gone()


def _run(store: Store, run_id: str, created: float) -> None:
    spec = AgentSpec()
    task = TaskSpec(env="code", id="t0", seed=1)
    manifest = RunManifest(run_id=run_id, env=PluginRef(name="code"), agent_hash=spec.hash(),
                           task_ids=["t0"], epochs=1, seed=0, config_hash=run_id,
                           created_at=time_at(created))
    store.create_run(manifest, spec, [task])


def time_at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def test_readers_settle_orphans_and_latest_skips_runs_in_flight(url: str) -> None:
    with Store(url) as store:  # SQLite and PostgreSQL
        me = RunOwner.current()
        _run(store, "old-done", 1_000)
        store.set_run_status("old-done", "finished")
        _run(store, "legacy", 2_000)  # running, no owner recorded: left alone
        _run(store, "killed", 3_000)
        store.set_run_status("killed", "running",
                             owner=RunOwner(host=me.host, pid=_dead_pid(), start=me.start))
        _run(store, "live", 4_000)
        store.set_run_status("live", "running", owner=me)
        status = {r.id: r.status for r in store.list_runs()}
        assert status == {"old-done": "finished", "legacy": "running",
                          "killed": "interrupted", "live": "running"}
        # `latest` is the newest run not in flight: the killed one, not the live one.
        assert store.resolve_run("latest") == "killed"
        assert store.get_run("live").owner == me
        assert store.settle_orphans() == []  # already written


def test_latest_falls_back_to_a_run_in_flight_when_there_is_no_other(tmp_path: Path) -> None:
    with Store(f"sqlite:///{tmp_path / 's.db'}") as store:
        _run(store, "only", 1_000)
        store.set_run_status("only", "running", owner=RunOwner.current())
        assert store.resolve_run("latest") == "only"


def test_show_latest_names_the_newer_run_in_flight_it_skipped(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    with Store(url) as store:
        _run(store, "done-run", 1_000)
        store.set_run_status("done-run", "finished")
        _run(store, "live-run", 2_000)
        store.set_run_status("live-run", "running", owner=RunOwner.current())  # this process
    res = sharpen("show", "latest", "--store", url, cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "run done-run · finished" in res.stdout
    assert "incomplete: 0 of 1 episodes stored" in res.stdout
    assert "a newer run, live-run, is in flight (0 of 1 episodes stored)" in res.stdout
    live = sharpen("show", "live-run", "--store", url, cwd=tmp_path, timeout=120)
    assert "in flight: 0 of 1 episodes stored so far" in live.stdout
