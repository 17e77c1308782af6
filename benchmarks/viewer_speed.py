"""Viewer speed: server time of ``sharpen view`` pages over 100,000 trajectories and
1,000,000 steps in SQLite.

What is measured
----------------
A fresh SQLite store (WAL, the default backend; schema created by ``Store()``, i.e. by the
Alembic migrations) is filled with SQLAlchemy Core ``executemany`` into the real tables:
20 runs × 1,000 tasks × 5 epochs = 100,000 trajectories, 999,999 + 1 trajectories' steps
summing to 1,000,000 (9–10 steps each, and one trajectory of 5,000 steps), realistic
message JSON in ``trajectories.messages`` and ``steps.messages``, one execution feedback
record per trajectory, a human note on 1% of them, 3% infra errors.

Each page is requested in-process through FastAPI's ``TestClient`` (the ASGI app, Jinja
rendering and the SQLite queries; no network), ``--repeats`` times after one warm-up; the
table gives p50 and p95 per page kind:

* **runs page** ``/`` — every run with counts, success + Wilson interval, cost, time;
* **run page** ``/runs/ID`` — first page, page 10, and the filters failed-only,
  error kind, feedback source, and full-text search (a hit and a miss), over several runs;
* **trajectory page** ``/t/ID`` — the first page (50 steps) of the 5,000-step trajectory.

Peers, measured in the same run: the run page against listing the whole run with
``Store.iter_trajectories(with_steps=False)`` (what ``sharpen show`` reads), and the
trajectory page against loading all its 5,000 steps (``steps_by_trajectory``).

Targets: runs and run pages p95 < 300 ms; the 5,000-step trajectory's first page < 500 ms.

Run: ``python benchmarks/viewer_speed.py`` (a few minutes on two cores, mostly filling);
``--runs/--tasks/--epochs`` change the size; writes ``benchmarks/results/viewer_speed.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import insert

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.hashing import content_hash
from sharpen.core.manifest import RunManifest
from sharpen.core.registry import PluginRef
from sharpen.core.task import TaskSpec
from sharpen.store import codec
from sharpen.store.engine import read_begin
from sharpen.store.queries import steps_by_trajectory
from sharpen.store.schema import agent_specs, feedback, run_tasks, runs, steps, tasks, trajectories
from sharpen.store.store import Store
from sharpen.viewer import create_app

RESULTS = Path(__file__).resolve().parent / "results" / "viewer_speed.md"
BIG_STEPS = 5000
CHUNK = 20_000


def msg(role: str, content: str, **extra: object) -> dict:
    return {"role": role, "content": content, "tool_calls": [], "tool_call_id": None, **extra}


def step_messages(task: str, i: int, passed: int) -> str:
    code = f"def {task}(x):\\n    # attempt {i}\\n    return sorted(x)[:{i}]\\n"
    call = {"id": f"call_{i}", "name": "submit", "arguments": {"code": code}}
    return json.dumps([
        {**msg("assistant", f"Attempt {i}: trying a slice.\n```python\n{code}```"), "tool_calls": [call]},
        msg("tool", f"{passed}/5 tests passed.\nFAILED test_2: assert {task}([3, 1]) == [1, 3]",
            tool_call_id=f"call_{i}"),
    ])


def fill(store: Store, n_runs: int, n_tasks: int, epochs: int, total_steps: int, seed: int) -> dict:
    rng = random.Random(seed)
    engine = store._engine
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    task_specs = [TaskSpec(env="code", id=f"gen/task-{k}", seed=k,
                           knobs={"difficulty": ("easy", "medium", "hard")[k % 3]},
                           metadata={"difficulty": ("easy", "medium", "hard")[k % 3]})
                  for k in range(n_tasks)]
    task_hashes = [t.hash() for t in task_specs]
    n_traj = n_runs * n_tasks * epochs
    base_steps, extra = divmod(total_steps - BIG_STEPS, n_traj - 1)
    system = json.dumps([msg("system", "You are a careful programmer. Call submit(code)."),
                         msg("user", "def f(x):\n    \"\"\"Return the sorted list.\"\"\"\n")])
    step_cache: dict[tuple[int, int], str] = {}
    run_ids, big_id = [], None
    with engine.begin() as conn:
        conn.execute(insert(tasks), [codec.task_row(t) for t in task_specs])
    k_traj = 0
    for r in range(n_runs):
        spec = AgentSpec(name=f"bench-{r}", params={"temperature": 0.1 * (r % 7), "max_tokens": 384})
        run_id = f"run{r:04d}" + content_hash(r)[:20]
        run_ids.append(run_id)
        manifest = RunManifest(run_id=run_id, created_at=t0 + timedelta(hours=r), env=PluginRef(name="code"),
                               agent_hash=spec.hash(), task_ids=[t.id for t in task_specs],
                               epochs=epochs, seed=r, config_hash=content_hash(["bench", r]))
        traj_rows, step_rows, fb_rows = [], [], []
        for k, th in enumerate(task_hashes):
            for e in range(epochs):
                tid = f"{run_id[:8]}-{k:06d}-{e}"
                n = BIG_STEPS if k_traj == 0 else base_steps + (1 if k_traj <= extra else 0)
                if k_traj == 0:
                    big_id = tid
                k_traj += 1
                success = rng.random() < 0.4 + 0.02 * r
                err = "infra" if rng.random() < 0.03 else None
                start = t0 + timedelta(hours=r, seconds=k * epochs + e)
                body = [json.loads(step_messages(f"task_{k}", i, 3)) for i in range(n)]
                traj_rows.append({
                    "id": tid, "run_id": run_id, "task_hash": th, "agent_hash": spec.hash(), "epoch": e,
                    "seed": rng.randrange(2**31), "key": f"{th}:{spec.hash()}:{e}",
                    "success": success and err is None, "reward": rng.random(), "error_kind": err,
                    "error": "503 after retries" if err else None, "evidence": "test_2 failed",
                    "components": '{"tests_passed": 3, "tests_total": 5}', "input_tokens": 900,
                    "output_tokens": 300, "calls": n, "cost_usd": 0.0004 * n, "invalid_actions": 0,
                    "infra_retries": 0, "n_steps": n, "started_at": start,
                    "ended_at": start + timedelta(seconds=5 + rng.random() * 20),
                    "messages": system[:-1] + ", " + json.dumps([m for b in body for m in b])[1:],
                })
                for i in range(n):
                    passed = rng.randrange(6)
                    key = (i % 12, passed)
                    if key not in step_cache:
                        step_cache[key] = step_messages(f"task_{k % 50}", i % 12, passed)
                    step_rows.append({
                        "trajectory_id": tid, "index": i, "action": None, "invalid_action": None,
                        "observation": f"{passed}/5 tests passed.", "reward": passed / 5,
                        "terminated": i == n - 1, "truncated": False, "messages": step_cache[key],
                        "usage": '{"input_tokens": 90, "output_tokens": 30, "calls": 1, "cost_usd": 0.0004}',
                        "model_seconds": 0.5, "env_seconds": 0.06, "info": "{}",
                    })
                fb_rows.append(_fb(tid, run_id, 0, "execution", "tests_passed", start, n - 1))
                if rng.random() < 0.01:
                    fb_rows.append(_fb(tid, run_id, 1, "human", "note", start, 0))
                if tid == big_id:
                    fb_rows += [_fb(tid, run_id, 2 + i, "execution", "tests_passed", start, i)
                                for i in range(BIG_STEPS)]
        with engine.begin() as conn:
            conn.execute(insert(agent_specs).prefix_with("OR IGNORE"), [codec.agent_spec_row(spec)])
            conn.execute(insert(runs), [{**codec.run_row(manifest, n_tasks), "status": "finished",
                                          "summary": json.dumps({"wall_seconds": 3600.0})}])
            conn.execute(insert(run_tasks), [{"run_id": run_id, "task_hash": th, "position": p}
                                             for p, th in enumerate(task_hashes)])
            for rows, table in ((traj_rows, trajectories), (step_rows, steps), (fb_rows, feedback)):
                for i in range(0, len(rows), CHUNK):
                    conn.execute(insert(table), rows[i:i + CHUNK])
        print(f"  run {r + 1}/{n_runs}: {len(traj_rows)} trajectories, {len(step_rows)} steps",
              file=sys.stderr)
    return {"runs": run_ids, "big": big_id}


def _fb(tid: str, run_id: str, seq: int, source: str, name: str, at: datetime, step: int) -> dict:
    return {"id": f"{tid}-fb{seq}", "seq": seq, "source": source, "target_kind": "step", "run_id": run_id,
            "trajectory_id": tid, "step_index": step, "span_start": None, "span_end": None, "name": name,
            "value": "0.6", "rationale": "3/5 tests passed", "author": "env:code" if source != "human"
            else "ada", "created_at": at, "supersedes": None}


def timed(fn, repeats: int) -> list[float]:
    fn()  # warm-up
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--db", help="store file to (re)use; default: a temporary directory")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="viewer-bench-")
    path = Path(args.db) if args.db else Path(tmp) / "bench.db"
    fresh = not path.exists()
    store = Store(f"sqlite:///{path}")
    t = time.perf_counter()
    if fresh:
        ids = fill(store, args.runs, args.tasks, args.epochs, args.steps, seed=7)
        (path.parent / "ids.json").write_text(json.dumps(ids))
    else:
        ids = json.loads((path.parent / "ids.json").read_text())
    fill_s = time.perf_counter() - t
    with read_begin(store._engine) as conn:
        n_traj = conn.exec_driver_sql("select count(*) from trajectories").scalar_one()
        n_steps = conn.exec_driver_sql("select count(*) from steps").scalar_one()
    print(f"store: {n_traj:,} trajectories, {n_steps:,} steps, {path.stat().st_size / 1e6:.0f} MB, "
          f"filled in {fill_s:.0f} s", file=sys.stderr)
    client = TestClient(create_app(store))
    sample = ids["runs"][:: max(1, len(ids["runs"]) // 4)][:4]

    def get(url: str):
        def call() -> None:
            r = client.get(url)
            assert r.status_code == 200, (url, r.status_code, r.text[:300])
        return call

    rows: list[tuple[str, list[float], float]] = []

    def bench(name: str, urls: list[str], target: float) -> None:
        xs: list[float] = []
        for u in urls:
            xs += timed(get(u), args.repeats)
        rows.append((name, xs, target))
        print(f"  {name}: p50 {statistics.median(xs):.1f} ms, p95 {p95(xs):.1f} ms", file=sys.stderr)

    bench("runs page `/`", ["/"], 300)
    bench("runs page sorted by success", ["/?sort=success"], 300)
    bench("run page, first page", [f"/runs/{r}" for r in sample], 300)
    bench("run page, page 10", [f"/runs/{r}?page=10" for r in sample], 300)
    bench("run page, failed only", [f"/runs/{r}?failed=1" for r in sample], 300)
    bench("run page, error kind infra", [f"/runs/{r}?error_kind=infra" for r in sample], 300)
    bench("run page, human feedback", [f"/runs/{r}?source=human" for r in sample], 300)
    bench("run page, search (hit)", [f"/runs/{r}?q=task_17(" for r in sample], 300)
    bench("run page, search (miss: scans the run)", [f"/runs/{r}?q=zebra-not-there" for r in sample], 300)
    bench("trajectory page 1 (5,000 steps)", [f"/t/{ids['big']}"], 500)
    bench("trajectory page 50 (5,000 steps)", [f"/t/{ids['big']}?page=50"], 500)

    run0 = sample[0]
    peer_run = timed(lambda: sum(1 for _ in store.iter_trajectories(run0, with_steps=False)),
                     max(3, args.repeats // 4))

    def all_steps() -> None:
        with read_begin(store._engine) as conn:
            steps_by_trajectory(conn, [ids["big"]])

    peer_traj = timed(all_steps, max(3, args.repeats // 4))
    run_first = next(xs for name, xs, _ in rows if name == "run page, first page")
    traj_first = next(xs for name, xs, _ in rows if name.startswith("trajectory page 1"))
    lines = [
        "# Viewer speed",
        "",
        f"`python benchmarks/viewer_speed.py` — {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
        f"{platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs.",
        "",
        f"Store: SQLite (WAL), {n_traj:,} trajectories in {args.runs} runs "
        f"({args.tasks:,} tasks × {args.epochs} epochs each), {n_steps:,} steps, "
        f"{path.stat().st_size / 1e6:.0f} MB; filled with SQLAlchemy Core executemany in {fill_s:.0f} s. "
        f"Server time per request, in-process through FastAPI's TestClient (ASGI app + Jinja + "
        f"SQLite), {args.repeats} requests per URL after one warm-up.",
        "",
        "| page | requests | p50 ms | p95 ms | target p95 | met |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, xs, target in rows:
        lines.append(f"| {name} | {len(xs)} | {statistics.median(xs):.1f} | {p95(xs):.1f} | "
                     f"< {target} ms | {'yes' if p95(xs) < target else 'NO'} |")
    lines += [
        "",
        "Peers in the same run (median ms):",
        "",
        "| peer | ms | viewer page | ratio |",
        "|---|---:|---|---:|",
        f"| `Store.iter_trajectories(with_steps=False)` over one run ({args.tasks * args.epochs:,} "
        f"trajectories, what `sharpen show` reads) | {statistics.median(peer_run):.0f} | run page, first "
        f"page ({statistics.median(run_first):.1f} ms) | "
        f"{statistics.median(peer_run) / statistics.median(run_first):.1f}× |",
        f"| load all {BIG_STEPS:,} steps of the big trajectory (`steps_by_trajectory`) | "
        f"{statistics.median(peer_traj):.0f} | trajectory page 1 ({statistics.median(traj_first):.1f} ms)"
        f" | {statistics.median(peer_traj) / statistics.median(traj_first):.1f}× |",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))
    store.close()


if __name__ == "__main__":
    main()
