"""Harness overhead: sharpen's Runner against Inspect AI, same episodes, same machine, same run.

What is measured
----------------
Both harnesses play the *same* recorded episodes of the ``code`` environment (64 generated
easy tasks, up to 2 submissions each, text protocol) with a model that answers instantly:

* **sharpen**: ``Runner`` + ``ToolAgent`` + the ``replay`` model (``latency_s=0``) reading
  the cassette below, a fresh SQLite store in a temp dir for every run (opening it, with its
  migrations, is inside the timed region: storing is part of the harness), progress off.
* **Inspect AI**: ``inspect_ai.eval`` of a ``Task`` whose samples are the same prompts (taken
  from the cassette), a solver loop that calls ``generate`` up to twice and appends the
  environment's answer between turns, the ``mockllm/model`` answering each conversation with
  the recorded reply (looked up by the full conversation text, so a diverging conversation
  fails), and a scorer that reads the episode's verdict. Its log (``.eval`` file, default
  realtime sample buffer) goes to a fresh temp dir for every run, ``display="none"``.

The environment work is identical by construction: the Inspect solver drives the very same
``CodeEnv`` object sharpen's agent drives (``reset``, ``step`` per valid submission,
``outcome``, ``close``) and parses replies with sharpen's text protocol, so both sides run
the same hidden tests in the same subprocess sandbox (``run_tests``) the same number of
times, and see the same observations; the script checks that both report the same number of
steps and successes. Tests run once per submission on both sides (the verdict is the last
submission's report; neither scorer re-runs them).

Two variants:

* ``sandbox``: the real environment; each submission runs its hidden tests in a sandbox, as a
  child of the fork server where privileged bubblewrap allows one, else in a fresh sandbox
  with its own interpreter (see ``docs/sandbox.md``); that cost is the same for both harnesses.
* ``pure``: the same ``CodeEnv``, but ``run_tests`` is replaced (in the worker process of
  this benchmark only) by a lookup of the report the real sandbox produced for that exact
  program during setup. Observations, rewards and verdicts are unchanged, the environment
  costs microseconds, and what is left is the harness.

Every (harness, variant, concurrency) cell runs in a fresh Python process, which first does
one warm-up run of ``max(8, c)`` tasks (so that at concurrency ``c`` the timed runs find what a
long run has ready: the sandbox fork server started, ``c`` pool uids leased), then
``--repeats`` timed runs; the run with the median wall time is reported. Concurrency ``c`` is
``RunConfig.concurrency`` for sharpen and ``max_samples = max_connections = c`` for Inspect.

Numbers
-------
* episodes/s (samples/s): episodes ÷ wall time of the whole run (open store / start eval →
  everything written).
* env ms/step: Σ time inside the environment ÷ steps. The worker wraps ``CodeEnv.reset``,
  ``step``, ``outcome`` and ``close`` with a timer, identically for both harnesses (``reset``
  matters: building a generated problem takes ~0.5 ms). sharpen's own ``Step.env_seconds``
  (``step`` only) is in the JSON as ``env_step_s``.
* overhead ms/step: (wall − Σ model time − Σ env time) ÷ steps — the wall time the harness
  adds per step. Exact at concurrency 1, where nothing overlaps, and in the ``pure`` variant
  at any concurrency: there the environment never yields (the canned test report returns at
  once), so its time is synchronous work on the event-loop thread that overlaps nothing.
  In the ``sandbox`` variant at concurrency > 1 environment time overlaps and the sandbox
  saturates the CPUs, so no overhead is reported. The replay/mock model reports 0 s, so its
  own lookup cost (sharpen: a SHA-256 of the canonical request JSON plus a validated copy;
  Inspect: a dict lookup) counts as harness overhead.
* CPU ms/step: CPU time of the harness process (not of the sandbox children) ÷ steps. With the
  fork server the code checker runs in that process (``sharpen.envs.code.checking``), on both
  sides, so its time is in this column.
* load: the 1-minute load average when each sharpen cell starts (the table's last column),
  and before and after the whole run; on a shared machine a load above the core count means
  other work competed with the benchmark.

The cassette
------------
``benchmarks/cassettes/harness_overhead.jsonl`` holds real replies of the embedded model
(SmolLM2-135M-Instruct, greedy, ``max_tokens`` 128), recorded through the real runner with::

    sharpen run code -E source=generated -E difficulty=easy -E max_submissions=2 \\
      --tasks 64 --seed 0 -c 2 --agent benchmarks/cassettes/harness_overhead.agent.yaml \\
      --model replay --model-arg cassette=benchmarks/cassettes/harness_overhead.jsonl \\
      --model-arg mode=record --model-arg 'inner={name: local}' --no-progress \\
      --store sqlite:////tmp/record.db

(delete the cassette first when re-recording: lines are appended). 110 calls: 46 episodes
take 2 steps, 18 take 1; 45 replies were cut off at 128 tokens inside a code block and are
invalid actions (answered by the agent, no test run), 65 are submissions. Steps are counted
the same way on both sides, invalid ones included. It covers epoch 0 only.
More episodes come from more epochs, and an epoch changes the per-attempt seed that is part of
the model params and hence of the replay key. Decoding is greedy (temperature 0), so the seed
does not change what the model writes; at setup the script therefore copies each recorded
line once per extra epoch with ``params.seed`` set to that epoch's attempt seed
(``RunConfig.attempt_seed``) and the key recomputed, into a temp cassette. The replay model
then answers every epoch from real replies, and the committed cassette stays small.

Usage::

    python benchmarks/harness_overhead.py            # ~4 min on 2 cores
    python benchmarks/harness_overhead.py --quick    # ~1.5 min, fewer episodes and repeats

Results go to ``benchmarks/results/harness_overhead.md`` and ``.json`` (``--quick``:
``harness_overhead-quick.*``). Needs the ``bench`` extra: ``pip install -e '.[bench]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from machine_info import cores as machine_cores
from machine_info import cpu_name, version

HERE = Path(__file__).resolve().parent
CASSETTE = HERE / "cassettes" / "harness_overhead.jsonl"
AGENT_YAML = HERE / "cassettes" / "harness_overhead.agent.yaml"
RESULTS = HERE / "results"
ENV_ARGS: dict[str, Any] = {"source": "generated", "difficulty": "easy", "max_submissions": 2}
N_TASKS = 64
RUN_SEED = 0
CONCURRENCY = (1, 8, 64)
TARGET_RATIO = 3.0
TARGET_OVERHEAD_MS = 1.0

# --- shared setup -------------------------------------------------------------------------


def tasks(n: int = N_TASKS) -> list[Any]:
    """The first ``n`` recorded tasks, as ``sharpen run code -E ... --tasks 64 --seed 0``
    lists them (a shorter list is a prefix of the longer one)."""
    from sharpen.core.registry import REGISTRY, PluginRef

    env = REGISTRY.create("env", PluginRef(name="code", args=ENV_ARGS))
    return env.list_tasks(split=None, limit=n, seed=RUN_SEED)[:n]


def agent_spec(cassette: Path) -> Any:
    """The recorded AgentSpec with the replay model answering instantly from ``cassette``."""
    from sharpen.core.agent_spec import AgentSpec
    from sharpen.core.registry import PluginRef

    spec = AgentSpec.load(AGENT_YAML)
    ref = PluginRef(name="replay", args={"cassette": str(cassette), "latency_s": 0.0})
    return spec.model_copy(update={"model": ref})


def run_config(cassette: Path, epochs: int, concurrency: int, task_list: list[Any]) -> Any:
    from sharpen.core.registry import PluginRef
    from sharpen.runner import RunConfig

    return RunConfig(env=PluginRef(name="code", args=ENV_ARGS), agent=agent_spec(cassette),
                     tasks=task_list, epochs=epochs, concurrency=concurrency, seed=RUN_SEED)


def load_cassette() -> list[dict[str, Any]]:
    if not CASSETTE.exists():
        sys.exit(f"error: {CASSETTE} is missing; record it with the command in this script's "
                 "docstring")
    return [json.loads(line) for line in CASSETTE.open(encoding="utf-8") if line.strip()]


def epoch_lines(rec: dict[str, Any], task: Any, config: Any, epochs: int) -> list[str]:
    """One recorded cassette line as ``epochs`` lines, one per epoch: ``params.seed`` set to
    that epoch's attempt seed and the key recomputed (see "The cassette" above)."""
    from sharpen.core.hashing import content_hash

    req, lines = rec["request"], []
    for epoch in range(epochs):
        new = {**req, "params": {**req["params"], "seed": config.attempt_seed(task, epoch)}}
        lines.append(json.dumps({**rec, "key": content_hash(new), "request": new}))
    return lines


