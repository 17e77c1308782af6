"""Judge throughput: judged trajectories per second against the model server's own maximum
tokens per second, measured in the same run (issue 20's acceptance: at the best concurrency,
sharpen's tokens/s is at least 0.9 of the server's maximum).

What is measured
----------------
One ``python -m llama_cpp.server`` on loopback serves the embedded GGUF (SmolLM2-135M) to both
arms. The trajectories are stored runs of the ``reference`` and ``null`` agents on ``--env``
(no model needed); the judge is ``rubric:solved`` on the ``openai`` backend at the server's
URL, as ``sharpen judge RUN --judge rubric:solved --base-url URL`` builds it.

* **capture** (also the warm-up): one :func:`~sharpen.judges.runner.judge_run` per run at
  concurrency 1 through a model that records every request body the server accepted — the
  exact JSON sharpen sends (messages, ``response_format``, ``temperature``, ``max_tokens``).
* **peer** ("the server's own maximum"): those bodies POSTed straight to
  ``/chat/completions`` with httpx — no sharpen — ``c`` in flight, run after run as sharpen
  judges them; tokens/s = (prompt + completion tokens in the server's ``usage``) / wall time.
  The peer's maximum is the best over the concurrencies.
* **sharpen**: ``judge_run`` on each run (a fresh copy of the store per measurement, so the
  judge is never resumed), the judge model built from its ref as the CLI builds it (priced,
  retried; ``structured: json_object``, see ``MODEL_ARGS``); wall time around the whole
  call (judge construction, store reads, transcript rendering, validation, store writes);
  tokens from the judgements' usage.

Both arms send the same requests at the same concurrency ``c`` in 1, 2, 4, 8 (the judge is
greedy, so its re-asks repeat too; the request counts are reported). Each
``--repeats`` alternates the arms' order (peer first on even repeats, sharpen first on odd)
so that drift in the machine's load falls on both; the medians over repeats are reported.
The ratio at each concurrency is sharpen's tokens/s over the peer's maximum; the ratio to the
peer at the same concurrency is also given. llama-cpp-python's server runs one completion at a
time (no batching), so concurrency can only hide the client's and HTTP's time between calls.

Run: ``.venv/bin/python benchmarks/judge_throughput.py [--env sql] [--tasks 12]
[--repeats 2]``; writes ``benchmarks/results/judge_throughput.{md,json}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
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
TARGET = 0.9
CONCURRENCIES = (1, 2, 4, 8)
MODEL_ARGS = {"model": "smollm2-135m", "structured": "json_object"}
"""What llama-cpp-python's server speaks, said up front: with ``structured: auto`` concurrent
first calls that are all refused json_schema each step the form down (json_object, none, then a
KeyError in ``OpenAIModel.complete``), a race of the auto fallback."""

from machine_info import cores, cpu_name, version  # noqa: E402

from sharpen.core.agent_spec import AgentSpec  # noqa: E402
from sharpen.core.messages import Message, ToolSpec  # noqa: E402
from sharpen.core.registry import REGISTRY, PluginRef  # noqa: E402
from sharpen.judges.runner import JudgeSetup, judge_run, resolve_judge  # noqa: E402
from sharpen.models.base import BaseChatModel, Completion  # noqa: E402
from sharpen.models.openai_compat import OpenAIModel  # noqa: E402
from sharpen.models.structured import ResponseSchema  # noqa: E402
from sharpen.runner import RunConfig, Runner  # noqa: E402
from sharpen.runner.compose import select_tasks  # noqa: E402
from sharpen.store import Store  # noqa: E402


class Capturing(OpenAIModel):
    """An OpenAI model that keeps the body of every request the server accepted (use it at
    concurrency 1: the body is matched to its call by order)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bodies: list[dict[str, Any]] = []
        self.replies: dict[str, Completion] = {}
        self._last: dict[str, Any] = {}

    def build_request(self, messages: list[Message], tools: list[ToolSpec] | None = None,
                      params: dict[str, Any] | None = None,
                      response_schema: ResponseSchema | None = None) -> dict[str, Any]:
        self._last = super().build_request(messages, tools, params, response_schema)
        return self._last

    async def complete(self, messages: list[Message], tools: list[ToolSpec] | None = None,
                       params: dict[str, Any] | None = None, *,
                       response_schema: ResponseSchema | None = None) -> Completion:
        out = await super().complete(messages, tools, params, response_schema=response_schema)
        self.bodies.append(self._last)
        self.replies[key(messages)] = out
        return out


