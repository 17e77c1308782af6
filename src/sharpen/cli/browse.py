"""``sharpen runs``, ``sharpen show`` and ``sharpen export``: read what the store holds."""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from sharpen.cli.options import StoreOpt, open_store
from sharpen.core.errors import UserError
from sharpen.core.registry import REGISTRY
from sharpen.core.trajectory import Trajectory
from sharpen.run.summary import RunSummary


def runs(
    limit: Annotated[int, typer.Option(help="How many recent runs.")] = 20,
    store: StoreOpt = None,
) -> None:
    """List recent runs, newest first."""
    st = open_store(store)
    table = Table(title=f"Runs in {st.url}", title_justify="left")
    for col in ("run", "created", "env", "model", "tasks × epochs", "status", "success"):
        table.add_column(col)
    for r in st.list_runs(limit=limit):
        rate = f"{r.n_success}/{r.n_counted}" if r.n_counted else "—"
        table.add_row(r.manifest.run_id, r.created_at.strftime("%Y-%m-%d %H:%M"),
                      r.manifest.env.name, r.agent.model.name,
                      f"{len(r.manifest.task_ids)} × {r.manifest.epochs}", r.status, rate)
    Console().print(table)


def _pattern(trajs: list[Trajectory]) -> str:
    marks = []
    for t in sorted(trajs, key=lambda t: t.epoch):
        o = t.outcome
        marks.append("E" if o is None or not o.counts else ("✓" if o.success else "✗"))
    return "".join(marks)


def show(
    run: Annotated[str, typer.Argument(help="Run id, a unique prefix, or 'latest'.")],
    store: StoreOpt = None,
) -> None:
    """Show a run: manifest, per-task results (one mark per epoch), summary."""
    st = open_store(store)
    rid = st.resolve_run(run)
    rec = st.get_run(rid)
    console = Console()
    m = rec.manifest
    console.print(f"[bold]run {rid}[/] · {rec.status} · env {m.env.name} {m.env.args or ''} · "
                  f"model {rec.agent.model.name} {rec.agent.model.args or ''} · agent "
                  f"{m.agent_hash} · seed {m.seed} · isolation {m.isolation}", highlight=False)
    trajs = list(st.iter_trajectories(rid, with_steps=False))
    by_task: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajs:
        by_task[t.task.id].append(t)
    table = Table(title="Tasks (✓ pass, ✗ fail, E excluded error; one mark per epoch)",
                  title_justify="left")
    for col in ("task", "epochs", "reward", "invalid", "tokens", "note"):
        table.add_column(col)
    for task_id in m.task_ids:
        ts = by_task.get(task_id, [])
        if not ts:
            table.add_row(task_id, "(not run)", "", "", "", "")
            continue
        last = max(ts, key=lambda t: t.epoch)
        note = ""
        if last.outcome is not None:
            note = (last.outcome.error or last.outcome.evidence or "").strip().splitlines()
            note = note[0][:70] if note else ""
        reward = sum(t.outcome.reward for t in ts if t.outcome) / len(ts)
        table.add_row(task_id, _pattern(ts), f"{reward:.2f}",
                      str(sum(t.invalid_actions for t in ts)),
                      f"{sum(t.usage.total_tokens for t in ts):,}", note)
    console.print(table)
    wall = float((rec.summary or {}).get("wall_seconds", 0.0))
    console.print(RunSummary.of(rid, trajs, wall).table())


def export(
    run: Annotated[str, typer.Argument(help="Run id, a unique prefix, or 'latest'.")],
    format: Annotated[str, typer.Option("--format", "-f", help="Export format: jsonl.")] = "jsonl",
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="File to write (default: stdout).")] = None,
    store: StoreOpt = None,
) -> None:
    """Export trajectories, one JSON line each: OpenAI chat messages (with tool calls), the
    tools offered, the outcome and the feedback."""
    if format != "jsonl":
        raise UserError(f"unknown export format {format!r}", "use --format jsonl")
    st = open_store(store)
    rid = st.resolve_run(run)
    rec = st.get_run(rid)
    tools = [t.to_openai() for t in REGISTRY.create("env", rec.manifest.env).tools]
    out = output.open("w") if output else sys.stdout
    n = 0
    try:
        for t in st.iter_trajectories(rid, with_steps=False, with_messages=True):
            line = {
                "run_id": rid, "trajectory_id": t.id, "task": t.task.model_dump(mode="json"),
                "agent_hash": t.agent_hash, "epoch": t.epoch,
                "messages": [m.to_openai() for m in t.messages], "tools": tools,
                "outcome": t.outcome.model_dump(mode="json") if t.outcome else None,
                "feedback": [f.model_dump(mode="json") for f in st.feedback_for(t.id)],
                "usage": t.usage.model_dump(mode="json"),
            }
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
            n += 1
    finally:
        if output:
            out.close()
    if output:
        Console(stderr=True).print(f"wrote {n} trajectories to {output}")
