"""Diagnosis speed: ``sharpen diagnose`` over 100,000 stored trajectories, and counterfactual
replays per second against plain episodes per second.

What is measured
----------------
**Diagnosis.** A fresh SQLite store (WAL, the default backend) holds one run of 100,000
trajectories with 4–12 steps each (:mod:`diagnose_store`: code-like tool calls with planted
loops, invalid bursts, resubmissions and limit hits, ~400 bytes of messages per step). Timed,
wall clock, the OS page cache warm (the store was just written):

* **first diagnosis** — :func:`sharpen.diagnose.run.diagnose_run` with every built-in
  detector, the failure taxonomy and the stage metrics where the installed version has them:
  it reads every trajectory with its steps, runs the detectors, stores every finding (batched
  writes) and summarises. This is ``sharpen diagnose RUN`` less interpreter start-up.
* **repeat diagnosis** — the same call again: nothing new is stored, but every trajectory is
  read and diagnosed again (now with its findings as feedback to read too).
* **detectors only** — the repeat diagnosis without stages and taxonomy
  (``stages=False, taxonomy="none"``): the same work as the peer below, plus the summary.
* **peer: the obvious path** — the same detectors over ``Store.iter_trajectories(run)`` with
  the steps' messages read (what a script over the public API does), no storing.

Target: the first diagnosis under 10 s on this machine.

**Replays.** The reference agent plays ``--episodes`` tasks of an environment through the real
:class:`~sharpen.runner.Runner` into a store (plain episodes: reset, the agent's steps, the
verifier, the store); then each stored trajectory is rebuilt by
:func:`sharpen.diagnose.replay.replay_trajectory` (reset and the same actions on a fresh
environment, then its outcome) — what counterfactual attribution does once per candidate
step. Reported: episodes/s, replays/s and their ratio, per environment, in the same run.

Run: ``python benchmarks/diagnose_speed.py`` (a few minutes; ``--n`` changes the size).
Writes ``benchmarks/results/diagnose_speed.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from diagnose_store import build_store
from machine_info import cpu_name, version

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
TARGET_S = 10.0
REPLAY_ENVS = ("sql", "toolshop", "textworld", "code")


def diagnosis_options() -> dict[str, Any]:
    """The taxonomy and stage options ``diagnose_run`` accepts in the installed version."""
    from sharpen.diagnose.run import diagnose_run

    accepted = inspect.signature(diagnose_run).parameters
    return {k: v for k, v in {"taxonomy": "tfidf", "stages": True}.items() if k in accepted}


def peer(url: str, run_id: str) -> int:
    """The built-in detectors over fully read trajectories; the number of findings."""
    from sharpen.diagnose.run import build_detectors
    from sharpen.store import Store

    built = build_detectors()
    found = 0
    with Store(url) as st:
        for t in st.iter_trajectories(run_id):
            found += sum(len(det.detect(t)) for _, det in built)
    return found


async def episodes_vs_replays(env_name: str, n: int, work: Path) -> dict[str, Any]:
    """``n`` reference-agent episodes of ``env_name`` through the Runner, then a replay of
    each stored trajectory; rates and whether every replay matched its episode."""
    from sharpen.core.agent_spec import AgentSpec
    from sharpen.core.registry import REGISTRY, PluginRef
    from sharpen.diagnose.replay import divergence, replay_trajectory
    from sharpen.runner import RunConfig, Runner
    from sharpen.store import Store

    env = PluginRef(name=env_name)
    tasks = REGISTRY.create("env", env).list_tasks("test", limit=n)
    store = Store(f"sqlite:///{work / f'{env_name}.db'}")
    config = RunConfig(env=env, agent=AgentSpec(agent=PluginRef(name="reference")), tasks=tasks,
                       concurrency=1)
    t0 = time.perf_counter()
    summary = await Runner(store, progress=False).run(config)
    episodes_s = time.perf_counter() - t0
    trajectories = list(store.iter_trajectories(summary.run_id))
    t0 = time.perf_counter()
    rebuilt = [await replay_trajectory(t, env) for t in trajectories]
    replays_s = time.perf_counter() - t0
    same = sum(divergence(t, r) is None for t, r in zip(trajectories, rebuilt, strict=True))
    store.close()
    return {"env": env_name, "n": len(trajectories), "episodes_per_s": len(trajectories) / episodes_s,
            "replays_per_s": len(rebuilt) / replays_s, "identical": same}


def machine(load_start: float) -> dict[str, str]:
    import platform
    import sqlite3
    from datetime import UTC, datetime

    return {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "cpu": cpu_name(),
            "cores": str(len(os.sched_getaffinity(0))), "python": platform.python_version(),
            "pydantic": version("pydantic"), "sqlalchemy": version("sqlalchemy"),
            "scikit-learn": version("scikit-learn"), "sqlite": sqlite3.sqlite_version,
            "load average (1 min), start → end": f"{load_start:.2f} → {os.getloadavg()[0]:.2f}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--n", type=int, default=100_000, help="trajectories in the diagnosed run")
    ap.add_argument("--episodes", type=int, default=20, help="episodes per environment (replays)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tmp-dir", default=None)
    args = ap.parse_args()

    from sharpen.diagnose.run import diagnose_run
    from sharpen.store import Store

    load_start = os.getloadavg()[0]
    options = diagnosis_options()
    with tempfile.TemporaryDirectory(prefix="diagnose-speed-", dir=args.tmp_dir) as tmp:
        work = Path(tmp)
        url = f"sqlite:///{work / 'bench.db'}"
        t0 = time.perf_counter()
        run_id = build_store(url, args.n, args.seed)
        build_s = time.perf_counter() - t0
        size_mb = sum(p.stat().st_size for p in work.iterdir()) / 2**20
        print(f"built {args.n:,} trajectories in {build_s:.0f} s ({size_mb:.0f} MiB)", flush=True)

        def diagnose() -> Any:
            with Store(url) as st:
                return diagnose_run(st, run_id, **options)

        t0 = time.perf_counter()
        first = diagnose()
        first_s = time.perf_counter() - t0
        print(f"first diagnosis: {first_s:.2f} s, {first.stored:,} findings stored", flush=True)
        t0 = time.perf_counter()
        again = diagnose()
        again_s = time.perf_counter() - t0
        print(f"repeat diagnosis: {again_s:.2f} s, {again.stored} stored", flush=True)
        t0 = time.perf_counter()
        with Store(url) as st:
            diagnose_run(st, run_id, **{k: ("none" if k == "taxonomy" else False) for k in options})
        only_s = time.perf_counter() - t0
        print(f"detectors only: {only_s:.2f} s", flush=True)
        t0 = time.perf_counter()
        peer_found = peer(url, run_id)
        peer_s = time.perf_counter() - t0
        print(f"peer: {peer_s:.2f} s, {peer_found:,} findings", flush=True)
        findings = sum(s.findings for s in first.detectors)
        replays = [asyncio.run(episodes_vs_replays(e, args.episodes, work)) for e in REPLAY_ENVS]
        for r in replays:
            print(r, flush=True)

    info = machine(load_start)
    command = "python benchmarks/diagnose_speed.py" + (" " + " ".join(sys.argv[1:]) if sys.argv[1:] else "")
    verdict = "met" if first_s < TARGET_S else "not met"
    per_ms = 1000 * first_s / args.n
    md = [
        "# Diagnosis speed: `sharpen diagnose` over 100,000 trajectories; replays against episodes",
        "",
        f"`{command}` — {info['date']}.",
        "",
        f"Store: SQLite (WAL), one run of {args.n:,} trajectories with steps ({size_mb:.0f} MiB, "
        f"built in {build_s:.0f} s). Diagnosis options: every built-in detector"
        + (f", {', '.join(f'{k}={v}' for k, v in options.items())}" if options else "")
        + ". Wall clock, the OS page cache warm. Definitions are in the script's docstring.",
        "",
        "| what | seconds | per trajectory | peer ÷ this |",
        "|---|---|---|---|",
        f"| first diagnosis (read, detect, store {first.stored:,} findings, summarise) | "
        f"{first_s:.2f} | {per_ms:.3f} ms | {peer_s / first_s:.2f}× |",
        f"| repeat diagnosis (nothing new stored) | {again_s:.2f} | "
        f"{1000 * again_s / args.n:.3f} ms | {peer_s / again_s:.2f}× |",
        f"| detectors only (repeat, no stages, no taxonomy) | {only_s:.2f} | "
        f"{1000 * only_s / args.n:.3f} ms | {peer_s / only_s:.2f}× |",
        f"| peer: the same detectors over `iter_trajectories` (messages read), nothing stored | "
        f"{peer_s:.2f} | {1000 * peer_s / args.n:.3f} ms | 1.00× |",
        "",
        f"Target: the first diagnosis under {TARGET_S:g} s — **{verdict}** ({first_s:.1f} s).",
        f"Findings: {findings:,} by the diagnosis, {peer_found:,} by the peer path "
        f"({'the same' if findings == peer_found else 'DIFFERENT'}); failed {first.failed:,}, "
        f"solved {first.solved:,}.",
        "",
        "## Counterfactual replays against plain episodes",
        "",
        f"The reference agent on {args.episodes} test tasks per environment, one at a time "
        "(concurrency 1), then each stored trajectory replayed on a fresh environment.",
        "",
        "| env | episodes | episodes/s | replays/s | replays ÷ episodes | replays identical |",
        "|---|---|---|---|---|---|",
        *(f"| {r['env']} | {r['n']} | {r['episodes_per_s']:.1f} | {r['replays_per_s']:.1f} | "
          f"{r['replays_per_s'] / r['episodes_per_s']:.2f}× | {r['identical']}/{r['n']} |"
          for r in replays),
        "",
        "## Machine",
        "",
        *(f"- {k}: {v}" for k, v in info.items()),
        "",
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "diagnose_speed.md"
    out.write_text("\n".join(md), encoding="utf-8")
    print("\n".join(md))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
