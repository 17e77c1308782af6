"""Does a critic's critique help the actor's retry more than the environment's own words?

Protocol (fixed before the run; the results file names the commit)
------------------------------------------------------------------
- Environments: generated ``code`` (easy, one submission per attempt: ``sharpen demo``'s
  environment) and ``sql`` (easy), the first ``--code-tasks`` / ``--sql-tasks`` tasks of the
  ``test`` split at task seed ``--task-seed`` (7).
- Spec: ``sharpen demo``'s seed spec (SmolLM2-135M, temperature 0, 200 tokens per reply, two
  steps per attempt, free decoding).
- Arms, all the ``critic`` agent (so only its args differ), every arm on every task with the
  same seeds — paired over tasks:
  A — ``trials: 1``: the actor (the tool agent) alone;
  B — ``trials: 2, feedback: critic``: after a failed attempt the same model, as critic,
  writes a critique (at most 128 tokens) and the retry is shown it;
  C — ``trials: 2, feedback: execution``: the retry is shown what the environment said about
  the failed answer, no critic call.
  Retries sample at temperature 0.7 (the agent's default) with the attempt's seed; every
  arm's first attempt is A's request (answered from the embedded model's memo).
- Primary: B's success rate against A's on ``code`` (sharpen's paired comparison,
  ``stats.paired.compare_pair``: exact McNemar, two-sided, Newcombe 95% interval); secondary,
  without a claim: C vs A and B vs C on each environment, B vs A on ``sql``.
- Reported besides: tokens (prompt + completion) per task of each arm, and the critic's share.

Written to ``benchmarks/results/critic.md`` and ``critic.json``:

    python benchmarks/critic.py                       # the registered sizes
    python benchmarks/critic.py --code-tasks 4 --sql-tasks 2 --out /tmp/c.md   # a smoke run
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

import numpy as np
from machine_info import cores, cpu_name, version
from preregistered import comparison_table, protocol_commit

from sharpen.cli.demo_cmd import DEMO_ENV, DEMO_SPEC
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.runner import RunConfig, Runner
from sharpen.stats.paired import compare_pair
from sharpen.stats.report import load_table
from sharpen.store import Store

HERE = Path(__file__).resolve().parent
ENVS = {"code": DEMO_ENV, "sql": PluginRef(name="sql", args={"difficulty": "easy"})}
ARMS = {
    "A": ("actor alone (trials 1)", {"trials": 1}),
    "B": ("actor + critic (trials 2, feedback critic)", {"trials": 2, "feedback": "critic"}),
    "C": ("actor + execution feedback (trials 2, feedback execution)",
          {"trials": 2, "feedback": "execution"}),
}
COMPARISONS = (("A", "B"), ("A", "C"), ("C", "B"))


async def run_arm(store: Store, env: PluginRef, args: dict, tasks: list) -> tuple[str, list]:
    """Run the critic agent with ``args`` on the demo's seed spec over ``tasks``: the stored
    run's id and trajectories."""
    spec = DEMO_SPEC.model_copy(update={"agent": PluginRef(name="critic", args=args)})
    summary = await Runner(store, progress=False).run(RunConfig(env=env, agent=spec, tasks=tasks))
    return summary.run_id, list(store.iter_trajectories(summary.run_id))


def tokens(trajs: list, critic_only: bool = False) -> int:
    """Prompt + completion tokens of ``trajs`` (only the critic's calls with ``critic_only``)."""
    return sum(s.usage.total_tokens for t in trajs for s in t.steps
               if not critic_only or "critique" in s.info)