def prepare(workdir: Path, max_epochs: int, n_tasks: int) -> dict[str, Any]:
    """Expand the cassette to ``max_epochs`` epochs, compute every submission's real test
    report (for the ``pure`` variant), and collect the Inspect samples and mock replies."""
    from sharpen.agents.text_protocol import ParseError, parse_text_action
    from sharpen.core.hashing import content_hash
    from sharpen.envs.code import SUBMIT, assemble_program, materialize
    from sharpen.envs.code.verifier import run_tests

    records = load_cassette()
    task_list = tasks(n_tasks)
    config = run_config(CASSETTE, 1, 1, task_list)
    by_seed = {config.attempt_seed(t, 0): t for t in tasks(N_TASKS)}
    wanted = {t.id for t in task_list}
    expanded: list[str] = []
    samples: dict[str, dict[str, Any]] = {}
    replies: list[dict[str, Any]] = []
    programs: list[tuple[Any, str]] = []
    for rec in records:
        req = rec["request"]
        if content_hash(req) != rec["key"]:
            sys.exit("error: the cassette's keys no longer match sharpen's request hashing; "
                     "re-record it (see the docstring)")
        task = by_seed.get(req["params"]["seed"])
        if task is None:
            sys.exit("error: the cassette holds a request for a task this script does not "
                     "list; re-record it (see the docstring)")
        if task.id not in wanted:
            continue
        expanded += epoch_lines(rec, task, config, max_epochs)
        msgs = req["messages"]
        if len(msgs) == 2:
            samples[task.id] = {"task": task.model_dump(mode="json"), "system": msgs[0]["content"],
                                "user": msgs[1]["content"]}
        comp = rec["completion"]
        replies.append({"conversation": [[m["role"], m["content"]] for m in msgs],
                        "content": comp["message"]["content"],
                        "finish_reason": comp["finish_reason"], "usage": comp["usage"]})
        try:
            action = parse_text_action(comp["message"]["content"] or "", [SUBMIT],
                                       cut_off=comp["finish_reason"] == "length")
        except ParseError:
            continue
        problem = materialize(task)
        programs.append((problem, assemble_program(action.arguments["code"], problem)))
    if len(samples) != len(task_list):
        sys.exit(f"error: the cassette has first turns for {len(samples)} of {len(task_list)} "
                 "tasks; re-record it (see the docstring)")
    stale = first_turn_mismatch(task_list, samples)
    if stale:
        sys.exit(f"error: {stale}; the agent or the environment changed since the cassette was "
                 "recorded: delete it and re-record it (see the docstring)")

    async def all_reports() -> list[Any]:
        sem = asyncio.Semaphore(os.cpu_count() or 2)

        async def one(problem: Any, program: str) -> Any:
            async with sem:
                return await run_tests(program, problem)

        return await asyncio.gather(*(one(p, prog) for p, prog in programs))

    reports = asyncio.run(all_reports())
    table = [{"task_id": p.task_id, "program": prog, "report": r.model_dump(mode="json")}
             for (p, prog), r in zip(programs, reports, strict=True)]
    paths = {"cassette": workdir / "expanded.jsonl", "reports": workdir / "reports.json",
             "inspect": workdir / "inspect.json"}
    paths["cassette"].write_text("\n".join(expanded) + "\n", encoding="utf-8")
    paths["reports"].write_text(json.dumps(table), encoding="utf-8")
    ordered = [samples[t.id] for t in task_list]
    paths["inspect"].write_text(json.dumps({"samples": ordered, "replies": replies}),
                                encoding="utf-8")
    return {"paths": {k: str(v) for k, v in paths.items()}, "records": len(records),
            "submissions": len(programs)}


