"""Sandbox cost per code submission: one ``run_tests`` of a small problem, sequentially.

For each isolation (``bwrap``: bubblewrap, ``fallback``: what ``use_bwrap=False`` gets here)
the script runs ``run_tests`` on a three-assert problem with a correct program, once as a
warm-up, then ``--runs`` times one after the other, and reports:

* wall ms: median and minimum of the wall time of one ``run_tests`` (sandbox created, files
  written, harness run, sandbox removed);
* host CPU ms: CPU time of this process per run (spawning, the event loop, the ``/proc``
  scans that find leftover processes, cleanup), not of the sandboxed processes;
* load: the 1-minute load average before and after; on a shared machine a load above the core
  count inflates every wall time.

Usage::

    python benchmarks/sandbox_cost.py                  # 30 runs per isolation
    python benchmarks/sandbox_cost.py --runs 60 --label after

It prints one markdown table row per isolation (with ``--label`` in the first column), to paste
into ``docs/sandbox.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import statistics
import time

from sharpen.envs.code.problem import CodeProblem
from sharpen.envs.code.verifier import run_tests
from sharpen.sandbox.local import LocalSandbox, bwrap_usable

PROBLEM = CodeProblem(
    task_id="bench/add", prompt="", context="", entry_point="add",
    test="def check(candidate):\n    assert candidate(1, 2) == 3\n"
         "    assert candidate(-5, 5) == 0\n    assert candidate(2, 5) == 7\n",
)
PROGRAM = "def add(a, b):\n    return a + b\n"


async def measure(use_bwrap: bool, runs: int) -> dict[str, float | str]:
    factory = functools.partial(LocalSandbox, use_bwrap=use_bwrap)
    isolation = factory().isolation  # a throwaway sandbox, removed when collected
    await run_tests(PROGRAM, PROBLEM, sandbox_factory=factory)  # warm-up
    walls = []
    cpu0 = time.process_time()
    for _ in range(runs):
        t0 = time.perf_counter()
        report = await run_tests(PROGRAM, PROBLEM, sandbox_factory=factory)
        walls.append(time.perf_counter() - t0)
        if not report.all_passed:
            raise SystemExit(f"the sandbox failed a correct program: {report.feedback_text()}")
    return {"isolation": isolation, "median": statistics.median(walls) * 1e3,
            "min": min(walls) * 1e3, "cpu": (time.process_time() - cpu0) / runs * 1e3}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    modes = ([True] if bwrap_usable() else []) + [False]
    print("| version | isolation | wall ms, median | wall ms, min | host CPU ms | load before → after |")
    print("|---|---|---|---|---|---|")
    for use_bwrap in modes:
        load0 = os.getloadavg()[0]
        r = asyncio.run(measure(use_bwrap, args.runs))
        print(f"| {args.label} | {r['isolation']} | {r['median']:.1f} | {r['min']:.1f} "
              f"| {r['cpu']:.1f} | {load0:.2f} → {os.getloadavg()[0]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
