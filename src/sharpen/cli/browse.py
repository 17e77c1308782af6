"""``sharpen runs``, ``sharpen show`` and ``sharpen export``: read what the store holds."""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Annotated

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from sharpen.cli.options import JsonOpt, StoreOpt, WideOpt, open_store, run_json
from sharpen.cli.tables import print_table
from sharpen.core.trajectory import Trajectory
from sharpen.envs.generation import parse_split
from sharpen.runner.summary import RunSummary
from sharpen.store import RunRecord
from sharpen.store.store import LATEST
from sharpen.train.export import FeedbackCondition, Where
from sharpen.train.export import export as export_lines


def runs(
    limit: Annotated[int, typer.Option(min=1, help="How many recent runs.")] = 20,
    json_out: JsonOpt = False,
    wide: WideOpt = False,
    store: StoreOpt = None,
) -> None:
    """List recent runs, newest first. A run whose process is gone (killed) is shown
    ``interrupted``; an incomplete run's status says how many episodes are stored."""
    st = open_store(store)
    records = st.list_runs(limit=limit)
    if json_out:
        print(json.dumps({"store": str(st.url), "runs": [run_json(r) for r in records]}, indent=2))
        return
    table = Table(title=f"Runs in {st.url}", title_justify="left")
    for col in ("run", "created", "env", "model", "tasks × epochs", "status", "success"):
        table.add_column(col)
    for r in records:
        rate = f"{r.n_success}/{r.n_counted}" if r.n_counted else "—"
        table.add_row(r.manifest.run_id, r.created_at.strftime("%Y-%m-%d %H:%M"),
                      r.manifest.env.name, r.agent.model.name,
                      f"{len(r.manifest.task_ids)} × {r.manifest.epochs}", _state(r), rate)
    print_table(table, wide=wide)


def _state(r: RunRecord) -> str:
    """The status, with how much is stored when the run is not complete."""
    return r.status if r.complete else f"{r.status} {r.n_trajectories}/{r.n_expected}"


def _incomplete(r: RunRecord) -> str | None:
    """A line saying that (and why) the run lacks episodes; ``None`` when it has them all."""
    if r.complete:
        return None
    stored = f"{r.n_trajectories} of {r.n_expected} episodes stored"
    if r.status == "running":
        return f"[yellow]in flight:[/] {stored} so far; tasks without a mark are not done yet"
    return (f"[yellow]incomplete:[/] {stored} (the run is {r.status}); tasks marked (not run) "
            "have none — rerun the run's command with --resume to finish it")


def _pattern(trajs: list[Trajectory]) -> str:
    marks = []
    for t in sorted(trajs, key=lambda t: t.epoch):
        o = t.outcome
        marks.append("E" if o is None or not o.counts else ("✓" if o.success else "✗"))
    return "".join(marks)


def show(
    run: Annotated[str, typer.Argument(
        help="Run id, a unique prefix, or 'latest' (the newest run not in flight).")],
    json_out: JsonOpt = False,
    wide: WideOpt = False,
    store: StoreOpt = None,
) -> None:
    """Show a run: manifest, per-task results (one mark per epoch), summary."""
    st = open_store(store)
    rid = st.resolve_run(run)
    rec = st.get_run(rid)
    m = rec.manifest
    trajs = list(st.iter_trajectories(rid, with_steps=False))
    by_task: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajs:
        by_task[t.task.id].append(t)
    rows = [TaskRow.of(task_id, by_task.get(task_id, [])) for task_id in m.task_ids]
    wall = float((rec.summary or {}).get("wall_seconds", 0.0))
    summary = RunSummary.of(rid, trajs, wall)
    if json_out:
        print(json.dumps({"run": run_json(rec), "tasks": [r.model_dump(mode="json") for r in rows],
                          "summary": summary.model_dump(mode="json")}, indent=2))
        return
    console = Console()
    console.print(f"[bold]run {rid}[/] · {rec.status} · env {m.env.name} {m.env.args or ''} · "
                  f"model {rec.agent.model.name} {rec.agent.model.args or ''} · agent "
                  f"{m.agent_hash} · seed {m.seed} · isolation {m.isolation}", highlight=False)
    note = _incomplete(rec)
    if note:
        console.print(note, highlight=False)
    if run.strip().lower() in LATEST:  # `latest` skipped newer runs in flight: say so
        for r in st.list_runs(limit=3, status="running"):
            if r.created_at > rec.created_at:
                console.print(f"note: a newer run, {r.id}, is in flight ({r.n_trajectories} of "
                              f"{r.n_expected} episodes stored): `sharpen show {r.id}`",
                              highlight=False, markup=False)
    table = Table(title="Tasks (✓ pass, ✗ fail, E excluded error; one mark per epoch)",
                  title_justify="left")
    for col in ("task", "epochs", "reward", "invalid", "tokens", "note"):
        table.add_column(col)
    for row in rows:
        if row.reward is None:
            table.add_row(row.task_id, "(not run)", "", "", "", "")
        else:
            table.add_row(row.task_id, row.epochs, f"{row.reward:.2f}", str(row.invalid_actions),
                          f"{row.tokens:,}", row.note)
    print_table(table, wide=wide, console=console)
    print_table(summary.table(), wide=wide, console=console)


