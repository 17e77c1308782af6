"""Report speed: ``sharpen report`` and ``sharpen compare`` over 100,000 stored trajectories.

What is measured
----------------
A fresh SQLite store (WAL, the default backend) holds two runs of the same agent-shaped
data: 20,000 tasks × 5 epochs = 100,000 trajectories each (plus 5,000 task clusters, an
execution feedback record per trajectory, a safety record on 1% of them, 3% infra/env
errors, a stated confidence on every outcome, and ~1 KB of messages per trajectory so the
heavy column is there to be skipped). Rows are inserted with SQLAlchemy Core
``executemany`` in batches — the rows are exactly what ``Store.save_trajectory`` would
write (built from a real Trajectory through the store's codec), only faster to insert.

Timed (wall clock, median of ``--repeats``; the store was just written, so the OS page
cache is warm — a store read from a cold disk adds its read time):

* **report, in-process** — open the Store, then ``build_report``: the SQL aggregates of
  :mod:`sharpen.store.aggregate`, accuracy/pass@k/pass^k with intervals, cost, reliability,
  power and the validity look-ups. This is the computation behind ``sharpen report``.
* **report, CLI** — ``python -m sharpen.cli.main report RUN --json`` in a subprocess: the
  above plus interpreter start-up and imports, end to end as a user sees it.
* **compare, in-process** — ``compare_runs`` of the two runs (5 epochs → paired bootstrap
  over 5,000 clusters, 2,000 replicates).
* **peer: trajectory path** — the same report computed the obvious way: iterate the run's
  trajectories with ``Store.iter_trajectories(with_steps=False)`` (no messages or steps,
  but every row becomes a Trajectory with its feedback) and aggregate them in Python
  (``aggregate_trajectories``), then the same statistics. One run (it is slow).

Target: the in-process report under 2 s on this machine.

Run: ``python benchmarks/report_speed.py`` (about 2 minutes, most of it building the
store); ``--tasks``/``--epochs`` change the size. Writes
``benchmarks/results/report_speed.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from machine_info import cpu_name, version

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
TARGET_S = 2.0
MESSAGE_BYTES = 1000


def build_store(url: str, n_tasks: int, epochs: int, seed: int) -> list[str]:
    """Two runs of ``n_tasks × epochs`` trajectories in the store at ``url``; their ids."""
    from sqlalchemy import insert

    from sharpen.core.agent_spec import AgentSpec
    from sharpen.core.feedback import Feedback, FeedbackTarget
    from sharpen.core.manifest import RunManifest
    from sharpen.core.messages import Message, Usage
    from sharpen.core.outcome import Outcome
    from sharpen.core.registry import PluginRef
    from sharpen.core.task import TaskSpec
    from sharpen.core.trajectory import Trajectory, trajectory_key
    from sharpen.store import Store, codec
    from sharpen.store.engine import write_begin
    from sharpen.store.schema import feedback, trajectories

    rng = np.random.default_rng(seed)
    tasks = [TaskSpec(env="bench", id=f"gen/bench/{i}", seed=i,
                      metadata={"source": "generated", "cluster": f"c{i // 4}"})
             for i in range(n_tasks)]
    hashes = [t.hash() for t in tasks]
    rates = rng.beta(0.6, 1.4, n_tasks)
    filler = "x" * (MESSAGE_BYTES - 120)
    template = Trajectory(
        run_id="r", task=tasks[0], agent_hash="a", messages=[
            Message(role="system", content="You write Python."),
            Message(role="user", content=filler[: len(filler) // 2]),
            Message(role="assistant", content=filler[len(filler) // 2:]),
        ], outcome=Outcome(success=True, reward=1.0, components={"tests_passed": 5.0}),
        usage=Usage(input_tokens=1, output_tokens=1, calls=1, cost_usd=0.0),
        ended_at=datetime.now(UTC),
    )
    base_row = codec.trajectory_row(template)
    fb_template = codec.feedback_row(Feedback(
        source="execution", name="tests_passed", value=1.0, rationale="5/5 passed",
        target=FeedbackTarget(kind="step", run_id="r", trajectory_id="t", step_index=0)), 0)
    run_ids = []
    with Store(url) as store:
        for r in range(2):
            spec = AgentSpec(name=f"bench-{r}", params={"temperature": 0.2 * r})
            run_id = uuid.uuid4().hex[:12]
            manifest = RunManifest(run_id=run_id, env=PluginRef(name="bench"), agent_hash=spec.hash(),
                                   task_ids=[t.id for t in tasks], epochs=epochs, seed=seed,
                                   config_hash=uuid.uuid4().hex)
            store.create_run(manifest, spec, tasks)
            shift = 0.03 * r  # the second agent is a little better
            start = datetime(2026, 1, 1, tzinfo=UTC)
            rows: list[dict[str, Any]] = []
            fbs: list[dict[str, Any]] = []

            def flush(rows: list[dict[str, Any]], fbs: list[dict[str, Any]]) -> None:
                with write_begin(store._engine) as conn:
                    conn.execute(insert(trajectories), rows)
                    conn.execute(insert(feedback), fbs)
                rows.clear()
                fbs.clear()

            for e in range(epochs):
                u = rng.random(n_tasks)
                err = rng.random(n_tasks)
                conf = np.clip(rates + rng.normal(0, 0.2, n_tasks), 0, 1)
                secs = rng.gamma(2.0, 1.5, n_tasks)
                tokens = rng.integers(300, 3000, n_tasks)
                for i in range(n_tasks):
                    tid = uuid.uuid4().hex
                    kind = "infra" if err[i] < 0.02 else ("env" if err[i] < 0.03 else None)
                    ok = kind is None and u[i] < min(1.0, rates[i] + shift)
                    began = start + timedelta(seconds=i + e * n_tasks)
                    rows.append({
                        **base_row, "id": tid, "run_id": run_id, "task_hash": hashes[i],
                        "agent_hash": spec.hash(), "epoch": e, "seed": i * 10 + e,
                        "key": trajectory_key(tasks[i], spec.hash(), e), "success": ok,
                        "reward": 1.0 if ok else 0.0, "error_kind": kind,
                        "components": f'{{"tests_passed": {5 if ok else 2}.0, "confidence": {conf[i]:.3f}}}',
                        "input_tokens": int(tokens[i]), "output_tokens": int(tokens[i]) // 4,
                        "cost_usd": float(tokens[i]) * 1e-6, "started_at": began,
                        "ended_at": began + timedelta(seconds=float(secs[i])),
                    })
                    fbs.append({**fb_template, "id": uuid.uuid4().hex, "run_id": run_id,
                                "trajectory_id": tid})
                    if err[i] > 0.99:
                        fbs.append({**fb_template, "id": uuid.uuid4().hex, "run_id": run_id,
                                    "trajectory_id": tid, "source": "safety", "seq": 1,
                                    "name": "unsafe_call"})
                    if len(rows) >= 5000:
                        flush(rows, fbs)
            if rows:
                flush(rows, fbs)
            store.set_run_status(run_id, "finished", {"wall_seconds": 3600.0})
            run_ids.append(run_id)
    return run_ids


def rounded(x: Any) -> Any:
    """``x`` with floats rounded to 9 significant digits (SQL and Python sum in other orders)."""
    if isinstance(x, float):
        return float(f"{x:.9g}")
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [rounded(v) for v in x]
    return x


def timed(fn: Any, repeats: int) -> tuple[float, float, Any]:
    """(first, median of all, last result) wall seconds of ``repeats`` calls."""
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times[0], statistics.median(times), out


def machine(load_start: float) -> dict[str, str]:
    cpu = cpu_name()

    return {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "cpu": cpu,
            "cores": str(len(os.sched_getaffinity(0))), "python": platform.python_version(),
            "numpy": version("numpy"), "scipy": version("scipy"), "sqlalchemy": version("sqlalchemy"),
            "sqlite": sqlite3.sqlite_version,
            "load average (1 min), start → end": f"{load_start:.2f} → {os.getloadavg()[0]:.2f}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--tasks", type=int, default=20_000)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tmp-dir", default=None)
    args = ap.parse_args()

    from sharpen.stats.compare import compare_runs
    from sharpen.stats.report import build_report, load_table, report_from_table
    from sharpen.stats.taskdata import TaskTable, aggregate_trajectories
    from sharpen.stats.validity import validity_checks
    from sharpen.store import Store

    n = args.tasks * args.epochs
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="report-speed-", dir=args.tmp_dir) as work:
        db = Path(work) / "bench.db"
        url = f"sqlite:///{db}"
        t0 = time.perf_counter()
        run_a, run_b = build_store(url, args.tasks, args.epochs, args.seed)
        build_s = time.perf_counter() - t0
        size_mb = sum(p.stat().st_size for p in Path(work).iterdir()) / 2**20
        print(f"built {2 * n:,} trajectories in {build_s:.0f} s ({size_mb:.0f} MiB)", flush=True)

        def report() -> Any:
            with Store(url) as st:
                return build_report(st, run_b)

        first, med, rep = timed(report, args.repeats)
        print(f"report in-process: first {first:.2f} s, median {med:.2f} s", flush=True)

        cmd = [sys.executable, "-m", "sharpen.cli.main", "report", run_b, "--json", "--store", url]

        def cli() -> None:
            subprocess.run(cmd, check=True, capture_output=True, env={**os.environ, "COLUMNS": "200"})

        cli_first, cli_med, _ = timed(cli, args.repeats)
        print(f"report CLI: first {cli_first:.2f} s, median {cli_med:.2f} s", flush=True)

        def compare() -> Any:
            with Store(url) as st:
                recs = [st.get_run(run_a), st.get_run(run_b)]
                return compare_runs(recs, [load_table(st, run_a), load_table(st, run_b)])

        cmp_first, cmp_med, cmp = timed(compare, args.repeats)
        print(f"compare in-process: first {cmp_first:.2f} s, median {cmp_med:.2f} s", flush=True)

        def peer() -> Any:
            with Store(url) as st:
                rec = st.get_run(run_b)
                table = TaskTable.from_aggregate(
                    aggregate_trajectories(run_b, st.iter_trajectories(run_b, with_steps=False)))
                return report_from_table(rec, table, validity_checks(st, rec.manifest.env))

        peer_s, _, peer_rep = timed(peer, 1)
        print(f"peer (trajectory path): {peer_s:.2f} s", flush=True)
        same = (peer_rep.accuracy == rep.accuracy and peer_rep.errors == rep.errors
                and rounded(peer_rep.reliability.model_dump()) == rounded(rep.reliability.model_dump()))

    info = machine(load_start)
    command = "python benchmarks/report_speed.py" + (" " + " ".join(sys.argv[1:]) if sys.argv[1:] else "")
    rows = [
        ("report, in-process (open store + build_report)", first, med, peer_s / med),
        ("report, CLI end to end (`sharpen report RUN --json`)", cli_first, cli_med, peer_s / cli_med),
        ("compare, in-process (2 × 100k, paired bootstrap)", cmp_first, cmp_med, None),
        ("peer: iter_trajectories + Python aggregation, same report", peer_s, peer_s, 1.0),
    ]
    lines = ["| what | first (s) | median (s) | peer ÷ this |", "|---|---|---|---|"]
    for what, f, m, ratio in rows:
        lines.append(f"| {what} | {f:.2f} | {m:.2f} | {'—' if ratio is None else f'{ratio:.1f}×'} |")
    verdict = "met" if med < TARGET_S else "not met"
    acc = rep.accuracy.success
    md = [
        "# Report speed: `sharpen report` over 100,000 trajectories",
        "",
        f"`{command}` — {info['date']}.",
        "",
        f"Store: SQLite (WAL) with two runs of {args.tasks:,} tasks × {args.epochs} epochs = "
        f"{n:,} trajectories each ({size_mb:.0f} MiB, built in {build_s:.0f} s), "
        f"{args.tasks // 4:,} task clusters, an execution feedback record per trajectory, "
        "~1 KB of messages each. Median of "
        f"{args.repeats} calls, each opening the store afresh; the OS page cache is warm (the store "
        "was just written). Definitions are in the script's docstring.",
        "",
        *lines,
        "",
        f"Target: report computation under {TARGET_S:g} s — **{verdict}** ({med:.2f} s).",
        f"The report read: success {100 * (acc.value or 0):.1f}% over {acc.n_tasks:,} tasks "
        f"({acc.ci.method if acc.ci else '—'} interval), pass@1..{rep.accuracy.trials_max}, "
        f"{rep.errors.attempts - rep.errors.counted:,} excluded attempts; compare verdict: "
        f"“{cmp.comparisons[0].verdict}”.",
        "Peer path gives the same accuracy and errors, and the same reliability to 9 significant "
        f"digits: {'yes' if same else 'NO'}.",
        "",
        "## Machine",
        "",
        *(f"- {k}: {v}" for k, v in info.items()),
        "",
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "report_speed.md"
    out.write_text("\n".join(md), encoding="utf-8")
    print("\n".join(lines))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