def key(messages: list[Message]) -> str:
    return json.dumps([m.model_dump(mode="json") for m in messages])


class Instant(BaseChatModel):
    """Answers each captured prompt at once with the server's reply to it: what is left of a
    judgement's time is sharpen's own."""

    name = "smollm2-135m"
    structured_output = "server"

    def __init__(self, replies: dict[str, Completion]) -> None:
        self.replies = replies

    async def complete(self, messages: list[Message], tools: list[ToolSpec] | None = None,
                       params: dict[str, Any] | None = None, *,
                       response_schema: ResponseSchema | None = None) -> Completion:
        return self.replies[key(messages)]


async def make_runs(db: Path, env: str, tasks: int, agents: list[str]) -> list[str]:
    """The runs of ``agents`` (model-free: ``reference``, ``null``) on ``tasks`` tasks of
    ``env``."""
    store = Store(f"sqlite:///{db}")
    environment = REGISTRY.create("env", PluginRef(name=env))
    try:
        specs = select_tasks(environment, env, split=None, limit=tasks, seed=0)
    finally:
        await environment.close()
    runs = []
    for agent in agents:
        config = RunConfig(env=PluginRef(name=env), agent=AgentSpec(
            name=agent, agent=PluginRef(name=agent)), tasks=specs, seed=0)
        runs.append((await Runner(store, progress=False).run(config)).run_id)
    store.close()
    return runs


def fresh_store(src: Path, tmp: Path, tag: str) -> Store:
    dst = tmp / f"{tag}.db"
    shutil.copy(src, dst)
    return Store(f"sqlite:///{dst}")


async def capture(src: Path, tmp: Path, runs: list[str], setup: JudgeSetup,
                  url: str) -> tuple[list[list[dict[str, Any]]], dict[str, Completion]]:
    """Per run, the request bodies the judge sends, and the server's replies by prompt (also
    warms the server)."""
    store = fresh_store(src, tmp, "capture")
    out, replies = [], {}
    for rid in runs:
        model = Capturing(**setup.model.args)
        try:
            await judge_run(store, rid, setup, model=model)
        finally:
            await model.aclose()
        out.append(model.bodies)
        replies.update(model.replies)
    store.close()
    return out, replies


async def alone(src: Path, tmp: Path, runs: list[str], setup: JudgeSetup,
                replies: dict[str, Completion], repeats: int) -> dict[str, Any]:
    """sharpen's own time per judgement: ``judge_run`` at concurrency 1 with :class:`Instant`
    as the model (no HTTP, no pricing or retry wrappers), median of ``repeats`` fresh stores."""
    walls, judged = [], 0
    for r in range(repeats):
        store = fresh_store(src, tmp, f"alone{r}")
        t0 = time.perf_counter()
        judged = 0
        for rid in runs:
            s = await judge_run(store, rid, setup, model=Instant(replies))
            judged += s.judged + s.errors
        walls.append(time.perf_counter() - t0)
        store.close()
    return {"judged": judged, "wall_s": walls,
            "ms_per_judgement": 1000 * statistics.median(walls) / judged}


async def peer(url: str, batches: list[list[dict[str, Any]]], c: int) -> dict[str, Any]:
    """The bodies POSTed straight to the server, ``c`` in flight, batch after batch."""
    gate = asyncio.Semaphore(c)
    tokens = requests = 0
    async with httpx.AsyncClient(timeout=600.0, trust_env=False) as client:

        async def one(body: dict[str, Any]) -> None:
            nonlocal tokens, requests
            async with gate:
                resp = await client.post(f"{url}/chat/completions", json=body)
            resp.raise_for_status()
            usage = resp.json()["usage"]
            tokens += usage["prompt_tokens"] + usage["completion_tokens"]
            requests += 1

        t0 = time.perf_counter()
        for batch in batches:
            await asyncio.gather(*(one(b) for b in batch))
        wall = time.perf_counter() - t0
    return {"wall_s": wall, "tokens": tokens, "requests": requests,
            "tokens_per_s": tokens / wall}