async def measure(args: argparse.Namespace) -> dict:
    sizes = {"code": args.code_tasks, "sql": args.sql_tasks}
    out: dict = {"envs": {}}
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{Path(tmp) / 'bench.db'}")
        for env_name, env in ENVS.items():
            tasks = REGISTRY.create("env", env).list_tasks(split="test", limit=sizes[env_name],
                                                           seed=args.task_seed)
            arms, tables = {}, {}
            for key, (name, agent_args) in ARMS.items():
                t0 = time.perf_counter()
                run_id, trajs = await run_arm(store, env, agent_args, tasks)
                tables[key] = load_table(store, run_id)
                wins = sum(bool(t.outcome and t.outcome.success) for t in trajs)
                arms[key] = {"name": name, "args": agent_args, "successes": wins, "tasks": len(tasks),
                             "errors": sum(not t.outcome.counts for t in trajs),
                             "tokens_per_task": tokens(trajs) / len(tasks),
                             "critic_tokens_per_task": tokens(trajs, True) / len(tasks),
                             "retried": sum(t.trials > 1 for t in trajs),
                             "wall_s": time.perf_counter() - t0}
                print(f"{env_name} {key} {name}: {wins}/{len(tasks)}", flush=True)
            comps = [(a, b, compare_pair(tables[a], tables[b], rng, label_a=a, label_b=b))
                     for a, b in COMPARISONS]
            out["envs"][env_name] = {"env": env.model_dump(mode="json"), "arms": arms,
                                     "comparisons": [c.model_dump(mode="json") for _, _, c in comps],
                                     "_comps": comps}
    return out


def page(args: argparse.Namespace, res: dict, command: str) -> str:
    lines = [
        "# A critic's critique against the environment's words, on the embedded model",
        "",
        f"`{command}` — protocol in the script's docstring, fixed at commit "
        f"{protocol_commit('critic.py')}; run {res['started']} UTC, {cpu_name()}, {cores()} CPU(s), "
        f"load average {res['load'][0]:.1f} at the start and {res['load'][1]:.1f} at the end "
        f"(other work shared the machine); sharpen {version('sharpen')}, llama-cpp-python "
        f"{version('llama-cpp-python')}; {res['wall_s']:.0f} s in all.",
        "",
        "`sharpen demo`'s seed spec (SmolLM2-135M, temperature 0, 200 tokens, free decoding); every "
        "arm is the `critic` agent and runs every task with the same seeds.",
    ]
    for env_name, e in res["envs"].items():
        n = next(iter(e["arms"].values()))["tasks"]
        lines += ["", f"## {env_name} ({n} test tasks, task seed {args.task_seed})", "",
                  "| arm | success | retried | tokens per task | of which the critic's | wall s |",
                  "|---|---|---|---|---|---|"]
        for key, a in e["arms"].items():
            lines.append(f"| {key}: {a['name']} | {a['successes']}/{a['tasks']} = "
                         f"{a['successes'] / a['tasks']:.1%} | {a['retried']} | {a['tokens_per_task']:,.0f} "
                         f"| {a['critic_tokens_per_task']:,.0f} | {a['wall_s']:.0f} |")
        roles = ["primary" if env_name == "code" and (a, b) == ("A", "B") else "secondary"
                 for a, b, _ in e["_comps"]]
        rows = [(a, b, role, c) for (a, b, c), role in zip(e["_comps"], roles, strict=True)]
        table = comparison_table(rows, "B better than A on code")
        lines += ["", *(table if env_name == "code" else table[:-2])]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--code-tasks", type=int, default=24)
    ap.add_argument("--sql-tasks", type=int, default=6)
    ap.add_argument("--task-seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "critic.md")
    args = ap.parse_args()
    command = "python benchmarks/critic.py " + " ".join(sys.argv[1:])
    started, load0, t0 = datetime.now(UTC), os.getloadavg()[0], time.perf_counter()
    res = asyncio.run(measure(args))
    res.update(started=f"{started:%Y-%m-%d %H:%M}", load=(load0, os.getloadavg()[0]),
               wall_s=time.perf_counter() - t0, command=command.strip())
    text = page(args, res, command.strip())
    args.out.write_text(text)
    for e in res["envs"].values():
        e.pop("_comps")
    args.out.with_suffix(".json").write_text(json.dumps(res, indent=2, default=str) + "\n")
    print(text)


if __name__ == "__main__":
    main()
