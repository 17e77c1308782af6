"""Executor scaling: episodes/s with ``--executor local`` and ``--executor ray`` on this machine.

What is measured
----------------
Every cell is one ``sharpen run`` process (the real CLI, ``--json``, progress off, a fresh
SQLite store) playing the same 64 generated easy ``code`` tasks, ``--epochs`` (16) times each,
with SmolLM2-135M's real replies replayed from ``benchmarks/cassettes/harness_overhead.jsonl``
(the replay model: no model load, so what is left is real work per episode — each submission's
hidden tests run in the sandbox — and the harness; the cassette is copied once per epoch with
that epoch's seed, as ``harness_overhead.py`` does). Cells:

* ``local c=2``: the local executor, 2 episodes in flight (this machine has 2 cores);
* ``ray 1 node c=2``: a Ray head node with ``--num-cpus 2`` on loopback, 2 actor slots;
* ``ray 1 node c=2, chunk=1``: the same, one episode per actor call (``--executor-arg
  chunk=1``) instead of the executor's batches of up to 8 streamed back one by one;
* ``ray 2 nodes c=2`` and ``c=3``: the same head plus a second node (``--num-cpus 1``) on
  the same machine: the same 2 physical cores, so this measures what spreading over nodes
  costs, not what more machines give.

Numbers: episodes/s of the *whole run* = episodes ÷ the runner's wall time
(``summary.wall_seconds``: from the first episode handed to the executor to the last one
stored, so Ray's connection and actor start-up are inside it, Python's start-up is not);
*steady* episodes/s = the middle half of the episodes ÷ the time between the first and the last
of them finishing (the rate a long run settles at). Driver CPU ms/episode = the difference of
the ``sharpen`` process's user + system CPU between a full and a 16-episode run ÷ the
difference in episodes (start-up
cancels out; under ``ray`` that is what the driver spends per episode receiving, storing and
counting it, under ``local`` the sandboxed tests, children of the process, are in it too).
Machine CPU ms/episode = the busy CPU time of the whole machine (``/proc/stat``: every process,
Ray's raylet, GCS and actors and the sandboxes included) over a full run ÷ its episodes.
Store ms/trajectory = one writer saving the run's trajectories again into a fresh SQLite store in
batches of 8 (what the runner's writer does).

Repeats: the whole grid runs ``--repeats`` (5) times, one grid after the other — ``local``
with no Ray process on the machine, then a fresh one-node cluster for the ``ray`` cells, a
second node added for the two-node cells, the cluster killed — so a drift of the machine
spreads over every cell; the ratios use each cell's median, and every repeat is shown (the
load average at the start is in the results). Why 1,024 episodes and interleaved grids: with
64 episodes the steady window was half a second, and the best of two repeats moved the ratio
between 0.88 and 1.07 in two runs a minute apart (2026-12-02); with 256 (the steady window
0.8 s) and each cell's three repeats run back to back, one cell's repeats still spread by
±10% (``local`` 205, 168, 167 episodes/s) and a run of three repeats each gave 0.89, another
0.77 (2026-12-04). At 1,024 the steady window is about 3.5 s.

From those, the results file works out what a 100-node cluster of such nodes would ask of the
one driver and store (episodes/s, store writes/s, model tokens/s from the tokens per episode
stored) and which gives first.

Usage::

    python benchmarks/executor_scaling.py            # ~7 min on 2 cores
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

from harness_overhead import (
    AGENT_YAML,
    CASSETTE,
    N_TASKS,
    RUN_SEED,
    epoch_lines,
    load_cassette,
    run_config,
    tasks,
)
from machine_info import cores, cpu_name, version

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "executor_scaling.md"
RAY = str(Path(sys.executable).parent / "ray")
EPOCHS = 16
RUN = ["-m", "sharpen.cli.main", "run", "code", "-E", "source=generated", "-E", "difficulty=easy",
       "-E", "max_submissions=2", "--seed", str(RUN_SEED), "--agent", str(AGENT_YAML),
       "--model", "replay", "--no-progress", "--json"]


def epoch_cassette(tmp: Path, epochs: int) -> Path:
    """The recorded cassette with every line copied once per epoch (its seed and key)."""
    recorded = tasks()
    config = run_config(CASSETTE, 1, 1, recorded)
    by_seed = {config.attempt_seed(t, 0): t for t in recorded}
    out = tmp / "cassette.jsonl"
    with out.open("w", encoding="utf-8") as f:
        for rec in load_cassette():
            for line in epoch_lines(rec, by_seed[rec["request"]["params"]["seed"]], config, epochs):
                f.write(line + "\n")
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_node(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    """``ray start ... --block`` in a session of its own (ended by :func:`kill_session`)."""
    return subprocess.Popen(
        [RAY, "start", *args, "--node-ip-address", "127.0.0.1", "--block", "--disable-usage-stats",
         "--dashboard-agent-listen-port", str(free_port())],
        stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
        stdin=subprocess.DEVNULL)


def kill_session(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL every process of ``proc``'s session (the node and the workers it started)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[3]) == proc.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry), signal.SIGKILL)
    proc.wait(timeout=30)


def wait_cpus(address: str, cpus: float, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        out = subprocess.run([RAY, "status", "--address", address], capture_output=True,
                             text=True, timeout=60).stdout
        found = re.search(r"/(\d+(?:\.\d+)?) CPU", out)
        if found and float(found.group(1)) == cpus:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the cluster at {address} never had {cpus} CPUs")
        time.sleep(1)


def one_run(tmp: Path, concurrency: int, extra: list[str]) -> dict[str, Any]:
    """One ``sharpen run`` process; its summary, store URL and CPU time."""
    url = f"sqlite:///{tmp / f'run{time.monotonic_ns()}.db'}"
    proc = subprocess.Popen([sys.executable, *RUN, "--model-arg", f"cassette={tmp / 'cassette.jsonl'}",
                             "-c", str(concurrency), *extra, "--store", url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp)
    out, err = proc.communicate(timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(err.decode()[-3000:])
    from sharpen.store import Store

    summary, run_id = json.loads(out)["summary"], json.loads(out)["run"]["id"]
    ends = sorted(t.ended_at for t in Store(url).iter_trajectories(run_id, with_steps=False)
                  if t.ended_at is not None)
    # The middle half of the finishes: neither the slots' start-up nor the last stragglers.
    lo, hi = len(ends) // 4, (3 * len(ends)) // 4
    steady = (hi - lo) / (ends[hi] - ends[lo]).total_seconds()
    return {"summary": summary, "url": url, "run_id": run_id, "steady": steady}


def machine_busy_s() -> float:
    """Busy CPU seconds of the whole machine since boot (``/proc/stat``: all but idle and
    iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def measure(tmp: Path, concurrency: int, extra: list[str], n_tasks: int,
            epochs: int) -> dict[str, Any]:
    """One run: its rates, the CPU seconds of the ``sharpen`` process (and the children it
    waited for) and of the whole machine."""
    import resource

    before, busy = resource.getrusage(resource.RUSAGE_CHILDREN), machine_busy_s()
    run = one_run(tmp, concurrency, [*extra, "--tasks", str(n_tasks), "--epochs", str(epochs)])
    after, busy = resource.getrusage(resource.RUSAGE_CHILDREN), machine_busy_s() - busy
    s = run["summary"]
    return {"rate": s["n_trajectories"] / s["wall_seconds"], "steady": run["steady"],
            "driver_cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "machine_cpu_s": busy, "episodes": n_tasks * epochs, "run": run}


def add(cells: dict[str, dict[str, Any]], name: str, run: dict[str, Any]) -> None:
    """Append one repeat to its cell (lists of every repeat's numbers; the last run kept)."""
    cell = cells.setdefault(name, {"rates": [], "steady": [], "driver_cpu_s": [],
                                   "machine_cpu_s": [], "episodes": run["episodes"]})
    for key, into in (("rate", "rates"), ("steady", "steady"), ("driver_cpu_s", "driver_cpu_s"),
                      ("machine_cpu_s", "machine_cpu_s")):
        cell[into].append(run[key])
    cell["last"] = run["run"]


@contextlib.contextmanager
def cluster(tmp: Path) -> Any:
    """A fresh one-node Ray cluster on loopback (2 CPUs), its address, and a function that adds
    a second node (1 CPU) on the same machine; every node killed on leaving."""
    port = free_port()
    address = f"127.0.0.1:{port}"
    nodes = [start_node(["--head", "--port", str(port), "--num-cpus", "2",
                         "--include-dashboard=false", "--ray-client-server-port", str(free_port()),
                         "--temp-dir", str(tmp / "ray")], tmp / "head.log")]

    def second() -> None:
        nodes.append(start_node(["--address", address, "--num-cpus", "1"], tmp / "second.log"))
        wait_cpus(address, 3)

    try:
        wait_cpus(address, 2)
        yield address, second
    finally:
        for node in reversed(nodes):
            kill_session(node)


def store_cost(url: str, run_id: str) -> tuple[float, float]:
    """(ms per trajectory for one writer re-saving the run's trajectories in batches of 8,
    tokens per episode) — into a fresh SQLite store next to the first."""
    from sharpen.store import Store

    src = Store(url)
    trajs = list(src.iter_trajectories(run_id))
    run = src.get_run(run_id)
    tokens = sum(t.usage.input_tokens + t.usage.output_tokens for t in trajs) / len(trajs)
    dst = Store(url.replace(".db", "-copy.db"))
    dst.create_run(run.manifest, run.agent, [t.task for t in trajs])
    started = time.perf_counter()
    for i in range(0, len(trajs), 8):
        dst.save_trajectories(trajs[i:i + 8])
    return 1000 * (time.perf_counter() - started) / len(trajs), tokens


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=EPOCHS)
    args = ap.parse_args()
    full = (N_TASKS, args.epochs)
    load = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="sharpen-xs-", dir="/tmp"))
    epoch_cassette(tmp, args.epochs)
    cells: dict[str, dict[str, Any]] = {}
    for repeat in range(args.repeats):
        add(cells, "local c=2", measure(tmp, 2, ["--executor", "local"], *full))
        if repeat == 0:
            add(cells, "local c=2, 16 episodes", measure(tmp, 2, ["--executor", "local"], 16, 1))
        with cluster(tmp) as (address, second):
            ray = ["--executor", "ray", "--ray-address", address]
            add(cells, "ray 1 node c=2", measure(tmp, 2, ray, *full))
            if repeat == 0:
                add(cells, "ray 1 node c=2, 16 episodes", measure(tmp, 2, ray, 16, 1))
            # One episode per actor call, as before batches: what the batching buys.
            add(cells, "ray 1 node c=2, chunk=1",
                measure(tmp, 2, [*ray, "--executor-arg", "chunk=1"], *full))
            second()
            add(cells, "ray 2 nodes c=2", measure(tmp, 2, ray, *full))
            add(cells, "ray 2 nodes c=3", measure(tmp, 3, ray, *full))
        print(f"grid {repeat + 1} of {args.repeats} done", file=sys.stderr, flush=True)
    last = cells["local c=2"]["last"]
    write_ms, tokens = store_cost(last["url"], last["run_id"])
    shutil.rmtree(tmp, ignore_errors=True)
    report(cells, write_ms, tokens, load, args.epochs)


