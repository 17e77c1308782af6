"""``--executor ray`` on a real local Ray cluster: a head node and a second worker node, both on
loopback, started and stopped here (each ``ray start --block`` in its own session, ended by its
process group: nothing else's Ray is touched). The episodes are SmolLM2's replies recorded in
benchmarks/cassettes/harness_overhead.jsonl, replayed on generated code tasks (sandboxed tests
run on the workers), or the reference agent where epochs matter: fast and deterministic."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import SHARPEN, sharpen
from paced_agent import in_flight

from sharpen.core.trajectory import Trajectory
from sharpen.store import Store

pytest.importorskip("ray")

RAY = str(Path(sys.executable).parent / "ray")
BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "cassettes"
REPLAY = ["code", "-E", "source=generated", "-E", "difficulty=easy", "-E", "max_submissions=2",
          "--seed", "0", "--agent", str(BENCH / "harness_overhead.agent.yaml"), "--model", "replay",
          "--model-arg", f"cassette={BENCH / 'harness_overhead.jsonl'}", "--no-progress"]
"""Replayed episodes (one epoch: the cassette holds the first epoch's sampling seeds)."""
REFERENCE = ["code", "-E", "source=generated", "--agent-name", "reference", "--no-progress"]
"""The env's reference solutions, checked in the sandbox: no model, any number of epochs."""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    """A head node (2 CPUs) and, while :attr:`second` runs, a second node (1 CPU)."""

    address: str
    temp: Path
    head: subprocess.Popen[bytes]
    second: subprocess.Popen[bytes] | None = None
    logs: list[Path] = field(default_factory=list)

    def _start(self, *args: str, name: str) -> subprocess.Popen[bytes]:
        log = self.temp / f"{name}.log"
        self.logs.append(log)
        return subprocess.Popen(
            [RAY, "start", *args, "--node-ip-address", "127.0.0.1", "--block",
             "--disable-usage-stats", "--dashboard-agent-listen-port", str(_port())],
            stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
            stdin=subprocess.DEVNULL)

    def cpus(self) -> float:
        out = subprocess.run([RAY, "status", "--address", self.address], capture_output=True,
                             text=True, timeout=60).stdout
        found = re.search(r"/(\d+(?:\.\d+)?) CPU", out)
        return float(found.group(1)) if found else 0.0

    def wait_cpus(self, cpus: float, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while self.cpus() != cpus:
            assert time.monotonic() < deadline, f"the cluster never had {cpus} CPUs: {self.logs}"
            time.sleep(1)

    def add_second(self) -> None:
        if self.second is None:
            self.second = self._start("--address", self.address, "--num-cpus", "1",
                                      name=f"second{len(self.logs)}")
            self.wait_cpus(3)

    def kill_second(self) -> None:
        """SIGKILL the second node: its raylet, its workers and every process they started."""
        assert self.second is not None
        _kill_group(self.second)
        self.second = None


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL ``proc`` (started in a session of its own) and every process of its session:
    Ray puts each worker in a process group of its own, but they stay in the node's session."""
    for pid in _session(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait(timeout=30)


def _session(sid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # Fields after the command (which may hold spaces): state ppid pgrp session ...
        if int(stat.rsplit(")", 1)[1].split()[3]) == sid:
            found.append(int(entry))
    return found


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    temp = Path(tempfile.mkdtemp(prefix="sharpen-ray-", dir="/tmp"))  # short: socket paths
    port = _port()
    c = Cluster(address=f"127.0.0.1:{port}", temp=temp, head=None)  # type: ignore[arg-type]
    c.head = c._start("--head", "--port", str(port), "--num-cpus", "2",
                      "--include-dashboard=false", "--ray-client-server-port", str(_port()),
                      "--temp-dir", str(temp / "ray"), name="head")
    try:
        c.wait_cpus(2)
        c.add_second()
        yield c
    finally:
        if c.second is not None:
            _kill_group(c.second)
        _kill_group(c.head)
        shutil.rmtree(temp, ignore_errors=True)


def _stored(db: Path) -> int:
    if not db.exists():
        return 0
    store = Store(f"sqlite:///{db}")
    try:
        runs = store.list_runs()
        return sum(1 for _ in store.iter_trajectories(runs[0].id, with_steps=False)) if runs else 0
    finally:
        store.close()


def _played(t: Trajectory) -> tuple[object, ...]:
    """What an episode did, without its ids and times."""
    o = t.outcome
    assert o is not None
    steps = tuple((s.action.model_dump_json() if s.action else None, s.observation, s.reward,
                   tuple(m.content for m in s.messages)) for s in t.steps)
    return (t.task.id, t.epoch, t.seed, o.success, o.reward, o.error_kind, t.usage.model_dump_json(),
            steps)


def _popen(args: list[str], cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([*SHARPEN, *args], cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ, "COLUMNS": "200"})


def _wait_stored(db: Path, proc: subprocess.Popen[bytes], n: int) -> None:
    deadline = time.monotonic() + 120
    while _stored(db) < n and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, "the run finished before it could be interrupted; make it longer"


def test_ray_address_needs_the_ray_executor(tmp_path: Path) -> None:
    res = sharpen("run", "code", "--agent-name", "reference", "--tasks", "1", "--ray-address",
                  "auto", cwd=tmp_path)
    assert res.returncode == 2
    assert "--ray-address is for --executor ray" in res.stderr + res.stdout


def test_batches_shrink_to_single_episodes_as_the_queue_runs_out() -> None:
    from sharpen.runner.ray_executor import _batch_size

    left, sizes = 64, []
    while left:
        sizes.append(_batch_size(left, slots=2, chunk=8))
        left -= sizes[-1]
    assert sizes[0] == 8 and sizes[-4:] == [1, 1, 1, 1] and sum(sizes) == 64
    assert sizes == sorted(sizes, reverse=True)
    assert _batch_size(5, slots=4, chunk=8) == 1 and _batch_size(1000, slots=4, chunk=3) == 3


def test_executor_args_reach_the_executor(tmp_path: Path) -> None:
    res = sharpen("run", "code", "--agent-name", "reference", "--tasks", "1", "--executor",
                  "ray", "--executor-arg", "chunk=0", cwd=tmp_path)
    assert res.returncode == 2
    assert "chunk must be at least 1" in res.stderr + res.stdout


def test_same_trajectories_local_and_ray(tmp_path: Path, cluster: Cluster) -> None:
    runs = {}
    for executor in ("local", "ray"):
        url = f"sqlite:///{tmp_path / executor}.db"
        extra = ["--ray-address", cluster.address] if executor == "ray" else []
        res = sharpen("run", *REPLAY, "--tasks", "12", "-c", "3", "--executor",
                      executor, *extra, "--store", url, cwd=tmp_path, timeout=300)
        assert res.returncode == 0, res.stderr
        store = Store(url)
        [run] = store.list_runs()
        assert run.status == "finished" and run.manifest.extra["executor"] == executor
        runs[executor] = (run.manifest.config_hash,
                          sorted(_played(t) for t in store.iter_trajectories(run.id)))
    assert len(runs["ray"][1]) == 12
    assert {o for p in runs["ray"][1] for o in [p[3]]} == {True, False}  # both kinds of outcome
    assert runs["ray"] == runs["local"]  # same config hash: one resumes the other


def test_sigkill_of_the_driver_then_resume(tmp_path: Path, cluster: Cluster) -> None:
    tasks, epochs = 10, 2
    db = tmp_path / "s.db"
    args = ["run", *REFERENCE, "--tasks", str(tasks), "--epochs", str(epochs), "-c", "3",
            "--executor", "ray", "--ray-address", cluster.address, "--store", f"sqlite:///{db}"]
    proc = _popen(args, tmp_path)
    _wait_stored(db, proc, 3)
    _kill_group(proc)  # the driver: SIGKILL, nothing runs its finally blocks
    before = _stored(db)
    assert 3 <= before < tasks * epochs

    res = sharpen(*args, "--resume", cwd=tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr
    store = Store(f"sqlite:///{db}")
    [run] = store.list_runs()  # resumed the same run, did not start another
    trajs = list(store.iter_trajectories(run.id, with_steps=False))
    assert len(trajs) == tasks * epochs
    assert max(Counter(t.key for t in trajs).values()) == 1
    assert run.status == "finished"


def test_ctrl_c_cancels_the_ray_episodes(tmp_path: Path, cluster: Cluster) -> None:
    db = tmp_path / "s.db"
    args = ["run", *REPLAY, "--tasks", "20", "-c", "3", "--executor", "ray", "--ray-address",
            cluster.address, "--store", f"sqlite:///{db}"]
    proc = subprocess.Popen([*SHARPEN, *args], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while _stored(db) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, "the run finished before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    assert "--resume" in out and "Traceback" not in err
    store = Store(f"sqlite:///{db}")
    [run] = store.list_runs()
    assert run.status == "interrupted"
    assert 2 <= len(list(store.iter_trajectories(run.id, with_steps=False))) < 20


async def test_one_executor_keeps_its_actors_from_run_to_run(tmp_path: Path,
                                                             cluster: Cluster) -> None:
    """As ``sharpen improve`` uses it: several runs through one executor start its actors
    (and build their models) once; ``aclose`` ends them."""
    from conftest import procs_with

    from sharpen.core.agent_spec import AgentSpec
    from sharpen.core.registry import PluginRef
    from sharpen.envs.code.env import CodeEnv
    from sharpen.runner import RunConfig, Runner
    from sharpen.runner.ray_executor import RayExecutor

    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    env = PluginRef(name="code", args={"source": "generated"})
    tasks = CodeEnv(source="generated").list_tasks(limit=6, seed=0)
    executor = RayExecutor(address=cluster.address)
    runner = Runner(store, progress=False, executor=executor)
    actors = []
    try:
        for part in (tasks[:3], tasks[3:]):
            config = RunConfig(env=env, agent=AgentSpec(agent=PluginRef(name="reference")),
                               tasks=part, concurrency=2)
            summary = await runner.run(config)
            assert summary.n_trajectories == 3 and summary.n_success == 3
            actors.append(sorted(procs_with("ray::EpisodeActor")))
    finally:
        await executor.aclose()
    assert len(actors[0]) == 2 and actors[1] == actors[0]  # the same two actor processes
    deadline = time.monotonic() + 30
    while procs_with("ray::EpisodeActor") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not procs_with("ray::EpisodeActor")


def test_a_worker_node_killed_mid_episode_loses_nothing(tmp_path: Path, cluster: Cluster) -> None:
    # One episode per actor call, each held open a second by the paced reference agent, which
    # marks it with a file naming its process: the kill waits for a mark of a process of the
    # second node, so it lands inside that episode (a kill timed by stored counts alone once
    # found the node between episodes, with nothing in flight to lose).
    tasks, marks, db = 18, tmp_path / "marks", tmp_path / "s.db"
    marks.mkdir()
    args = ["run", "code", "-E", "source=generated", "--agent-name",
            f"{Path(__file__).parent / 'paced_agent.py'}:PacedReference", "--agent-arg",
            f"marks={marks}", "--no-progress", "--tasks", str(tasks), "-c", "3",
            "--executor", "ray", "--executor-arg", "chunk=1", "--ray-address", cluster.address,
            "--store", f"sqlite:///{db}"]
    proc = _popen(args, tmp_path)  # 3 slots on 3 CPUs: one of them on the second node
    assert cluster.second is not None
    deadline, caught = time.monotonic() + 120, []
    while not caught:
        assert proc.poll() is None and time.monotonic() < deadline, "no episode on the second node"
        time.sleep(0.05)
        caught = in_flight(marks, set(_session(cluster.second.pid)))
    cluster.kill_second()  # within the second the episode is held open
    store = Store(f"sqlite:///{db}")
    [run] = store.list_runs()
    finished_before = {t.key for t in store.iter_trajectories(run.id, with_steps=False)}
    assert proc.wait(timeout=240) == 0
    trajs = list(store.iter_trajectories(run.id, with_steps=False))
    assert len(trajs) == tasks and store.get_run(run.id).status == "finished"
    assert finished_before <= {t.key for t in trajs}  # nothing finished was lost
    lost = [t for t in trajs if t.outcome is not None and t.outcome.error_kind == "infra"]
    # What the kill caught in flight is stored as an infra error that names Ray, and only that.
    assert set(caught) <= {t.task.id for t in lost}
    assert all("ray:" in (t.outcome.error or "") for t in lost if t.outcome)
    assert len(lost) < tasks - len(finished_before)  # the head's slots played the rest

    res = sharpen(*args, "--resume", cwd=tmp_path, timeout=300)  # on the head alone
    assert res.returncode == 0, res.stderr
    again = list(store.iter_trajectories(run.id, with_steps=False))
    assert len(again) == tasks
    assert not [t for t in again if t.outcome is not None and t.outcome.error_kind == "infra"]
    # Last in the file: the cluster is left with its head alone (adding a node costs seconds).
