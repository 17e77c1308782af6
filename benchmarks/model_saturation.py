"""Model saturation: how much of an OpenAI-compatible server's own throughput the runner gets.

What is measured
----------------
One model server on loopback serves the embedded GGUF (SmolLM2-135M-Instruct, Q4_1) with
``--threads`` threads: ``python -m llama_cpp.server`` (llama-cpp-python, one slot), or with
``--llama-server PATH --slots N`` llama.cpp's own ``llama-server --parallel N``. For each arm and
``--concurrency`` c the runner plays ``max(--tasks, c)`` tasks of ``sql`` (so that c episodes
are in flight) with the tool agent (text protocol, temperature 0, ``--max-tokens`` per reply, up
to ``--steps`` steps) through the ``openai`` model, in this process, on a fresh SQLite store.
In the same cell a bare httpx client sends the very conversations of an episode (for every
assistant message of every stored trajectory, the messages before it, with the same parameters)
straight to the server on one lane per slot, each lane one request at a time, conversation
after conversation — the order in which every slot reuses its prompt's prefix best. That is the
server's own maximum on this workload. It is measured twice, right before the run (the
conversations of the previous run of as many tasks: greedy decoding makes them the same) and
right after it (the run's own), and the cell's maximum is the mean, so a drift of the machine's
speed across the cell counts against neither side.

* runner tokens/s: completion tokens of the run ÷ (last episode end − first episode start);
* direct tokens/s: completion tokens of a replay ÷ its wall time;
* ratio = runner ÷ direct (target ≥ 0.95).
* ratio at equal in-flight: where ``c`` is below the slots, a run may keep only ``c``
  requests in flight, whereas the direct maximum keeps one per slot (batched decoding of
  several slots makes more tokens per second than one): the run's conversations replayed on
  ``c`` lanes right after it — the server's own rate with as many requests in flight as the
  run may have — and the runner ÷ that. Where ``c`` ≥ the slots it is the ratio itself. This
  is the ratio the target is judged on: no runner can make one request in flight decode as
  fast as four batched ones.

Repeats: the whole grid (every concurrency, every arm) runs ``--repeats`` (3) times, one grid
after the other, so a drift of the machine spreads over every cell; each cell's verdict is the
median of its repeats' ratios, every repeat shown. Why: one cell of one run moved by about
±0.08 between runs minutes apart on this 2-core machine (2026-12-04), as much as the target's
margin, so a single run could neither show the target met nor missed.

Arms: ``before`` — ``max_in_flight: none, cache_prompt: false`` (what the model did before it
had a limit: every episode's request goes straight to the server, which queues them);
``after`` — the defaults, ``max_in_flight: auto`` (found: 1 for llama-cpp-python's server, the
``total_slots`` of ``/props`` for llama-server), ``cache_prompt: auto`` and ``prefix_hold_s:
auto``; ``no-hold`` — the defaults but ``prefix_hold_s: 0`` (the gate alone, no place kept
for a conversation's next call); ``hold`` — the defaults but ``prefix_hold_s: 0.25`` (what
``auto`` gives llama-cpp-python's server, for ``llama-server``). Each row also has the
server's CPU seconds per completion token (``/proc``), direct ÷ runner, and the run's gate
counts (peak in flight, waited, resumed: calls that took the place their conversation's
previous call held; ``ended``: holds given back when their episode's agent was done;
``hold_at_end_s``: how long the gate held a place by the run's end).

Slots: llama-cpp-python 0.3.36's server holds one global lock around its model (two
``anyio.Lock`` in ``llama_cpp/server/app.py``): it serves one request at a time, and has no
``--parallel``/slots option. For more slots, ``benchmarks/build_llama_server.sh`` builds
``llama-server`` from the llama.cpp sources inside llama-cpp-python's sdist (PyPI).

Run: ``.venv/bin/python benchmarks/model_saturation.py`` → ``benchmarks/results/
model_saturation.md`` (and ``.json``); ``... --llama-server /tmp/llama-server --slots 4 --out
model_saturation_4slots``. Each grid of the default arms takes about 7 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from statistics import median
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
OUT = ROOT / "benchmarks" / "results"

from sharpen.core import AgentSpec, PluginRef  # noqa: E402
from sharpen.core.registry import REGISTRY  # noqa: E402
from sharpen.models.openai_compat import OpenAIModel  # noqa: E402
from sharpen.models.pricing import PricedModel, PriceTable  # noqa: E402
from sharpen.runner import RunConfig, Runner  # noqa: E402
from sharpen.runner.compose import select_tasks  # noqa: E402
from sharpen.store import Store  # noqa: E402

ARMS: dict[str, dict[str, Any]] = {
    "before": {"max_in_flight": "none", "cache_prompt": False},
    "after": {},
    "no-hold": {"prefix_hold_s": 0},
    "hold": {"prefix_hold_s": 0.25},
}


Conversation = list[dict[str, Any]]
"""The requests of one episode, in order: each its messages so far and the parameters."""


def agent(url: str, arm: str, max_tokens: int, steps: int) -> AgentSpec:
    return AgentSpec(
        name=f"saturation-{arm}",
        model=PluginRef(name="openai", args={"base_url": url, "tools": False, **ARMS[arm]}),
        params={"temperature": 0.0, "max_tokens": max_tokens},
        limits={"max_steps": steps, "max_tokens": 100_000, "max_seconds": 600},
    )


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process has used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run_arm(url: str, pid: int, arm: str, concurrency: int, args: argparse.Namespace,
                  tmp: Path, seen: dict[int, list[Conversation]]) -> dict[str, Any]:
    """One cell: the runner's tokens/s on ``max(--tasks, concurrency)`` tasks (so that
    ``concurrency`` episodes are in flight), against the direct replay's. ``seen``: per task
    count, the conversations of the previous run on this server."""
    store = Store(f"sqlite:///{tmp / f'{arm}-{concurrency}.db'}")
    environment = REGISTRY.create("env", PluginRef(name=args.env))
    try:
        tasks = select_tasks(environment, args.env, split=None, limit=max(args.tasks, concurrency), seed=0)
    finally:
        await environment.close()
    config = RunConfig(env=PluginRef(name=args.env), agent=agent(url, arm, args.max_tokens,
                                                                  args.steps),
                       tasks=tasks, concurrency=concurrency, seed=0)
    built: list[OpenAIModel] = []

    def factory(c: RunConfig) -> PricedModel:
        built.append(REGISTRY.create("model", c.agent.model))
        return PricedModel(built[-1], PriceTable.load())

    # Direct, right before the run: the conversations of this server's previous run of as
    # many tasks (greedy, so the same ones), when there was one; and right after it, the
    # run's own. Their mean is the cell's maximum, so a drift of the machine's speed during
    # the cell counts against neither side.
    before = await direct(url, pid, seen.get(len(tasks), []), args.slots)
    cpu0 = cpu_s(pid)
    summary = await Runner(store, progress=False, model_factory=factory).run(config)
    runner_cpu = cpu_s(pid) - cpu0
    trajs = list(store.iter_trajectories(summary.run_id))
    store.close()
    start = min(t.started_at for t in trajs)
    end = max(t.ended_at for t in trajs)
    runner_tokens = sum(t.usage.output_tokens for t in trajs)
    runner_s = (end - start).total_seconds()
    calls = sum(t.usage.calls for t in trajs)
    gate = await built[0].gate()  # the run's gate (this loop's), with its counts
    # The run's own conversations, replayed directly: the server's own maximum on them.
    seen[len(tasks)] = replay(trajs, args.max_tokens)
    after = await direct(url, pid, seen[len(tasks)], args.slots)
    # As many lanes as the run may have requests in flight, when that is fewer than the slots.
    equal = (await direct(url, pid, seen[len(tasks)], concurrency)
             if concurrency < args.slots else None)
    phases = [d for d in (before, after) if d["calls"]]
    runner_tps = runner_tokens / runner_s
    direct_tps = sum(d["tps"] for d in phases) / len(phases)
    direct_cpu = sum(d["cpu_s"] / d["tokens"] for d in phases) / len(phases)
    return {"arm": arm, "concurrency": concurrency, "episodes": len(trajs), "calls": calls,
            "direct_calls": after["calls"], "runner_tokens": runner_tokens,
            "runner_prompt_tokens": sum(t.usage.input_tokens for t in trajs),
            "runner_s": runner_s, "runner_tps": runner_tps, "direct_tps": direct_tps,
            "direct_before": before, "direct_after": after, "ratio": runner_tps / direct_tps,
            "direct_equal": equal,
            "ratio_equal": runner_tps / (equal["tps"] if equal else direct_tps),
            "runner_server_cpu_s": runner_cpu,
            "cpu_ratio": direct_cpu / (runner_cpu / runner_tokens),
            "gate": {"limit": gate.limit, "hold_s": gate.hold_s,
                     "hold_at_end_s": round(gate.hold_for(), 3), "peak": gate.peak,
                     "waited": gate.waited, "resumed": gate.resumed, "ended": gate.ended},
            "errors": sum(1 for t in trajs if t.outcome.error_kind == "infra")}


def replay(trajs: list[Any], max_tokens: int) -> list[Conversation]:
    """For every stored trajectory, one request per assistant message: the messages before
    it, with the run's parameters."""
    return [[{"model": "default", "messages": [m.to_openai() for m in t.messages[:i]],
              "temperature": 0.0, "max_tokens": max_tokens}
             for i, m in enumerate(t.messages) if m.role == "assistant"] for t in trajs]