async def sharpen(src: Path, tmp: Path, runs: list[str], setup: JudgeSetup, c: int,
                  tag: str) -> dict[str, Any]:
    """``judge_run`` on each run at concurrency ``c``, in a fresh copy of the store."""
    store = fresh_store(src, tmp, tag)
    tokens = calls = judged = errors = 0
    t0 = time.perf_counter()
    for rid in runs:
        s = await judge_run(store, rid, setup, concurrency=c)
        tokens += s.usage.total_tokens
        calls += s.usage.calls
        judged += s.judged + s.errors
        errors += s.errors
    wall = time.perf_counter() - t0
    store.close()
    return {"wall_s": wall, "tokens": tokens, "requests": calls, "judged": judged,
            "judge_errors": errors, "tokens_per_s": tokens / wall,
            "trajectories_per_s": judged / wall}


def median(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


async def measure(args: argparse.Namespace, url: str, tmp: Path) -> dict[str, Any]:
    src = tmp / "runs.db"
    runs = await make_runs(src, args.env, args.tasks, args.agents)
    setup = JudgeSetup(judge=resolve_judge("rubric:solved"),
                       model=PluginRef(name="openai", args=MODEL_ARGS | {"base_url": url}))
    t0 = time.perf_counter()
    batches, replies = await capture(src, tmp, runs, setup, url)
    capture_s = time.perf_counter() - t0
    print(f"captured {sum(map(len, batches))} requests in {capture_s:.1f} s", flush=True)
    table: dict[int, dict[str, list[dict[str, Any]]]] = {}
    for c in args.concurrency:
        arms: dict[str, list[dict[str, Any]]] = {"peer": [], "sharpen": []}
        for r in range(args.repeats):
            order = ("peer", "sharpen") if r % 2 == 0 else ("sharpen", "peer")
            for arm in order:
                res = (await peer(url, batches, c) if arm == "peer"
                       else await sharpen(src, tmp, runs, setup, c, f"c{c}r{r}"))
                res["order"] = order.index(arm)
                arms[arm].append(res)
                print(f"c={c} repeat {r} {arm}: {res['tokens_per_s']:.0f} tokens/s "
                      f"({res['requests']} requests, {res['wall_s']:.1f} s)", flush=True)
        table[c] = arms
    own = await alone(src, tmp, runs, setup, replies, 5)
    print(f"sharpen alone: {own['ms_per_judgement']:.1f} ms per judgement", flush=True)
    return {"runs": runs, "batches": [len(b) for b in batches], "capture_s": capture_s,
            "table": table, "alone": own}


def summarise(raw: dict[str, Any]) -> dict[str, Any]:
    rows = []
    for c, arms in raw["table"].items():
        rows.append({"concurrency": c,
                     "peer_tokens_per_s": median(arms["peer"], "tokens_per_s"),
                     "sharpen_tokens_per_s": median(arms["sharpen"], "tokens_per_s"),
                     "trajectories_per_s": median(arms["sharpen"], "trajectories_per_s"),
                     "peer_requests": arms["peer"][0]["requests"],
                     "sharpen_requests": arms["sharpen"][0]["requests"],
                     "judged": arms["sharpen"][0]["judged"],
                     "judge_errors": arms["sharpen"][0]["judge_errors"],
                     "peer_wall_s": median(arms["peer"], "wall_s"),
                     "sharpen_wall_s": median(arms["sharpen"], "wall_s")})
    peer_max = max(r["peer_tokens_per_s"] for r in rows)
    for r in rows:
        r["ratio"] = r["sharpen_tokens_per_s"] / peer_max
        r["ratio_same_c"] = r["sharpen_tokens_per_s"] / r["peer_tokens_per_s"]
    best = max(rows, key=lambda r: r["sharpen_tokens_per_s"])
    return {"rows": rows, "peer_max_tokens_per_s": peer_max, "best_concurrency":
            best["concurrency"], "ratio": best["ratio"], "target": TARGET,
            "met": best["ratio"] >= TARGET}


def page(res: dict[str, Any]) -> str:
    s = res["summary"]
    lines = [
        "# Judge throughput: sharpen's judge against the model server's own maximum",
        "",
        f"`{res['command']}` — protocol in the script's docstring. Run {res['started']} UTC, "
        f"{res['wall_s']:.0f} s in all; {res['cpu']} ({res['cores']} cores usable); load "
        f"average (1 min) {res['load'][0]:.2f} at the start and {res['load'][1]:.2f} at the end "
        f"(other work shared the machine; both arms ran under it, alternating); sharpen "
        f"{res['versions']['sharpen']}, llama-cpp-python {res['versions']['llama-cpp-python']}, "
        f"httpx {res['versions']['httpx']}.",
        "",
        f"Judge `rubric:solved`, SmolLM2-135M-Instruct (Q4_1 GGUF) behind `python -m llama_cpp.server` "
        f"on loopback (`--n_threads {res['threads']}`); {sum(res['batches'])} requests per "
        f"measurement over the runs of "
        f"{', '.join(f'`{a}`' for a in res['agents'])} on `{res['env']}` ({res['tasks']} tasks "
        f"each, judged run after run); medians of "
        f"{res['repeats']} repeat(s) per arm and concurrency.",
        "",
        "| concurrency | peer tokens/s (httpx, no sharpen) | sharpen tokens/s | judged "
        "trajectories/s | ratio to peer max | ratio to peer at same c | requests peer / "
        "sharpen | judge errors |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in s["rows"]:
        lines.append(f"| {r['concurrency']} | {r['peer_tokens_per_s']:.0f} | "
                     f"{r['sharpen_tokens_per_s']:.0f} | {r['trajectories_per_s']:.2f} | "
                     f"{r['ratio']:.3f} | {r['ratio_same_c']:.3f} | {r['peer_requests']} / "
                     f"{r['sharpen_requests']} | {r['judge_errors']} |")
    lines += [
        "",
        f"Peer maximum: {s['peer_max_tokens_per_s']:.0f} tokens/s. At sharpen's best "
        f"concurrency ({s['best_concurrency']}) the ratio is **{s['ratio']:.3f}** against a "
        f"target of {s['target']}: **{'met' if s['met'] else 'not met'}**.",
        "",
        f"sharpen's own time per judgement (the same `judge_run` with the server's replies "
        f"given back at once by an in-process model, concurrency 1, median of "
        f"{len(res['alone']['wall_s'])} fresh stores): "
        f"**{res['alone']['ms_per_judgement']:.1f} ms**, against "
        f"{1000 * s['rows'][0]['peer_wall_s'] / s['rows'][0]['peer_requests']:.0f} ms per "
        f"request the server took at concurrency 1.",
        "",
        "Every measurement (`order` 0 ran first in its repeat) is in `judge_throughput.json`.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env", default="sql")
    ap.add_argument("--tasks", type=int, default=12)
    ap.add_argument("--agents", nargs="+", default=["reference", "null"])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1,
                    help="the server's n_threads (1: on this 2-core machine, shared with "
                    "other work, 2 threads were oversubscribed and slower)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=list(CONCURRENCIES))
    args = ap.parse_args()
    from servers import start_llama_server, stop_server

    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M")
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    url, proc = start_llama_server(n_threads=args.threads)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            raw = asyncio.run(measure(args, url, Path(tmp)))
    finally:
        stop_server(proc)
    res = {"command": " ".join(["python benchmarks/judge_throughput.py", *sys.argv[1:]]),
           "started": started, "wall_s": time.perf_counter() - t0,
           "load": [load0, os.getloadavg()[0]], "cpu": cpu_name(), "cores": cores(),
           "versions": {p: version(p) for p in ("sharpen", "llama-cpp-python", "httpx")},
           "env": args.env, "tasks": args.tasks, "threads": args.threads,
           "agents": args.agents, "repeats": args.repeats, **raw}
    res["summary"] = summarise(raw)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "judge_throughput.json").write_text(json.dumps(res, indent=2, default=str))
    text = page(res)
    (OUT / "judge_throughput.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
