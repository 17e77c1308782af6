"""What a Reflexion retry should carry over, measured: memory ``none`` vs ``result`` vs
``feedback`` vs ``reflections`` on the embedded model.

What is measured
----------------
The tasks and the seed spec of ``sharpen demo`` (generated ``code`` tasks at ``easy``, one
submission each; the embedded SmolLM2-135M, temperature 0, 200 tokens per reply): the first
``--tasks`` tasks of the test split.

1. The plain tool agent (the demo's seed spec) runs every task once, through the real Runner
   into a SQLite store.
2. Each memory variant of the ``reflexion`` agent with ``--trials`` attempts runs the tasks
   the plain agent failed. Its first attempt is the plain agent's (same prompt, seed and
   params), so it solves the same tasks the plain agent solved; running those again would
   only repeat them.

The table gives, per variant, the failed tasks it fixed, the resulting success over all
tasks, and the tokens (prompt + completion) per failed task. Written to
``benchmarks/results/reflexion_memory.md``.

    python benchmarks/reflexion_memory.py            # about an hour on two cores
    python benchmarks/reflexion_memory.py --memories none,result --out /tmp/rm.md
    python benchmarks/reflexion_memory.py --memories result --result-chars 200
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from machine_info import cpu_name, version
from reflexion_feedback import run_agent

from sharpen.cli.demo_cmd import DEMO_ENV
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.stats.intervals import wilson
from sharpen.store import Store

HERE = Path(__file__).resolve().parent
MEMORIES = ("none", "result", "feedback", "reflections")


async def run(store: Store, agent: PluginRef, tasks: list) -> list:
    """The stored trajectories of ``agent`` (on the demo's seed spec) on ``tasks``."""
    return list(store.iter_trajectories(await run_agent(store, agent, tasks)))


def tokens(t) -> int:
    return t.usage.input_tokens + t.usage.output_tokens


async def main(args: argparse.Namespace) -> str:
    started = datetime.now(UTC)
    load = os.getloadavg()[0]
    tasks = REGISTRY.create("env", DEMO_ENV).list_tasks(split="test", limit=args.tasks, seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{Path(tmp) / 'bench.db'}")
        t0 = time.perf_counter()
        plain = await run(store, PluginRef(name="tool"), tasks)
        solved = {t.task.hash() for t in plain if t.outcome.success}
        failed = [t for t in tasks if t.hash() not in solved]
        rows = [("plain tool agent, 1 trial", "—", len(solved), sum(map(tokens, (
            t for t in plain if t.task.hash() not in solved))) / max(len(failed), 1),
            time.perf_counter() - t0)]
        print(f"plain: {len(solved)}/{len(tasks)}", flush=True)
        for memory in args.memories.split(","):
            t0 = time.perf_counter()
            agent = PluginRef(name="reflexion", args={"trials": args.trials, "memory": memory,
                                                      "result_chars": args.result_chars})
            trs = await run(store, agent, failed)
            fixed = sum(bool(t.outcome.success) for t in trs)
            rows.append((f"reflexion, {args.trials} trials, memory `{memory}`", f"{fixed}/{len(failed)}",
                         len(solved) + fixed, sum(map(tokens, trs)) / max(len(trs), 1),
                         time.perf_counter() - t0))
            print(f"{memory}: fixed {fixed}/{len(failed)}", flush=True)
    lines = [
        "# Reflexion memory on the embedded model",
        "",
        f"`python benchmarks/reflexion_memory.py --tasks {args.tasks} --trials {args.trials} "
        f"--memories {args.memories} --result-chars {args.result_chars}` — "
        f"{started:%Y-%m-%d %H:%M} UTC, {cpu_name()}, {len(os.sched_getaffinity(0))} CPU(s), load "
        f"average {load:.1f} at the start and {os.getloadavg()[0]:.1f} at the end; sharpen "
        f"{version('sharpen')}, llama-cpp-python {version('llama-cpp-python')}.",
        "",
        f"The first {args.tasks} test tasks of `sharpen demo` (generated `code`, easy, one "
        "submission each), its seed spec (SmolLM2-135M, temperature 0, 200 tokens). Each "
        "variant runs the tasks the plain agent failed; its first attempt is the plain agent's. "
        "Definitions are in the script's docstring.",
        "",
        "| agent | failed tasks fixed | success, all tasks [95% Wilson CI] | tokens per failed task "
        "| wall s |",
        "|---|---|---|---|---|",
    ]
    for name, fixed, wins, tok, wall in rows:
        ci = wilson(wins, len(tasks))
        lines.append(f"| {name} | {fixed} | {wins}/{len(tasks)} = {wins / len(tasks):.0%} "
                     f"[{ci.low:.0%}, {ci.high:.0%}] | {tok:,.0f} | {wall:.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=50)
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--memories", default=",".join(MEMORIES),
                    help="comma-separated, from: " + ", ".join(MEMORIES))
    ap.add_argument("--result-chars", type=int, default=1200,
                    help="characters of a failed attempt's test report that a memory entry keeps")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "reflexion_memory.md")
    a = ap.parse_args()
    page = asyncio.run(main(a))
    a.out.write_text(page)
    print(page)