class TaskRow(BaseModel):
    """One task of a run as ``sharpen show`` lists it (a table row, or an item of ``--json``'s
    ``tasks``)."""

    task_id: str
    """The task's id."""
    epochs: str
    """One mark per stored epoch: ✓ pass, ✗ fail, E excluded error ("" when none is stored)."""
    reward: float | None
    """Mean reward over the stored epochs (``None`` when none is)."""
    invalid_actions: int
    """Replies without a valid action, over the stored epochs."""
    tokens: int
    """Tokens over the stored epochs."""
    note: str
    """The first line of the last epoch's error or evidence (at most 70 characters)."""

    @classmethod
    def of(cls, task_id: str, ts: list[Trajectory]) -> TaskRow:
        """The row of ``task_id`` from its stored trajectories ``ts`` (possibly none)."""
        if not ts:
            return cls(task_id=task_id, epochs="", reward=None, invalid_actions=0, tokens=0, note="")
        last = max(ts, key=lambda t: t.epoch)
        note = ""
        if last.outcome is not None:
            lines = (last.outcome.error or last.outcome.evidence or "").strip().splitlines()
            note = lines[0][:70] if lines else ""
        return cls(task_id=task_id, epochs=_pattern(ts),
                   reward=sum(t.outcome.reward for t in ts if t.outcome) / len(ts),
                   invalid_actions=sum(t.invalid_actions for t in ts),
                   tokens=sum(t.usage.total_tokens for t in ts), note=note)