ENV_SECONDS = [0.0]
"""Time inside the environment (reset, step, outcome, close), summed over episodes."""


def instrument_env() -> None:
    """Time every call into ``CodeEnv`` the same way on both sides (a few hundred ns each)."""
    from sharpen.envs.code.env import CodeEnv

    for name in ("reset", "step", "outcome", "close"):
        inner = getattr(CodeEnv, name)

        async def timed(self: Any, *args: Any, _inner: Any = inner) -> Any:
            t0 = time.perf_counter()
            try:
                return await _inner(self, *args)
            finally:
                ENV_SECONDS[0] += time.perf_counter() - t0

        setattr(CodeEnv, name, timed)


def first_turn_mismatch(task_list: list[Any], samples: dict[str, dict[str, Any]]) -> str | None:
    """Why today's first prompts differ from the recorded ones, or ``None``."""
    from sharpen.agents.tool_agent import system_prompt
    from sharpen.core.registry import REGISTRY, PluginRef

    spec = agent_spec(CASSETTE)
    for task in task_list:
        env = REGISTRY.create("env", PluginRef(name="code", args=ENV_ARGS))
        user, _ = asyncio.run(env.reset(task))
        if user != samples[task.id]["user"]:
            return f"the task prompt of {task.id} differs from the recorded one"
        if system_prompt(spec, env.tools, True) != samples[task.id]["system"]:
            return "the system prompt differs from the recorded one"
    return None


