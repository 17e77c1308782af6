"""A store of agent-shaped trajectories with steps, for :mod:`diagnose_speed`.

One run of ``n`` trajectories on tasks of a code-like environment (tools ``read``, ``write``,
``test``, ``submit``), 4–12 steps each, with the step rows exactly as
``Store.save_trajectory`` writes them (built from real ``Step`` objects through the store's
codec) but inserted with SQLAlchemy Core ``executemany`` in batches, which is faster. The mix
is planted so every built-in detector has something to find: ~10% of trajectories repeat one
action three times (a loop), ~5% send a burst of unparseable replies, ~20% resubmit code that
failed its tests, ~10% hit the step limit; the rest read, write, test and submit. Each step
carries ~400 bytes of messages (the assistant's reply and the tool's answer), the heavy column
a diagnosis should not need to read.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

WRITE = "def solve(xs):\n    return sorted(xs)[{k}]\n"


def _steps(rng: np.random.Generator, kind: str) -> list[Any]:
    from sharpen.core.messages import Message, Usage
    from sharpen.core.trajectory import Action, Step

    def step(i: int, tool: str | None, args: dict[str, Any], obs: str | None,
             info: dict[str, Any] | None = None, invalid: str | None = None,
             terminated: bool = False, truncated: bool = False) -> Step:
        reply = f"I will call {tool} with {args}." if tool else "Let me think about this..."
        return Step(index=i, messages=[Message(role="assistant", content=reply + " " * 120),
                                       Message(role="tool", content=obs or "")],
                    action=Action(tool=tool, arguments=args) if tool and not invalid else None,
                    invalid_action=invalid, observation=obs, terminated=terminated,
                    truncated=truncated, info=info or {},
                    usage=Usage(input_tokens=int(rng.integers(200, 2000)),
                                output_tokens=int(rng.integers(20, 200)), calls=1),
                    model_seconds=float(rng.gamma(2.0, 0.3)), env_seconds=float(rng.gamma(2.0, 0.05)))

    k = int(rng.integers(0, 5))
    out = [step(0, "read", {"path": "problem.md"}, "Write solve(xs) returning the k-th smallest. " * 3)]
    if kind == "loop":
        out += [step(i, "read", {"path": "solution.py"}, "No such file: solution.py") for i in (1, 2, 3)]
    elif kind == "invalid":
        out += [step(i, None, {}, None, invalid="no tool call in the reply") for i in (1, 2, 3)]
    code = WRITE.format(k=k)
    out.append(step(len(out), "write", {"path": "solution.py", "content": code}, "wrote 41 bytes"))
    passed = 5 if kind == "ok" else 2
    out.append(step(len(out), "test", {}, f"{passed} of 5 tests passed",
                    info={"tests_passed": passed, "tests_total": 5}))
    if kind == "resubmit":
        out.append(step(len(out), "test", {}, f"{passed} of 5 tests passed",
                        info={"tests_passed": passed, "tests_total": 5}))
    if kind == "limit":
        out.append(step(len(out), "read", {"path": "tests.md"}, "hidden", truncated=True,
                        info={"limit": "max_steps"}))
    else:
        out.append(step(len(out), "submit", {"code": code}, "submitted", terminated=True))
    return out


def build_store(url: str, n: int, seed: int) -> str:
    """One finished run of ``n`` trajectories with steps in the store at ``url``; its id."""
    from sqlalchemy import insert

    from sharpen.core.agent_spec import AgentSpec
    from sharpen.core.manifest import RunManifest
    from sharpen.core.messages import Usage
    from sharpen.core.outcome import Outcome
    from sharpen.core.registry import PluginRef
    from sharpen.core.task import TaskSpec
    from sharpen.core.trajectory import Trajectory, trajectory_key
    from sharpen.store import Store, codec
    from sharpen.store.engine import write_begin
    from sharpen.store.schema import steps, trajectories

    rng = np.random.default_rng(seed)
    n_tasks = max(1, n // 5)
    tasks = [TaskSpec(env="code", id=f"gen/bench/{i}", seed=i) for i in range(n_tasks)]
    hashes = [t.hash() for t in tasks]
    kinds = ["ok", "loop", "invalid", "resubmit", "limit", "fail"]
    weights = [0.45, 0.10, 0.05, 0.20, 0.10, 0.10]
    # A few templates per kind, reused: building Step objects is not what is measured.
    templates = {kind: [[codec.step_row("t", s) for s in _steps(rng, kind)] for _ in range(8)]
                 for kind in kinds}
    base = Trajectory(run_id="r", task=tasks[0], agent_hash="a",
                      outcome=Outcome(success=True, reward=1.0),
                      usage=Usage(input_tokens=1, output_tokens=1, calls=1),
                      ended_at=datetime.now(UTC))
    base_row = codec.trajectory_row(base)
    spec = AgentSpec(name="bench")
    run_id = uuid.uuid4().hex[:12]
    epochs = max(1, n // n_tasks)
    manifest = RunManifest(run_id=run_id, env=PluginRef(name="code"), agent_hash=spec.hash(),
                           task_ids=[t.id for t in tasks], epochs=epochs, seed=seed,
                           config_hash=uuid.uuid4().hex)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with Store(url) as store:
        store.create_run(manifest, spec, tasks)
        rows: list[dict[str, Any]] = []
        step_rows: list[dict[str, Any]] = []

        def flush() -> None:
            with write_begin(store._engine) as conn:
                conn.execute(insert(trajectories), rows)
                conn.execute(insert(steps), step_rows)
            rows.clear()
            step_rows.clear()

        picks = rng.choice(len(kinds), size=n, p=weights)
        for i in range(n):
            kind = kinds[int(picks[i])]
            task, epoch = i % n_tasks, i // n_tasks
            tid = uuid.uuid4().hex
            ok = kind == "ok"
            began = start + timedelta(seconds=i)
            rows.append({**base_row, "id": tid, "run_id": run_id, "task_hash": hashes[task],
                         "agent_hash": spec.hash(), "epoch": epoch, "seed": i,
                         "key": trajectory_key(tasks[task], spec.hash(), epoch),
                         "success": ok, "reward": 1.0 if ok else 0.0, "started_at": began,
                         "ended_at": began + timedelta(seconds=3)})
            template = templates[kind][i % 8]
            step_rows.extend({**r, "trajectory_id": tid} for r in template)
            if len(rows) >= 2000:
                flush()
        if rows:
            flush()
        store.set_run_status(run_id, "finished", {"wall_seconds": float(n)})
    return run_id