def export(
    runs: Annotated[list[str], typer.Argument(help="Run ids, unique prefixes, or 'latest'.")],
    format: Annotated[str, typer.Option(
        "--format", "-f", help="jsonl (everything stored), sft (messages), completion (prompt and one reply: "
        "the loss on replies only), preference (prompt, chosen, rejected) or groups (completions "
        "of one prompt with rewards and advantages), tokens (token ids with loss and environment masks); "
        "or inspect (each run as an Inspect AI log that "
        "`inspect view` opens; -o a .eval/.json file or a folder; no filters); or otlp (each run "
        "as OpenTelemetry GenAI spans: to --endpoint over OTLP/HTTP, or -o an OTLP/JSON file).")]
        = "jsonl",
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="File to write (default: stdout).")] = None,
    success: Annotated[bool | None, typer.Option(
        "--success/--failure", help="Keep only successful (or only failed) trajectories.",
        show_default=False)] = None,
    split: Annotated[str | None, typer.Option(
        help="Keep only tasks of this split: train, val or test.")] = None,
    min_reward: Annotated[float | None, typer.Option(
        help="Keep only trajectories with at least this reward.")] = None,
    feedback: Annotated[list[str] | None, typer.Option(
        "--feedback", help="Keep only trajectories whose feedback satisfies \\[source:]name\\[op value], "
        "e.g. human:verdict=good or judge:helpfulness>=4; repeat to require several.")] = None,
    include_errors: Annotated[bool | None, typer.Option(
        "--include-errors/--exclude-errors", help="Keep attempts that ended in a non-agent error "
        "(default: jsonl keeps them, the training formats do not).", show_default=False)] = None,
    pairs_per_prompt: Annotated[int, typer.Option(
        min=1, help="preference: at most this many pairs from one prompt.")] = 1,
    pairs: Annotated[str, typer.Option(
        "--pairs", help="preference: what makes a pair — verifier (a better-scored and a worse "
        "episode of one prompt) or judge (a pairwise judge's verdicts, `sharpen judge A --judge "
        "pairwise --versus B`: export both runs; ties are left out).")] = "verifier",
    tokenizer: Annotated[str | None, typer.Option(
        help="tokens: a .gguf model file or a checkpoint folder whose tokenizer and chat "
        "template to use (default: the embedded model's).")] = None,
    endpoint: Annotated[str | None, typer.Option(
        help="otlp: the receiver's URL (Phoenix http://127.0.0.1:6006, Langfuse "
        "https://cloud.langfuse.com/api/public/otel; /v1/traces is appended).")] = None,
    project: Annotated[str, typer.Option(
        help="otlp: the project (Phoenix) and service.name the spans are filed under.")] = "sharpen",
    header: Annotated[list[str] | None, typer.Option(
        "--header", help="otlp: an HTTP header, NAME=VALUE (repeatable; e.g. Langfuse's "
        "Authorization=Basic ...); OTEL_EXPORTER_OTLP_HEADERS is read too.")] = None,
    phoenix_annotations: Annotated[bool, typer.Option(
        "--phoenix-annotations", help="otlp: also post outcomes and feedback to the Phoenix at "
        "--endpoint as span annotations (Phoenix shows them as scores).")] = False,
    store: StoreOpt = None,
) -> None:
    """Export trajectories as JSON lines: the full record, or fine-tuning data (SFT examples,
    preference pairs, RL groups) filtered by outcome and feedback.

    ``--format inspect`` writes each run whole as an Inspect AI log instead, ``--format otlp``
    as OpenTelemetry traces (docs/integrations.md)."""
    if format == "otlp":
        from sharpen.cli.otel_cmd import export_otlp

        export_otlp(runs, endpoint, output, project, header, store, filtered=bool(feedback) or any(
            v is not None for v in (success, split, min_reward, include_errors)),
            annotate=phoenix_annotations)
        return
    if format == "inspect":
        _export_inspect(runs, output, store, filtered=bool(feedback) or any(
            v is not None for v in (success, split, min_reward, include_errors)))
        return
    where = Where(success=success, split=parse_split(split), min_reward=min_reward,
                  feedback=[FeedbackCondition.parse(f) for f in feedback or []],
                  include_errors=include_errors)
    lines, count = export_lines(open_store(store), runs, format, where,
                                pairs_per_prompt=pairs_per_prompt, preference=pairs,
                                tokenizer=tokenizer)
    out = output.open("w") if output else sys.stdout
    try:
        for line in lines:
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
    finally:
        if output:
            out.close()
    hint = ""
    judged = format == "preference" and pairs == "judge"
    if judged and (count.ties or count.unpaired):
        hint = (f" — left out {count.ties} tied pair(s) and {count.unpaired} whose other "
                "trajectory was not kept (export both judged runs) or had another prompt")
    elif judged and not count.written:
        hint = " — no pairwise judge verdicts: run `sharpen judge A --judge pairwise --versus B`"
    elif format in ("preference", "groups") and count.kept and not count.written:
        hint = (" — a pair or group needs two kept trajectories with the same prompt: run one spec "
                "with --epochs 2 or more at a temperature above 0")
    err = Console(stderr=True, highlight=False)
    err.print(f"wrote {count.written} {count.unit} from {count.kept} of {count.read} trajectories "
              f"({count.where}){' to ' + str(output) if output else ''}{hint}")
    if count.kept_test and split != "test" and format != "jsonl":
        err.print(f"warning: {count.kept_test} of the {count.kept} kept trajectories are on test-split "
                  "tasks; training on them leaks the tasks held-out evaluations score — add --split train")
    if count.unaligned:
        n = count.unaligned
        err.print(f"note: the stored logprobs of {n} repl{'y' if n == 1 else 'ies'} "
                  "did not align with the tokenizer's tokens of them (another tokenization or tokenizer): "
                  "left null there")


def _export_inspect(runs: list[str], output: Path | None, store: str | None, *, filtered: bool) -> None:
    """``sharpen export --format inspect``: a log per run (sharpen.interop.inspect_export)."""
    from sharpen.core.errors import UserError

    if filtered:
        raise UserError("--format inspect writes whole runs: the filters do not apply",
                        "drop --success/--failure, --split, --min-reward, --feedback and "
                        "--include-errors, or use a JSON-lines format")
    try:
        from sharpen.interop.inspect_export import export_runs
    except ImportError as exc:
        raise UserError(f"writing Inspect logs needs inspect_ai ({exc})",
                        "pip install 'sharpen[inspect]'") from exc
    err = Console(stderr=True, highlight=False)
    for path in export_runs(open_store(store), runs, output):
        err.print(f"wrote {path} (open it with: inspect view --log-dir {path.parent})")