async def direct(url: str, pid: int, conversations: list[Conversation],
                 lanes: int) -> dict[str, Any]:
    """Send ``conversations`` straight to the server on ``lanes`` (its slots) concurrent
    lanes, each one request at a time, conversation after conversation — the order in which
    each slot reuses its prompt's prefix best: the server's own maximum. Tokens/s and the
    server's CPU seconds."""
    if not conversations:
        return {"tps": 0.0, "tokens": 0, "cpu_s": 0.0, "calls": 0, "s": 0.0}
    tokens = calls = 0

    async def lane(mine: list[Conversation], client: httpx.AsyncClient) -> None:
        nonlocal tokens, calls
        for conversation in mine:
            for body in conversation:
                resp = await client.post(f"{url}/chat/completions", json=body)
                resp.raise_for_status()
                tokens += int(resp.json()["usage"]["completion_tokens"])
                calls += 1

    async with httpx.AsyncClient(timeout=600, trust_env=False) as client:
        t0, cpu0 = time.perf_counter(), cpu_s(pid)
        await asyncio.gather(*[lane(conversations[i::lanes], client) for i in range(lanes)])
        seconds, cpu = time.perf_counter() - t0, cpu_s(pid) - cpu0
    return {"tps": tokens / seconds, "tokens": tokens, "cpu_s": cpu, "calls": calls,
            "s": seconds}


