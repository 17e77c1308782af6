"""The embedded model on its own thread against asyncio's shared pool: same requests, wall time.

What is measured
----------------
``sharpen demo``'s seed agent (SmolLM2-135M, greedy, 200 tokens per reply; ``DEMO_SPEC``) runs
the first ``--tasks`` test tasks of the demo's environment through sharpen's real
:class:`~sharpen.runner.Runner` into a SQLite store, once per arm, ``--reps`` times in turn, each
run in a fresh process (an arm leaves llama.cpp threads behind that would slow the next):

* ``own thread`` — what :class:`~sharpen.models.local.LocalModel` does: every llama.cpp call
  runs on the loaded model's one executor thread;
* ``shared pool`` — the peer, what it did before: every call goes through
  ``asyncio.to_thread``, the pool the store's writes and the sandbox also use.

Each process loads the model on one task first, outside the timing. Decoding is
greedy and seeded, so both arms generate the same replies (checked: the script fails if their
success patterns differ). Reported: the median over reps of the run's wall time and of the
model's summed generation time (``Step.model_seconds``), and the ratio shared pool / own thread.

Usage::

    python benchmarks/local_model_thread.py              # 12 tasks, 2 reps per arm (~3 min)
    python benchmarks/local_model_thread.py --tasks 20 --reps 3

Results go to ``benchmarks/results/local_model_thread.md`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from machine_info import cores, cpu_name, version

from sharpen.cli.demo_cmd import DEMO_ENV, DEMO_SPEC
from sharpen.core.registry import REGISTRY
from sharpen.models import local
from sharpen.runner import RunConfig, Runner
from sharpen.store import Store

HERE = Path(__file__).resolve().parent


async def _pooled(self: local._Shared, fn: Any, *args: Any) -> Any:
    """The peer's call path: whichever thread of asyncio's shared pool is free."""
    return await asyncio.to_thread(fn, *args)


async def one_run(store: Store, tasks: list) -> tuple[float, float, list[bool]]:
    """Wall seconds, summed model seconds and the success pattern of one run."""
    t0 = time.perf_counter()
    summary = await Runner(store, progress=False).run(RunConfig(env=DEMO_ENV, agent=DEMO_SPEC, tasks=tasks))
    wall = time.perf_counter() - t0
    trs = sorted(store.iter_trajectories(summary.run_id), key=lambda t: t.task.hash())
    model_s = sum(s.model_seconds for t in trs for s in t.steps)
    return wall, model_s, [bool(t.outcome and t.outcome.success) for t in trs]


async def child(arm: str, n_tasks: int) -> dict:
    """One timed run on ``arm`` in this process, after an untimed one that loads the model."""
    if arm == "shared pool":
        local._Shared.call = _pooled
    tasks = REGISTRY.create("env", DEMO_ENV).list_tasks(split="test", limit=n_tasks)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{Path(tmp) / 'bench.db'}")
        await one_run(store, tasks[-1:])
        wall, model_s, pattern = await one_run(store, tasks)
    return {"wall": wall, "model": model_s, "pattern": pattern}


def main(args: argparse.Namespace) -> str:
    started = datetime.now(UTC)
    load = os.getloadavg()[0]
    arms = ("own thread", "shared pool")
    walls: dict[str, list[float]] = {a: [] for a in arms}
    models: dict[str, list[float]] = {a: [] for a in arms}
    patterns: dict[str, list[bool]] = {}
    for rep in range(args.reps):
        for arm in arms if rep % 2 == 0 else arms[::-1]:
            out = subprocess.run([sys.executable, __file__, "--child", arm, "--tasks", str(args.tasks)],
                                 capture_output=True, text=True, check=True).stdout
            got = json.loads(out.strip().splitlines()[-1])
            walls[arm].append(got["wall"])
            models[arm].append(got["model"])
            if patterns.setdefault(arm, got["pattern"]) != got["pattern"]:
                raise SystemExit(f"{arm}: the replies changed between reps")
            print(f"rep {rep + 1} {arm}: wall {got['wall']:.1f} s, model {got['model']:.1f} s", flush=True)
    if patterns["own thread"] != patterns["shared pool"]:
        raise SystemExit("the arms solved different tasks: they did not make the same requests")
    med = {a: (statistics.median(walls[a]), statistics.median(models[a])) for a in arms}
    lines = [
        "# The embedded model on its own thread against asyncio's shared pool",
        "",
        f"`python benchmarks/local_model_thread.py --tasks {args.tasks} --reps {args.reps}` — "
        f"{started:%Y-%m-%d %H:%M} UTC, {cpu_name()}, {cores()} CPU(s), load average "
        f"{load:.1f} at the start; sharpen {version('sharpen')}, llama-cpp-python "
        f"{version('llama-cpp-python')}.",
        "",
        f"`sharpen demo`'s seed agent on its first {args.tasks} test tasks, a fresh process per "
        f"run; both arms solved the same {sum(patterns['own thread'])} tasks. Median of "
        f"{args.reps} runs per arm, arms alternated.",
        "",
        "| arm | run wall s | model s |",
        "|---|---|---|",
        *(f"| {a} | {med[a][0]:.1f} | {med[a][1]:.1f} |" for a in arms),
        f"| **shared pool / own thread** | **{med['shared pool'][0] / med['own thread'][0]:.2f}×** | "
        f"**{med['shared pool'][1] / med['own thread'][1]:.2f}×** |",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=12)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "local_model_thread.md")
    parser.add_argument("--child", choices=("own thread", "shared pool"), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child:
        print(json.dumps(asyncio.run(child(arguments.child, arguments.tasks))))
        sys.exit()
    text = main(arguments)
    arguments.out.write_text(text)
    print(text)
