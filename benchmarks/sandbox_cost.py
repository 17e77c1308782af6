"""Sandbox cost per code submission: one ``run_tests`` of a small problem, sequentially.

For each way of sandboxing (``forkserver``: ``run_tests``'s default, a child of the fork server,
where privileged bubblewrap allows one; ``bwrap``: a fresh bubblewrap sandbox per run;
``fallback``: what ``use_bwrap=False`` gets here) the script runs ``run_tests`` on a
three-assert problem with a correct program, once as a warm-up, then ``--runs`` times one after
the other, and reports:

* wall ms: median and minimum of the wall time of one ``run_tests`` (sandbox created, files
  written, harness run, sandbox removed; with the fork server the sandbox is removed in the
  background once the verdict is known, so that part overlaps with the next run);
* runs/s: runs divided by the wall time of the whole series, the background closes included
  (the series runs under a ``Closing``, closed before the clock stops, as a run does);
* host CPU ms: CPU time of this process per run (spawning, the event loop, the ``/proc``
  scans that find leftover processes, cleanup), not of the sandboxed processes;
* machine CPU ms: CPU time of the whole machine per run (``/proc/stat``), the sandboxed
  processes and the fork server included; other jobs on the machine inflate it too;
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
from collections.abc import Callable

from sharpen.envs.code.problem import CodeProblem
from sharpen.envs.code.verifier import harness_sandbox, run_tests
from sharpen.sandbox.closing import Closing
from sharpen.sandbox.local import LocalSandbox, bwrap_usable

PROBLEM = CodeProblem(
    task_id="bench/add", prompt="", context="", entry_point="add",
    test="def check(candidate):\n    assert candidate(1, 2) == 3\n"
         "    assert candidate(-5, 5) == 0\n    assert candidate(2, 5) == 7\n",
)
PROGRAM = "def add(a, b):\n    return a + b\n"


def machine_cpu() -> float:
    """Seconds of CPU the whole machine has spent (all cores, idle and iowait excluded)."""
    with open("/proc/stat") as fh:
        ticks = [int(x) for x in fh.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


FACTORIES: dict[str, Callable[[], LocalSandbox]] = {
    "forkserver": harness_sandbox,
    "bwrap": functools.partial(LocalSandbox, use_bwrap=True),
    "fallback": functools.partial(LocalSandbox, use_bwrap=False),
}


async def measure(factory: Callable[[], LocalSandbox], runs: int) -> dict[str, float | str]:
    isolation = factory().isolation  # a throwaway sandbox, removed when collected
    await run_tests(PROGRAM, PROBLEM, sandbox_factory=factory)  # warm-up (closes before returning)
    walls = []
    closing = Closing()  # as in a run: closes go on in the background, waited for at the end
    cpu0, machine0, start = time.process_time(), machine_cpu(), time.perf_counter()
    with closing.scope():
        for _ in range(runs):
            t0 = time.perf_counter()
            report = await run_tests(PROGRAM, PROBLEM, sandbox_factory=factory)
            walls.append(time.perf_counter() - t0)
            if not report.all_passed:
                raise SystemExit(f"the sandbox failed a correct program: {report.feedback_text()}")
    await closing.close()
    return {"isolation": isolation, "median": statistics.median(walls) * 1e3,
            "min": min(walls) * 1e3, "rate": runs / (time.perf_counter() - start),
            "cpu": (time.process_time() - cpu0) / runs * 1e3,
            "machine": (machine_cpu() - machine0) / runs * 1e3}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--label", default="")
    ap.add_argument("--modes", default=",".join(FACTORIES),
                    help="comma-separated, from: " + ", ".join(FACTORIES))
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if not bwrap_usable():
        modes = [m for m in modes if m == "fallback"]
    print("| version | isolation | wall ms, median | wall ms, min | runs/s | host CPU ms "
          "| machine CPU ms | load before → after |")
    print("|---|---|---|---|---|---|---|---|")
    for mode in modes:
        load0 = os.getloadavg()[0]
        r = asyncio.run(measure(FACTORIES[mode], args.runs))
        print(f"| {args.label} | {r['isolation']} | {r['median']:.1f} | {r['min']:.1f} "
              f"| {r['rate']:.0f} | {r['cpu']:.1f} | {r['machine']:.1f} "
              f"| {load0:.2f} → {os.getloadavg()[0]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