def install_canned_tests(reports_path: str) -> None:
    """``pure`` variant: the code env's ``run_tests`` becomes a lookup of the real report."""
    import sharpen.envs.code.env as code_env
    from sharpen.envs.code.verifier import TestReport

    canned = {(r["task_id"], r["program"]): TestReport.model_validate(r["report"])
              for r in json.loads(Path(reports_path).read_text(encoding="utf-8"))}

    async def canned_run_tests(program: str, problem: Any, **_: Any) -> Any:
        return canned[(problem.task_id, program)]

    if not hasattr(code_env, "run_tests"):
        raise SystemExit("sharpen.envs.code.env no longer calls run_tests by that name; "
                         "update install_canned_tests")
    code_env.run_tests = canned_run_tests  # type: ignore[assignment]


# --- workers (one process per cell) ---------------------------------------------------------


def sharpen_once(cassette: str, concurrency: int, epochs: int, n_tasks: int, tmp: Path) -> dict:
    from sharpen.runner import Runner
    from sharpen.store import Store

    config = run_config(Path(cassette), epochs, concurrency, tasks(n_tasks))

    async def go() -> tuple[Any, Any, float, float]:
        t0 = time.perf_counter()
        store = Store(f"sqlite:///{tmp / ('sharpen-' + uuid.uuid4().hex + '.db')}")
        opened = time.perf_counter() - t0
        summary = await Runner(store, progress=False).run(config)
        return store, summary, opened, time.perf_counter() - t0

    cpu0, env0 = time.process_time(), ENV_SECONDS[0]
    store, summary, opened, wall = asyncio.run(go())
    env_s, cpu = ENV_SECONDS[0] - env0, time.process_time() - cpu0
    trajs = list(store.iter_trajectories(summary.run_id, with_steps=True))
    store.close()
    steps = [s for t in trajs for s in t.steps]
    return {
        "episodes": len(trajs), "steps": len(steps),
        "success": sum(1 for t in trajs if t.outcome is not None and t.outcome.success),
        "errors": summary.errors, "wall_s": wall, "store_open_s": opened,
        "model_s": sum(s.model_seconds for s in steps), "env_s": env_s,
        "env_step_s": sum(s.env_seconds for s in steps), "cpu_s": cpu,
    }


INSPECT_STATS: dict[str, float] = {}


