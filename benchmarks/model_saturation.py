"""Model saturation: how much of an OpenAI-compatible server's own throughput the runner gets.

What is measured
----------------
One ``python -m llama_cpp.server`` (llama-cpp-python) on loopback serves the embedded GGUF
(SmolLM2-135M-Instruct, Q4_1) with ``--n_threads`` threads. For each arm and ``--concurrency``
the runner plays ``--tasks`` tasks of ``sql`` with the tool agent (text protocol, temperature
0, ``--max-tokens`` per reply, up to ``--steps`` steps) through the ``openai`` model, in this
process, on a fresh SQLite store. Then, in the same run, a bare httpx client sends the very
conversations the runner's episodes had (for every assistant message of every stored
trajectory, the messages before it, with the same parameters) **back to back**, one request
at a time, conversation after conversation — the order in which the server reuses each
prompt's prefix best. That is the server's own maximum on this workload.

* runner tokens/s: completion tokens of the run ÷ (last episode end − first episode start);
* direct tokens/s: completion tokens of the replay ÷ its wall time;
* ratio = runner ÷ direct (target ≥ 0.95).

Arms: ``before`` — ``max_in_flight: none, cache_prompt: false`` (what the model did before it
had a limit: every episode's request goes straight to the server, which queues them);
``after`` — the defaults, ``max_in_flight: auto`` (found: 1 for llama-cpp-python's server),
``cache_prompt: auto`` and ``prefix_hold_s: auto`` (0.25 s there). Each row also has the
server's CPU seconds in either phase (``/proc``) and the run's gate counts (peak in flight,
waited, resumed: calls that took the place their conversation's previous call held).

Slots: llama-cpp-python 0.3.36's server holds one global lock around its model (two
``anyio.Lock`` in ``llama_cpp/server/app.py``): it serves one request at a time, and has no
``--parallel``/slots option, so only the one-slot case can be measured with it.

Run: ``.venv/bin/python benchmarks/model_saturation.py`` → ``benchmarks/results/
model_saturation.md`` (and ``.json``).
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
}


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
                  tmp: Path) -> dict[str, Any]:
    store = Store(f"sqlite:///{tmp / f'{arm}-{concurrency}.db'}")
    environment = REGISTRY.create("env", PluginRef(name=args.env))
    try:
        tasks = select_tasks(environment, args.env, split=None, limit=args.tasks, seed=0)
    finally:
        await environment.close()
    config = RunConfig(env=PluginRef(name=args.env), agent=agent(url, arm, args.max_tokens,
                                                                  args.steps),
                       tasks=tasks, concurrency=concurrency, seed=0)
    built: list[OpenAIModel] = []

    def factory(c: RunConfig) -> PricedModel:
        built.append(REGISTRY.create("model", c.agent.model))
        return PricedModel(built[-1], PriceTable.load())

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
    # The same conversations, back to back, one at a time: the server's own maximum.
    requests = [
        {"model": "default", "messages": [m.to_openai() for m in t.messages[:i]],
         "temperature": 0.0, "max_tokens": args.max_tokens}
        for t in trajs for i, m in enumerate(t.messages) if m.role == "assistant"
    ]
    gate = await built[0].gate()  # the run's gate (this loop's), with its counts
    direct_tokens = direct_prompt = 0
    async with httpx.AsyncClient(timeout=600, trust_env=False) as client:
        t0, cpu0 = time.perf_counter(), cpu_s(pid)
        for body in requests:
            resp = await client.post(f"{url}/chat/completions", json=body)
            resp.raise_for_status()
            direct_tokens += int(resp.json()["usage"]["completion_tokens"])
            direct_prompt += int(resp.json()["usage"]["prompt_tokens"])
        direct_s = time.perf_counter() - t0
        direct_cpu = cpu_s(pid) - cpu0
    runner_tps = runner_tokens / runner_s
    direct_tps = direct_tokens / direct_s
    return {"arm": arm, "concurrency": concurrency, "episodes": len(trajs), "calls": calls,
            "direct_calls": len(requests), "runner_tokens": runner_tokens,
            "runner_prompt_tokens": sum(t.usage.input_tokens for t in trajs),
            "direct_prompt_tokens": direct_prompt,
            "runner_s": runner_s, "runner_tps": runner_tps, "direct_tokens": direct_tokens,
            "direct_s": direct_s, "direct_tps": direct_tps, "ratio": runner_tps / direct_tps,
            "runner_server_cpu_s": runner_cpu, "direct_server_cpu_s": direct_cpu,
            "cpu_ratio": (direct_cpu / direct_tokens) / (runner_cpu / runner_tokens),
            "gate": {"limit": gate.limit, "hold_s": gate.hold_s, "peak": gate.peak,
                     "waited": gate.waited, "resumed": gate.resumed},
            "errors": sum(1 for t in trajs if t.outcome.error_kind == "infra")}


def page(res: dict[str, Any]) -> str:
    lines = [
        "# Model saturation: the runner's completion tokens/s ÷ the server's own",
        "",
        f"`{res['command']}` — {res['started']} UTC, {res['wall_s']:.0f} s, load average "
        f"{res['load'][0]:.1f} → {res['load'][1]:.1f} on {res['cores']} cores (shared with "
        "other work).",
        "",
        f"`python -m llama_cpp.server` (llama-cpp-python {res['llama_version']}), SmolLM2-135M-"
        f"Instruct Q4_1, `--n_threads {res['threads']}`, one slot (its server serves one "
        f"request at a time). Workload: {res['tasks']} `{res['env']}` tasks, tool agent, text "
        f"protocol, temperature 0, max_tokens {res['max_tokens']}, up to {res['steps']} steps. "
        "Direct: the run's own conversations replayed back to back (see the script's "
        "docstring).",
        "",
        "Server CPU: CPU seconds the server process used per completion token, direct ÷ "
        "runner (1.0: the runner made the server do no more work per token than the best "
        "order does; prompts re-evaluated after another conversation's push it below).",
        "",
        "| arm | concurrency | episodes | calls | runner tok/s | direct tok/s | ratio "
        "| server CPU s runner / direct | CPU ratio | gate |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in res["rows"]:
        lines.append(f"| {r['arm']} | {r['concurrency']} | {r['episodes']} | {r['calls']} | "
                     f"{r['runner_tps']:.2f} | {r['direct_tps']:.2f} | {r['ratio']:.2f} | "
                     f"{r['runner_server_cpu_s']:.1f} / {r['direct_server_cpu_s']:.1f} | "
                     f"{r['cpu_ratio']:.2f} | {r['gate']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env", default="sql")
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    ap.add_argument("--out", default="model_saturation")
    args = ap.parse_args()
    from importlib.metadata import version

    from servers import start_llama_server, stop_server

    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M")
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    url, proc = start_llama_server(n_threads=args.threads)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for c in args.concurrency:
                for arm in args.arms:
                    row = asyncio.run(run_arm(url, proc.pid, arm, c, args, Path(tmp)))
                    print(json.dumps(row), flush=True)
                    rows.append(row)
    finally:
        stop_server(proc)
    res = {"command": " ".join([".venv/bin/python benchmarks/model_saturation.py",
                                *sys.argv[1:]]),
           "started": started, "wall_s": time.perf_counter() - t0,
           "load": [load0, os.getloadavg()[0]], "cores": len(os.sched_getaffinity(0)),
           "llama_version": version("llama-cpp-python"), "env": args.env, "tasks": args.tasks,
           "steps": args.steps, "max_tokens": args.max_tokens, "threads": args.threads,
           "rows": rows}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{args.out}.json").write_text(json.dumps(res, indent=2, default=str))
    text = page(res)
    (OUT / f"{args.out}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
