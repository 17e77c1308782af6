"""``sharpen judge RUN --judge J``: score a stored run with a judge (docs/judges.md)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from sharpen.cli.options import (
    BaseUrlOpt,
    JsonOpt,
    ModelArgOpt,
    ModelNameOpt,
    ModelOpt,
    StoreOpt,
    model_ref,
    open_store,
    parse_kv,
)
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.registry import PluginRef
from sharpen.runner.signals import Terminated, run_sync

if TYPE_CHECKING:
    from sharpen.core.judgement import Judgement
    from sharpen.judges.runner import JudgeSummary
    from sharpen.store import Store

JudgeOpt = Annotated[str, typer.Option(
    "--judge", "-j", help="A judge: rubric.yaml (a rubric file), or a registered judge name "
    "(rubric, reference, checklist, pairwise, or a plug-in's; `sharpen plugins judge`).")]
JudgeArgOpt = Annotated[list[str] | None, typer.Option(
    "--judge-arg", help="Judge args, KEY=VALUE (repeatable), e.g. token_budget=800.")]


def judge_setup(judge: str, judge_arg: list[str] | None, model: str | None,
                base_url: str | None, model_name: str | None, model_arg: list[str] | None):
    """The :class:`~sharpen.judges.runner.JudgeSetup` the judge and model flags name (the
    embedded model unless a model flag says otherwise)."""
    from sharpen.judges.runner import JudgeSetup, resolve_judge

    ref = resolve_judge(judge)
    if judge_arg:
        ref = PluginRef(name=ref.name, args={**ref.args, **parse_kv(judge_arg, "--judge-arg")})
    mref = model_ref(AgentSpec(name="judge"), model, base_url, model_name,
                     parse_kv(model_arg, "--model-arg"))
    setup = JudgeSetup(judge=ref, model=mref)
    setup.hash()  # builds the judge once: bad args fail here, before any work
    return setup


def summary_table(s: JudgeSummary) -> Table:
    """What one judging call did, as a table."""
    t = Table(title=f"judged run {s.run_id[:12]} with {s.judge} ({s.model})", show_header=False)
    t.add_row("judged", f"{s.judged} " + ("pairs" if s.versus else "trajectories")
              + (f" (+{s.already} judged before)" if s.already else ""))
    t.add_row("judge errors", f"{s.errors} (error kind judge: not counted against the agent)"
              if s.errors else "0")
    if s.skipped:
        t.add_row("not judged", f"{s.skipped} (episode errored, or no pair in the other run)")
    cost = "unknown" if s.usage.cost_usd is None else f"${s.usage.cost_usd:.4f}"
    t.add_row("judge model", f"{s.usage.calls} calls · {s.usage.input_tokens:,} in / "
              f"{s.usage.output_tokens:,} out tokens · {cost} · {s.seconds:.1f} s")
    for e in s.first_errors:
        t.add_row("[yellow]error[/]", e)
    return t


def scores_table(st: Store, run_id: str) -> Table | None:
    """The run's judge scores per criterion with intervals (``None`` when it has none)."""
    from sharpen.cli.report_cmd import judge_table
    from sharpen.stats.judged import judge_scores

    scores = judge_scores(st.iter_trajectories(run_id, with_steps=False))
    return judge_table(scores, {}) if scores else None


def judge(
    run: Annotated[str, typer.Argument(help="Run id (or a unique prefix) to judge.")],
    judge: JudgeOpt,
    judge_arg: JudgeArgOpt = None,
    versus: Annotated[str | None, typer.Option(
        help="Pairwise judges: the other run; trajectories are paired on task and epoch.")] = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    model_name: ModelNameOpt = None,
    model_arg: ModelArgOpt = None,
    resume: Annotated[bool, typer.Option(
        help="Judge only what this judge has not judged yet (failed judgements again).")] = False,
    limit: Annotated[int | None, typer.Option(min=1, help="Judge at most this many.")] = None,
    concurrency: Annotated[int, typer.Option(
        min=1, help="Judgements in flight at once (a server batches them).")] = 1,
    progress: Annotated[bool, typer.Option(help="Show a progress bar with ETA.")] = True,
    json_out: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """Score a stored run with a judge: one feedback record per criterion per trajectory
    (pairwise: per pair), resumable; judge failures are counted, never the agent's."""
    from sharpen.judges.runner import judge_run

    console = Console(stderr=json_out)
    setup = judge_setup(judge, judge_arg, model, base_url, model_name, model_arg)
    st = open_store(store)
    run_id = st.resolve_run(run)
    other = st.resolve_run(versus) if versus else None
    bar = Progress(TextColumn("[bold]judging[/]"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[errors]} errors · {task.fields[cost]}"),
                   TimeRemainingColumn(), console=console, disable=not progress or json_out,
                   transient=True)
    task = bar.add_task("judge", total=None, errors=0, cost="$0")
    tally: dict[str, float | None] = {"errors": 0, "cost": 0.0}

    def done(j: Judgement, n: int, total: int) -> None:
        tally["errors"] = (tally["errors"] or 0) + (j.status == "error")
        c = tally["cost"]
        tally["cost"] = None if c is None or j.usage.cost_usd is None else c + j.usage.cost_usd
        cost = "cost unknown" if tally["cost"] is None else f"${tally['cost']:.4f}"
        bar.update(task, total=total, completed=n, errors=int(tally["errors"] or 0), cost=cost)

    try:
        with bar:
            summary = run_sync(judge_run(st, run_id, setup, versus=other, resume=resume,
                                         limit=limit, concurrency=concurrency, on_done=done))
    except KeyboardInterrupt as exc:
        console.print("[yellow]Interrupted.[/] Finished judgements are saved; rerun with "
                      "--resume to judge the rest.")
        raise typer.Exit(exc.exit_code if isinstance(exc, Terminated) else 130) from None
    if json_out:
        from sharpen.stats.judged import judge_scores

        scores = judge_scores(st.iter_trajectories(run_id, with_steps=False))
        print(json.dumps({"summary": summary.model_dump(mode="json"),
                          "scores": [s.model_dump(mode="json") for s in scores]}, indent=2))
        return
    console.print(summary_table(summary))
    table = scores_table(st, run_id)
    if table is not None:
        console.print(table)