def inspect_once(data_path: str, concurrency: int, epochs: int, n_tasks: int, tmp: Path) -> dict:
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import (
        ChatMessageSystem,
        ChatMessageUser,
        ModelOutput,
        ModelUsage,
        get_model,
    )
    from inspect_ai.scorer import CORRECT, INCORRECT, Score, accuracy, scorer
    from inspect_ai.solver import solver

    from sharpen.agents.text_protocol import ParseError, parse_text_action
    from sharpen.core.registry import REGISTRY, PluginRef
    from sharpen.core.task import TaskSpec

    data = json.loads(Path(data_path).read_text(encoding="utf-8"))
    outputs: dict[tuple, dict[str, Any]] = {}
    for r in data["replies"]:
        outputs[tuple(tuple(x) for x in r["conversation"])] = r

    def mock(input: list[Any], tools: Any, tool_choice: Any, config: Any) -> ModelOutput:
        r = outputs[tuple((m.role, m.text) for m in input)]  # KeyError = conversation diverged
        out = ModelOutput.from_content(
            "mockllm/model", r["content"],
            stop_reason="max_tokens" if r["finish_reason"] == "length" else "stop")
        u = r["usage"]
        out.usage = ModelUsage(input_tokens=u["input_tokens"], output_tokens=u["output_tokens"],
                               total_tokens=u["input_tokens"] + u["output_tokens"])
        return out

    stats = INSPECT_STATS
    stats.update(steps=0, env_step_s=0.0, success=0, samples=0)

    @solver
    def code_loop(max_steps: int):
        async def solve(state: Any, generate: Any) -> Any:
            env = REGISTRY.create("env", PluginRef(name="code", args=ENV_ARGS))
            steps, env_s = 0, 0.0
            try:
                await env.reset(TaskSpec.model_validate(state.metadata["task"]))
                for _ in range(max_steps):
                    state = await generate(state)
                    steps += 1
                    try:
                        action = parse_text_action(
                            state.output.completion, env.tools,
                            cut_off=state.output.stop_reason == "max_tokens")
                    except ParseError as exc:
                        state.messages.append(ChatMessageUser(content=str(exc)))
                        continue
                    t0 = time.perf_counter()
                    result = await env.step(action)
                    env_s += time.perf_counter() - t0
                    state.messages.append(ChatMessageUser(content=result.observation))
                    if result.terminated or result.truncated:
                        break
                outcome = await env.outcome()
            finally:
                await env.close()
            state.store.set("success", outcome.success)
            stats["steps"] += steps
            stats["env_step_s"] += env_s
            stats["samples"] += 1
            stats["success"] += int(outcome.success)
            return state

        return solve

    @scorer(metrics=[accuracy()])
    def verdict():
        async def score(state: Any, target: Any) -> Score:
            return Score(value=CORRECT if state.store.get("success") else INCORRECT)

        return score

    samples = [
        Sample(id=i, input=[ChatMessageSystem(content=s["system"]),
                            ChatMessageUser(content=s["user"])],
               metadata={"task": s["task"]})
        for i, s in enumerate(data["samples"][:n_tasks])
    ]
    max_steps = 2
    task = Task(dataset=MemoryDataset(samples), solver=code_loop(max_steps), scorer=verdict())
    model = get_model("mockllm/model", custom_outputs=mock)
    logdir = tmp / ("inspect-" + uuid.uuid4().hex)
    cpu0, env0 = time.process_time(), ENV_SECONDS[0]
    t0 = time.perf_counter()
    logs = inspect_eval(task, model=model, epochs=epochs, max_samples=concurrency,
                        max_connections=concurrency, display="none", log_dir=str(logdir),
                        log_level="warning", score_display=False)
    wall = time.perf_counter() - t0
    cpu, env_all = time.process_time() - cpu0, ENV_SECONDS[0] - env0
    log = logs[0]
    if log.status != "success":
        raise RuntimeError(f"inspect eval ended {log.status}: {log.error}")
    return {
        "episodes": int(stats["samples"]), "steps": int(stats["steps"]),
        "success": int(stats["success"]), "errors": {}, "wall_s": wall, "model_s": 0.0,
        "env_s": env_all, "env_step_s": stats["env_step_s"], "cpu_s": cpu,
    }


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One cell: warm up once, then ``repeats`` timed runs; the median-wall run is kept."""
    paths = spec["paths"]
    instrument_env()
    if spec["variant"] == "pure":
        install_canned_tests(paths["reports"])
    once = sharpen_once if spec["harness"] == "sharpen" else inspect_once
    source = paths["cassette"] if spec["harness"] == "sharpen" else paths["inspect"]
    with tempfile.TemporaryDirectory(prefix="bench-", dir=spec.get("tmp_dir")) as tmp:
        warm = min(max(8, spec["concurrency"]), spec["tasks"])
        once(source, spec["concurrency"], 1, warm, Path(tmp))  # warm-up
        runs = []
        for _ in range(spec["repeats"]):
            if spec.get("profile"):
                import cProfile
                import pstats

                prof = cProfile.Profile()
                prof.enable()
            runs.append(once(source, spec["concurrency"], spec["epochs"], spec["tasks"],
                             Path(tmp)))
            if spec.get("profile"):
                prof.disable()
                pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(30)
    runs.sort(key=lambda r: r["wall_s"])
    best = dict(runs[len(runs) // 2])
    best["walls_s"] = [r["wall_s"] for r in runs]
    return best


# --- orchestration --------------------------------------------------------------------------


def run_cell(spec: dict[str, Any]) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(spec)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"worker failed: {spec['harness']} {spec['variant']} "
                         f"c={spec['concurrency']}")
    if spec.get("profile"):
        sys.stderr.write(proc.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def derive(variant: str, c: int, s: dict, i: dict) -> dict[str, Any]:
    """One table row from the sharpen and Inspect cells."""
    steps = s["steps"]
    row: dict[str, Any] = {
        "variant": variant, "concurrency": c, "episodes": s["episodes"], "steps": steps,
        "sharpen_eps": s["episodes"] / s["wall_s"], "inspect_sps": i["episodes"] / i["wall_s"],
        "sharpen_steps_per_s": steps / s["wall_s"],
        "env_ms_per_step": 1000 * s["env_s"] / steps,
        "inspect_env_ms_per_step": 1000 * i["env_s"] / i["steps"],
        "sharpen_cpu_ms_per_step": 1000 * s["cpu_s"] / steps,
        "inspect_cpu_ms_per_step": 1000 * i["cpu_s"] / i["steps"],
        "same_work": (s["episodes"], s["steps"], s["success"]) == (i["episodes"], i["steps"],
                                                                    i["success"]),
        "load": s.get("load_at_start"),
    }
    row["ratio"] = row["sharpen_eps"] / row["inspect_sps"]
    if c == 1 or variant == "pure":
        row["sharpen_overhead_ms"] = 1000 * (s["wall_s"] - s["model_s"] - s["env_s"]) / steps
        row["inspect_overhead_ms"] = 1000 * (i["wall_s"] - i["model_s"] - i["env_s"]) / i["steps"]
    else:
        row["sharpen_overhead_ms"] = row["inspect_overhead_ms"] = None
    return row


def machine(load_start: float) -> dict[str, Any]:
    try:  # what the code environment's test runs get
        from sharpen.envs.code.verifier import harness_sandbox

        isolation = harness_sandbox().isolation
    except (ImportError, OSError, RuntimeError):
        isolation = "unknown"
    cpu = cpu_name()
    cores = machine_cores()

    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "cpu": cpu, "cores": cores,
        "os": platform.platform(), "python": platform.python_version(),
        "sharpen": version("sharpen"), "inspect-ai": version("inspect-ai"),
        "pydantic": version("pydantic"), "sqlalchemy": version("sqlalchemy"),
        "sqlite": sqlite3.sqlite_version, "sandbox isolation": isolation,
        "load average (1 min), start → end": f"{load_start:.2f} → {os.getloadavg()[0]:.2f}",
    }


def fmt(x: float | None, spec: str = ".2f") -> str:
    return "—" if x is None else format(x, spec)


def render(rows: list[dict], info: dict, args: argparse.Namespace, setup: dict) -> str:
    head = ("| variant | concurrency | episodes (steps) | sharpen episodes/s | Inspect samples/s "
            "| ratio | sharpen overhead ms/step | Inspect overhead ms/step | env ms/step "
            "| sharpen CPU ms/step | Inspect CPU ms/step | load |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for r in rows:
        lines.append(
            f"| {r['variant']} | {r['concurrency']} | {r['episodes']} ({r['steps']}) "
            f"| {r['sharpen_eps']:.1f} | {r['inspect_sps']:.1f} | **{r['ratio']:.2f}×** "
            f"| {fmt(r['sharpen_overhead_ms'])} | {fmt(r['inspect_overhead_ms'])} "
            f"| {r['env_ms_per_step']:.3g} | {r['sharpen_cpu_ms_per_step']:.2f} "
            f"| {r['inspect_cpu_ms_per_step']:.2f} | {fmt(r['load'])} |")
    return "\n".join(lines)


def verdicts(rows: list[dict]) -> list[str]:
    out = []
    for variant in ("pure", "sandbox"):
        vr = [r for r in rows if r["variant"] == variant]
        if not vr:
            continue
        ratios = ", ".join(f"c={r['concurrency']}: {r['ratio']:.2f}×" for r in vr)
        met = all(r["ratio"] >= TARGET_RATIO for r in vr)
        out.append(f"- ≥ {TARGET_RATIO:g}× Inspect's samples/s, {variant}: "
                   f"{'**met**' if met else '**not met**'} ({ratios})")
    pure = [r for r in rows if r["variant"] == "pure" and r["sharpen_overhead_ms"] is not None]
    sand1 = [r for r in rows if r["variant"] == "sandbox" and r["concurrency"] == 1]
    for label, rs in (("pure", pure), ("sandbox, concurrency 1", sand1)):
        if rs:
            worst = max(r["sharpen_overhead_ms"] for r in rs)
            vals = ", ".join(f"c={r['concurrency']}: {r['sharpen_overhead_ms']:.2f} ms"
                             for r in rs)
            out.append(f"- ≤ {TARGET_OVERHEAD_MS:g} ms harness overhead per step, {label}: "
                       f"{'**met**' if worst <= TARGET_OVERHEAD_MS else '**not met**'} ({vals})")
    same = all(r["same_work"] for r in rows)
    out.append(f"- Same work on both sides (episodes, steps and successes equal in every row): "
               f"{'yes' if same else '**NO** — see the JSON'}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--quick", action="store_true", help="fewer episodes and repeats (~1.5 min)")
    ap.add_argument("--concurrency", default=",".join(map(str, CONCURRENCY)))
    ap.add_argument("--variants", default="pure,sandbox")
    ap.add_argument("--pure-epochs", type=int, default=None, help="epochs of 64 tasks (pure)")
    ap.add_argument("--sandbox-epochs", type=int, default=None,
                    help="epochs of 64 tasks (sandbox)")
    ap.add_argument("--repeats", type=int, default=None, help="timed runs per cell")
    ap.add_argument("--tasks", type=int, default=N_TASKS, help="use the first N recorded tasks")
    ap.add_argument("--harness", default="sharpen,inspect")
    ap.add_argument("--profile", action="store_true", help="cProfile each timed run (stderr)")
    ap.add_argument("--tmp-dir", default=None, help="where stores and logs go (default: $TMPDIR)")
    ap.add_argument("--out", default=None, help="results file stem (default: by --quick)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    try:
        metadata.version("inspect-ai")
    except metadata.PackageNotFoundError:
        sys.exit("error: Inspect AI is not installed; install the bench extra: "
                 "pip install -e '.[bench]'")
    pure_epochs = args.pure_epochs or (2 if args.quick else 8)
    sandbox_epochs = args.sandbox_epochs or (1 if args.quick else 2)
    repeats = args.repeats or (1 if args.quick else 3)
    levels = [int(x) for x in args.concurrency.split(",")]
    variants = [v for v in args.variants.split(",") if v]
    harnesses = [h for h in args.harness.split(",") if h]
    started, load_start = time.perf_counter(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="harness-overhead-", dir=args.tmp_dir) as work:
        print("setup: expanding the cassette and running each recorded submission's tests once…",
              flush=True)
        setup = prepare(Path(work), max(pure_epochs, sandbox_epochs), args.tasks)
        cells: dict[tuple, dict] = {}
        for variant in variants:
            epochs = pure_epochs if variant == "pure" else sandbox_epochs
            for c in levels:
                for harness in harnesses:
                    spec = {"harness": harness, "variant": variant, "concurrency": c,
                            "epochs": epochs, "tasks": args.tasks,
                            "repeats": repeats,
                            "paths": setup["paths"], "tmp_dir": args.tmp_dir,
                            "profile": args.profile}
                    load = os.getloadavg()[0]
                    cells[(variant, c, harness)] = r = run_cell(spec)
                    r["load_at_start"] = load
                    print(f"  {variant:8s} c={c:<3d} {harness:8s} {r['episodes']} episodes, "
                          f"{r['steps']} steps in {r['wall_s']:.2f} s "
                          f"({r['episodes'] / r['wall_s']:.1f}/s)", flush=True)
    if harnesses != ["sharpen", "inspect"]:
        return
    rows = [derive(v, c, cells[(v, c, "sharpen")], cells[(v, c, "inspect")])
            for (v, c, h) in cells if h == "sharpen"]
    info = machine(load_start)
    command = "python benchmarks/harness_overhead.py" + (" " + " ".join(sys.argv[1:])
                                                         if sys.argv[1:] else "")
    table = render(rows, info, args, setup)
    checks = verdicts(rows)
    print()
    print(table)
    print()
    print("\n".join(checks))
    stem = args.out or ("harness_overhead-quick" if args.quick else "harness_overhead")
    RESULTS.mkdir(parents=True, exist_ok=True)
    md = [
        "# Harness overhead: sharpen vs Inspect AI",
        "",
        f"`{command}` — {info['date']}, {time.perf_counter() - started:.0f} s in all.",
        "",
        f"Same {args.tasks} generated `code` tasks on both sides, replies of the embedded model "
        f"replayed instantly from `benchmarks/cassettes/{CASSETTE.name}` "
        f"({setup['records']} recorded calls, {setup['submissions']} submissions); `pure` runs "
        f"{pure_epochs} epoch(s) per cell, `sandbox` {sandbox_epochs} epoch(s), each cell the "
        f"median of {repeats} timed runs. Definitions are in the script's docstring.",
        "",
        table,
        "",
        "Overhead ms/step = (wall − model time − environment time) ÷ steps (`—`: not "
        "separable, the sandboxes overlap and saturate the CPUs). env ms/step: time inside "
        "`CodeEnv.reset/step/outcome/close`, timed the same way for both harnesses (sharpen's "
        "column shown; Inspect's is in the JSON). CPU ms/step: the harness process only (with "
        "the code checker, which runs there), not the sandbox children. Ratio = sharpen "
        "episodes/s ÷ Inspect samples/s. load: the "
        "1-minute load average when the sharpen cell started (the machine has "
        f"{info['cores']} cores; above that, other work competed for them).",
        "",
        "## Targets",
        "",
        *checks,
        "",
        "## Machine",
        "",
        *(f"- {k}: {v}" for k, v in info.items()),
        "",
    ]
    (RESULTS / f"{stem}.md").write_text("\n".join(md), encoding="utf-8")
    (RESULTS / f"{stem}.json").write_text(json.dumps({
        "command": command, "machine": info, "setup": {k: v for k, v in setup.items()
                                                      if k != "paths"},
        "pure_epochs": pure_epochs, "sandbox_epochs": sandbox_epochs, "repeats": repeats,
        "rows": rows, "cells": {f"{v}/{c}/{h}": r for (v, c, h), r in cells.items()},
    }, indent=2), encoding="utf-8")
    print(f"\nwrote {RESULTS / (stem + '.md')} and .json")


if __name__ == "__main__":
    main()
