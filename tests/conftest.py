"""Shared helpers: run the real `sharpen` CLI in a subprocess, small agent specs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

# One llama.cpp / torch thread for every model the suite (and the CLI processes it starts)
# loads, unless the caller says otherwise. The default (sharpen.models.local.default_threads)
# reads the 1-minute load average, which lags the suite's bursts of servers, sandboxes and
# subprocesses: a guess of two threads on two busy cores spins at OpenMP barriers and runs
# 12x slower or worse (benchmarks/results/local_model_threads.md), long enough to look hung.
os.environ.setdefault("SHARPEN_THREADS", "1")

from pg_server import postgres, url  # noqa: F401  (fixtures: a PostgreSQL server, a fresh db)
from train_base import base_checkpoint, base_gguf  # noqa: F401  (fixtures: the start model)

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.registry import PluginRef
from sharpen.runner import RunConfig, Runner
from sharpen.store import Store

SHARPEN = [sys.executable, "-m", "sharpen.cli.main"]

# Short replies and episodes keep the real 135M model fast enough for tests.
SMALL_AGENT = {
    "name": "small",
    "model": {"name": "local"},
    "params": {"temperature": 0.0, "max_tokens": 160},
    "limits": {"max_steps": 2, "max_tokens": 4000, "max_seconds": 120},
}


def sharpen(
    *args: str, cwd: Path, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``sharpen ARGS`` in ``cwd`` and return the finished process (text output)."""
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [*SHARPEN, *args], cwd=cwd, env=full_env, capture_output=True, text=True,
        timeout=timeout, stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def small_agent(tmp_path: Path) -> Path:
    """Path of an AgentSpec YAML with short replies and at most two turns."""
    path = tmp_path / "small_agent.yaml"
    path.write_text(yaml.safe_dump(SMALL_AGENT))
    return path


def procs_with(marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains ``marker``."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read()
            with open(f"/proc/{pid}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmd and state not in (b"Z", b"X"):
            found.append(int(pid))
    return found


async def run_agent(db: Path, env: PluginRef, agent: str, tasks: list) -> list:
    """Run the agent plug-in ``agent`` (e.g. the model-free ``reference`` or ``null``) on
    ``tasks`` of ``env`` through the real Runner into a new SQLite store at ``db``; returns
    the stored trajectories, steps included."""
    store = Store(f"sqlite:///{db}")
    config = RunConfig(env=env, agent=AgentSpec(agent=PluginRef(name=agent)), tasks=tasks)
    summary = await Runner(store, progress=False).run(config)
    return list(store.iter_trajectories(summary.run_id))


class Interrupt:
    """An event sink that raises KeyboardInterrupt (as Ctrl-C would) at the ``at``-th event."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.n = 0

    def __call__(self, _msg: str) -> None:
        self.n += 1
        if self.n == self.at:
            raise KeyboardInterrupt


@pytest.fixture(scope="session")
def recorded_code_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """Real SmolLM2-135M replies (benchmarks/harness_overhead.py's cassette) replayed on 46 easy
    generated code tasks through the real CLI: ``(store url, run id)``. Shared, since several
    diagnosis tests read the same run (diagnosing it again stores nothing new)."""
    import json

    bench = Path(__file__).resolve().parent.parent / "benchmarks" / "cassettes"
    work = tmp_path_factory.mktemp("recorded-code")
    env = {"SHARPEN_STORE": f"sqlite:///{work / 's.db'}"}
    res = sharpen("run", "code", "-E", "source=generated", "-E", "difficulty=easy", "-E",
                  "max_submissions=2", "--tasks", "46", "--seed", "0", "-c", "2", "--agent",
                  str(bench / "harness_overhead.agent.yaml"), "--model", "replay", "--model-arg",
                  f"cassette={bench / 'harness_overhead.jsonl'}", "--json",
                  cwd=work, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    return env["SHARPEN_STORE"], json.loads(res.stdout)["run"]["id"]