def marginal_cpu_ms(big: dict[str, Any], small: dict[str, Any], key: str = "driver_cpu_s") -> float:
    """CPU per extra episode (``key``: the driver's or the machine's): the difference of the
    full cell's median and the small run's ÷ their difference in episodes (start-up — imports,
    Ray's connection, actors — cancels out)."""
    return (1000 * (median(big[key]) - small[key][0])
            / (big["episodes"] - small["episodes"]))


def report(cells: dict[str, dict[str, Any]], write_ms: float, tokens: float, load: float,
           epochs: int) -> None:
    whole_rate = {k: median(v["rates"]) for k, v in cells.items()}
    steady = {k: median(v["steady"]) for k, v in cells.items()}
    whole = whole_rate["ray 1 node c=2"] / whole_rate["local c=2"]
    ratio = steady["ray 1 node c=2"] / steady["local c=2"]
    driver_ms = marginal_cpu_ms(cells["ray 1 node c=2"], cells["ray 1 node c=2, 16 episodes"])
    local_ms = marginal_cpu_ms(cells["local c=2"], cells["local c=2, 16 episodes"])
    machine = {k: marginal_cpu_ms(cells[f"{k} c=2"], cells[f"{k} c=2, 16 episodes"],
                                  "machine_cpu_s") for k in ("local", "ray 1 node")}
    per_node = steady["ray 1 node c=2"]  # a node like this one: 2 cores
    need = 100 * per_node
    limits = {"the driver's CPU (one process receives and stores every episode)": 1000 / driver_ms,
              "one SQLite writer": 1000 / write_ms}
    first = min(limits, key=lambda k: limits[k])
    lines = [
        "# Executor scaling: local vs ray",
        "",
        "`python benchmarks/executor_scaling.py` (see its docstring for what is measured). "
        f"Machine: {cpu_name()}, {cores()} cores, load average {load:.1f} at the start "
        f"(shared with other work); Python {sys.version.split()[0]}, ray {version('ray')}.",
        "",
        f"Workload: {N_TASKS} generated easy `code` tasks × {epochs} epochs, SmolLM2-135M's "
        "recorded replies replayed (sandboxed hidden tests run for every submission); each "
        "ratio below is of the cells' medians.",
        "",
        "- *whole run*: episodes ÷ the runner's wall time (Ray's connection and actor start-up "
        "inside it);",
        "- *steady*: the middle half of the episodes ÷ the time between the first and the last "
        "of them finishing (the 25th to the 75th percentile of finish times: start-up and the "
        "last stragglers left out — the rate a long run settles at).",
        "",
        "| cell | episodes | whole run, episodes/s (every repeat) | steady, episodes/s (every repeat) "
        "| steady, median | driver CPU s | machine CPU ms/episode, median |",
        "|---|---:|---|---|---:|---:|---:|",
    ]
    for k, v in cells.items():
        lines.append(f"| {k} | {v['episodes']} | {', '.join(f'{r:.2f}' for r in v['rates'])} | "
                     f"{', '.join(f'{r:.2f}' for r in v['steady'])} | {steady[k]:.2f} | "
                     f"{min(v['driver_cpu_s']):.2f} | "
                     f"{1000 * median(v['machine_cpu_s']) / v['episodes']:.1f} |")
    unbatched = steady["ray 1 node c=2, chunk=1"] / steady["local c=2"]
    lines += [
        "",
        f"**ray ÷ local at equal cores (2), steady: {ratio:.2f}** (target ≥ 0.9: "
        f"{'met' if ratio >= 0.9 else 'not met'}); one episode per actor call (chunk=1): "
        f"{unbatched:.2f}; whole run, start-up included: {whole:.2f}. "
        f"Two nodes ÷ one node at concurrency 2, steady: "
        f"{steady['ray 2 nodes c=2'] / steady['ray 1 node c=2']:.2f} (the second node shares "
        "the same 2 physical cores, so no gain is possible here; the ratio is the cost of "
        "spreading).",
        "",
        "## What 100 such nodes would need",
        "",
        f"Measured per episode: {tokens:.0f} model tokens (prompt + completion, as stored); "
        f"{driver_ms:.1f} ms of driver CPU under `ray` ({local_ms:.1f} ms under `local`, where "
        f"the driver also plays the episode), each the difference between a "
        f"{cells['local c=2']['episodes']}-episode and a 16-episode run ÷ the difference; "
        f"{write_ms:.2f} ms for one writer to store a trajectory (SQLite, "
        f"batches of 8); the whole machine's CPU, every process, {machine['ray 1 node']:.1f} ms "
        f"under `ray` against {machine['local']:.1f} ms under `local` (the same differences).",
        "",
        f"A node like this one plays {per_node:.2f} episodes/s (steady), so 100 of them play "
        f"{need:.0f} episodes/s and need:",
        "",
        f"- store writes: {need:.0f} trajectories/s (one SQLite writer does "
        f"{1000 / write_ms:.0f}/s);",
        f"- the driver: {need * driver_ms / 1000:.1f} CPU-seconds per second "
        f"(one driver process does {1000 / driver_ms:.0f} episodes/s);",
        f"- the model: {need * tokens:,.0f} tokens/s across its endpoints.",
        "",
        f"First bottleneck: **{first}**, at {limits[first]:.0f} episodes/s — "
        f"{limits[first] / per_node:.1f} nodes like this one"
        + (" (below 100)." if limits[first] < need else " (above 100: the model endpoints "
           "are the limit before the driver or the store)."),
        "",
    ]
    RESULTS.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