def page(res: dict[str, Any]) -> str:
    lines = [
        "# Model saturation: the runner's completion tokens/s ÷ the server's own",
        "",
        f"`{res['command']}` — {res['started']} UTC, {res['wall_s']:.0f} s, load average "
        f"{res['load'][0]:.1f} → {res['load'][1]:.1f} on {res['cores']} cores (shared with "
        "other work).",
        "",
        f"{res['server']}, SmolLM2-135M-Instruct Q4_1, {res['threads']} thread(s). Workload: "
        f"max({res['tasks']}, concurrency) `{res['env']}` tasks, tool agent, text protocol, "
        f"temperature 0, max_tokens {res['max_tokens']}, up to {res['steps']} steps. Direct: "
        f"conversations replayed back to back on {res['slots']} lane(s), one per slot, right "
        "before the run (the previous run's of as many tasks, when there was one) and right "
        "after it (the run's own); the cell's maximum is their mean (see the script's "
        "docstring).",
        "",
        "Server CPU: CPU seconds the server process used per completion token, direct ÷ "
        "runner (1.0: the runner made the server do no more work per token than the best "
        "order does; prompts re-evaluated after another conversation's push it below).",
        "",
        "Ratio at equal in-flight: the runner ÷ the run's conversations replayed on as many "
        "lanes as the run's concurrency, where that is below the slots (else the ratio).",
        "",
        f"Verdicts: the median over {res.get('repeats', 1)} repeat(s) of the grid of the ratio "
        "at equal in-flight (target ≥ 0.95); every repeat's in the order they ran.",
        "",
        "| arm | concurrency | ratio at equal in-flight, every repeat | median | target ≥ 0.95 "
        "| ratio (direct on every slot), median | CPU ratio, median |",
        "|---|---:|---|---:|---|---:|---:|",
    ]
    for (arm, c), cell in verdicts(res["rows"]).items():
        lines.append(f"| {arm} | {c} | {', '.join(f'{x:.3f}' for x in cell['ratios_equal'])} | "
                     f"{cell['median_equal']:.3f} | {'met' if cell['met'] else 'not met'} | "
                     f"{cell['median_ratio']:.3f} | {cell['median_cpu']:.2f} |")
    lines += [
        "",
        "Every cell:",
        "",
        "| repeat | arm | concurrency | episodes | calls | runner tok/s | direct tok/s before, "
        "after | ratio | direct tok/s, c lanes | ratio at equal in-flight | server CPU s, runner "
        "| CPU ratio | gate |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in res["rows"]:
        before = f"{r['direct_before']['tps']:.2f}" if r["direct_before"]["calls"] else "–"
        equal = f"{r['direct_equal']['tps']:.2f}" if r.get("direct_equal") else "–"
        lines.append(f"| {r.get('repeat', 0) + 1} | {r['arm']} | {r['concurrency']} | "
                     f"{r['episodes']} | {r['calls']} | "
                     f"{r['runner_tps']:.2f} | {before}, {r['direct_after']['tps']:.2f} | "
                     f"{r['ratio']:.2f} | {equal} | {r['ratio_equal']:.2f} | "
                     f"{r['runner_server_cpu_s']:.1f} | "
                     f"{r['cpu_ratio']:.2f} | {r['gate']} |")
    return "\n".join(lines) + "\n"


def verdicts(rows: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    """Per (arm, concurrency), in the order first run: every repeat's ratio at equal
    in-flight, their median and whether it meets 0.95, and the medians of the ratio against
    every slot and of the CPU ratio."""
    cells: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in rows:
        cells.setdefault((r["arm"], r["concurrency"]), []).append(r)
    out = {}
    for key, rs in cells.items():
        equal = [r["ratio_equal"] for r in rs]
        out[key] = {"ratios_equal": equal, "median_equal": median(equal),
                    "met": median(equal) >= 0.95,
                    "median_ratio": median(r["ratio"] for r in rs),
                    "median_cpu": median(r["cpu_ratio"] for r in rs)}
    return out


def server_version(binary: str) -> str:
    """What ``llama-server --version`` says of its build (the line with ``version:``)."""
    import subprocess

    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    lines = [ln for ln in (out.stdout + out.stderr).splitlines() if "version" in ln]
    return lines[0].strip() if lines else "version unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env", default="sql")
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--arms", nargs="+", default=["before", "after"], choices=list(ARMS))
    ap.add_argument("--llama-server", metavar="PATH",
                    help="llama.cpp's llama-server binary (benchmarks/build_llama_server.sh "
                         "builds one) instead of llama-cpp-python's server")
    ap.add_argument("--slots", type=int, default=1, help="llama-server --parallel")
    ap.add_argument("--repeats", type=int, default=3,
                    help="how many times the whole grid runs (verdicts: medians)")
    ap.add_argument("--out", default="model_saturation")
    args = ap.parse_args()
    from importlib.metadata import version

    from servers import start_llama_server, start_llamacpp_server, stop_server

    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M")
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    if args.llama_server:
        url, proc = start_llamacpp_server(args.llama_server, args.slots, n_threads=args.threads)
        server = f"llama.cpp `llama-server` ({server_version(args.llama_server)}), --parallel {args.slots}"
    else:
        if args.slots != 1:
            ap.error("llama-cpp-python's server has one slot: --slots N needs --llama-server")
        url, proc = start_llama_server(n_threads=args.threads)
        server = (f"`python -m llama_cpp.server` (llama-cpp-python "
                  f"{version('llama-cpp-python')}), one slot")
    rows = []
    seen: dict[int, list[Conversation]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for repeat in range(args.repeats):
                (Path(tmp) / str(repeat)).mkdir()
                for c in args.concurrency:
                    for arm in args.arms:
                        row = asyncio.run(run_arm(url, proc.pid, arm, c, args,
                                                  Path(tmp) / str(repeat), seen))
                        row["repeat"] = repeat
                        print(json.dumps(row), flush=True)
                        rows.append(row)
    finally:
        stop_server(proc)
    res = {"command": " ".join([".venv/bin/python benchmarks/model_saturation.py",
                                *sys.argv[1:]]),
           "started": started, "wall_s": time.perf_counter() - t0,
           "load": [load0, os.getloadavg()[0]], "cores": len(os.sched_getaffinity(0)),
           "server": server, "slots": args.slots, "env": args.env, "tasks": args.tasks,
           "steps": args.steps, "max_tokens": args.max_tokens, "threads": args.threads,
           "repeats": args.repeats, "rows": rows}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{args.out}.json").write_text(json.dumps(res, indent=2, default=str))
    text = page(res)
    (OUT / f"{args.out}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
