"""SIGKILL `sharpen run` mid-run, resume, and find exactly tasks × epochs trajectories."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import SHARPEN, sharpen

from sharpen.store import Store

pytestmark = pytest.mark.slow

TASKS, EPOCHS = 4, 2


def _stored(db: Path) -> int:
    if not db.exists():
        return 0
    store = Store(f"sqlite:///{db}")
    try:
        runs = store.list_runs()
        return sum(1 for _ in store.iter_trajectories(runs[0].id, with_steps=False)) if runs else 0
    finally:
        store.close()


def test_sigkill_then_resume_loses_and_duplicates_nothing(tmp_path: Path, small_agent: Path):
    args = ["run", "code", "-E", "source=generated", "--tasks", str(TASKS),
            "--epochs", str(EPOCHS), "--concurrency", "2", "--agent", str(small_agent),
            "--no-progress"]
    db = tmp_path / ".sharpen" / "sharpen.db"
    proc = subprocess.Popen([*SHARPEN, *args], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 400
    while _stored(db) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert proc.poll() is None, "the run finished before it could be killed; make it longer"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = _stored(db)
    assert 2 <= before < TASKS * EPOCHS

    res = sharpen(*args, "--resume", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    store = Store(f"sqlite:///{db}")
    [run] = store.list_runs()  # resumed the same run, did not start another
    trajs = list(store.iter_trajectories(run.id, with_steps=False))
    keys = Counter(t.key for t in trajs)
    assert len(trajs) == TASKS * EPOCHS
    assert max(keys.values()) == 1
    assert {(t.task.id, t.epoch) for t in trajs} == {
        (task_id, e) for task_id in run.manifest.task_ids for e in range(EPOCHS)
    }
    assert run.status == "finished"


def _sigint_default() -> None:
    # A test run started in the background of a shell without job control inherits SIGINT
    # ignored (as every background job does), and Python then never turns Ctrl-C into
    # KeyboardInterrupt; the child gets the terminal's default, as a user's shell gives it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_cleanly_and_keeps_finished_work(tmp_path: Path, small_agent: Path):
    args = ["run", "code", "-E", "source=generated", "--tasks", "6", "--concurrency", "1",
            "--agent", str(small_agent), "--no-progress"]
    db = tmp_path / ".sharpen" / "sharpen.db"
    proc = subprocess.Popen([*SHARPEN, *args], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_sigint_default)
    deadline = time.monotonic() + 400
    while _stored(db) < 1 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert proc.poll() is None, "the run finished before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    assert "--resume" in out and "Traceback" not in err
    store = Store(f"sqlite:///{db}")
    [run] = store.list_runs()
    assert run.status == "interrupted"
    kept = list(store.iter_trajectories(run.id))
    assert 1 <= len(kept) < 6 and all(t.outcome is not None for t in kept)

    res = sharpen(*args, "--resume", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert len(list(store.iter_trajectories(run.id, with_steps=False))) == 6
    assert store.get_run(run.id).status == "finished"
