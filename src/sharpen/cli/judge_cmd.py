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
    EnvArgOpt,
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
    from sharpen.judges.agreement import CriterionAgreement
    from sharpen.judges.runner import JudgeSummary
    from sharpen.judges.validity import ValidityReport
    from sharpen.stats.estimate import Estimate
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
    from sharpen.stats.judged import run_scores

    scores = run_scores(st, run_id)
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
        from sharpen.stats.judged import run_scores

        scores = run_scores(st, run_id)
        print(json.dumps({"summary": summary.model_dump(mode="json"),
                          "scores": [s.model_dump(mode="json") for s in scores]}, indent=2))
        return
    console.print(summary_table(summary))
    table = scores_table(st, run_id)
    if table is not None:
        console.print(table)



def _est(e: Estimate | None, percent: bool = False) -> str:
    """``value [low, high]`` of an estimate (``n/a`` when undefined)."""
    if e is None or e.value is None:
        return "n/a"
    if percent:
        ci = "" if e.low is None or e.high is None else f" [{100 * e.low:.1f}, {100 * e.high:.1f}]"
        return f"{100 * e.value:.1f}%{ci}"
    ci = "" if e.low is None or e.high is None else f" [{e.low:.2f}, {e.high:.2f}]"
    return f"{e.value:.2f}{ci}"


def validity_table(r: ValidityReport) -> Table:
    """The validity report as one table (docs/judges.md, Reading the validity report)."""
    v = r.verifier
    t = Table(title=f"judge validity on {r.env.name}: {r.judge} ({r.model}), criterion "
              f"{r.criterion!r}, {r.n} trajectories · 95% intervals", show_header=False,
              title_justify="left")
    thr = "" if r.threshold is None else f" (score ≥ {r.threshold:g} counts as a pass)"
    t.add_row("verifier pass rate", "n/a" if v.base_rate is None else f"{100 * v.base_rate:.1f}%")
    t.add_row("judge pass rate", ("n/a" if v.judge_rate is None else f"{100 * v.judge_rate:.1f}%")
              + thr)
    t.add_row("accuracy vs verifier", _est(v.accuracy, percent=True))
    t.add_row("Cohen's κ vs verifier", _est(v.kappa))
    t.add_row("AUROC vs verifier", _est(v.auroc) if v.auroc else "n/a (yes/no labels)")
    for s in r.sources:
        judge_rate = "n/a" if s.judge_rate is None else f"{100 * s.judge_rate:.1f}%"
        who = "real agent" if s.source == "agent" else f"{s.source} agent"
        t.add_row(who, f"{s.n} trajectories · verifier passes {100 * s.verifier_rate:.1f}% · "
                  f"judge passes {judge_rate}")
    if r.length_bias is not None:
        lb = r.length_bias
        t.add_row("length bias", f"Spearman ρ(score, length) within verdicts {_est(lb.within)}"
                  f" · passed {_est(lb.passed)} · failed {_est(lb.failed)}")
    if r.flip is not None:
        f = r.flip
        first = "n/a" if f.first_shown is None else f"{100 * f.first_shown:.1f}%"
        t.add_row("position bias (pairwise)", f"{f.flips} of {f.n} pairs flip with the order: "
                  f"{_est(f.rate, percent=True)} · first-shown wins {first} of decisive verdicts")
    if r.consistency is not None:
        c = r.consistency
        t.add_row("self-consistency", f"{c.n} transcripts × {c.repeats} samples at temperature "
                  f"0.7: α {_est(c.alpha)} · pairwise agreement "
                  f"{_est(c.pairwise_agreement, percent=True)}")
    t.add_row("judge errors", f"{r.judge_errors} judgements gave no verdict (left out)")
    t.add_row("judge tokens", f"{r.tokens:,} this call (stored judgements are reused)")
    return t


def validate_judge(
    env: Annotated[str, typer.Argument(help="An environment with a verifier (`sharpen envs`).")],
    judge: JudgeOpt,
    judge_arg: JudgeArgOpt = None,
    criterion: Annotated[str | None, typer.Option(
        help="The judge's criterion to hold against the verifier (default: its first yes/no "
             "criterion).")] = None,
    tasks: Annotated[int, typer.Option(min=2, help="Tasks per agent (reference, null and the "
                                       "real agent each play them).")] = 34,
    agent_run: Annotated[list[str] | None, typer.Option(
        help="A stored run to use as the real agent's (repeatable); default: run the default "
             "agent spec (the embedded model) on the same tasks.")] = None,
    env_arg: EnvArgOpt = None,
    split: Annotated[str | None, typer.Option(help="Task split (default: all).")] = None,
    seed: Annotated[int, typer.Option(help="Task seed.")] = 0,
    pairs: Annotated[int, typer.Option(min=0, help="(agent, reference) pairs the pairwise "
                                       "judge sees in both orders (0: skip).")] = 20,
    samples: Annotated[int, typer.Option(min=0, help="Samples per transcript for "
                                         "self-consistency (0: skip).")] = 3,
    consistency_items: Annotated[int, typer.Option(min=1, help="Transcripts sampled.")] = 20,
    concurrency: Annotated[int, typer.Option(min=1, help="Work in flight at once.")] = 1,
    judge_new: Annotated[bool, typer.Option(
        "--judge-new/--no-judge", help="--no-judge: measure the judgements already stored, "
        "judging nothing new.")] = True,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    model_name: ModelNameOpt = None,
    model_arg: ModelArgOpt = None,
    json_out: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """Measure a judge against a verifier: accuracy, Cohen's κ and AUROC with 95% intervals on
    reference, null and real-agent trajectories; length bias, position bias, self-consistency."""
    from sharpen.judges.validity import ValidityPlan, gather, measure

    console = Console(stderr=json_out)
    setup = judge_setup(judge, judge_arg, model, base_url, model_name, model_arg)
    plan = ValidityPlan(env=PluginRef(name=env, args=parse_kv(env_arg, "--env-arg")),
                        judge=setup, tasks=tasks, split=split, seed=seed,
                        agent_runs=agent_run or [], criterion=criterion, pairs=pairs,
                        samples=samples, consistency_items=consistency_items,
                        concurrency=concurrency, judge_new=judge_new)
    st = open_store(store)
    try:
        gathered = run_sync(gather(st, plan, progress=not json_out))
    except KeyboardInterrupt as exc:
        console.print("[yellow]Interrupted.[/] Runs and judgements so far are saved; rerun the "
                      "same command to go on from there.")
        raise typer.Exit(exc.exit_code if isinstance(exc, Terminated) else 130) from None
    report = measure(gathered)
    if json_out:
        print(report.model_dump_json(indent=2))
        return
    console.print(validity_table(report))


def agreement_table(a: CriterionAgreement) -> Table:
    """One judge against people on one criterion: the statistics and the confusion matrix."""
    s = a.stats
    t = Table(title=f"{a.criterion}: {a.judge} vs people · {s.n} trajectories on "
              f"{s.n_clusters} tasks ({a.scale}) · 95% intervals", title_justify="left")
    t.add_column("judge \\ human")
    for label in s.labels:
        t.add_column(str(label), justify="right")
    for label, counts in zip(s.labels, s.confusion, strict=True):
        t.add_row(str(label), *(str(c) for c in counts))
    kappa = "Cohen's κ" + (f" ({s.kappa_weights})" if s.kappa_weights else "")
    t.caption = (f"raw agreement {_est(s.raw_agreement, percent=True)} · {kappa} "
                 f"{_est(s.kappa)} · Krippendorff's α {_est(s.alpha)}"
                 + (f" · Spearman ρ {_est(s.spearman)}" if s.spearman else ""))
    return t


def agreement(
    runs: Annotated[list[str], typer.Argument(help="Run ids (or unique prefixes) whose "
                                             "trajectories carry judge and human records.")],
    criterion: Annotated[str | None, typer.Option(help="Only this criterion.")] = None,
    json_out: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """Judge–human agreement per criterion: Cohen's κ, Krippendorff's α and Spearman's ρ with
    bootstrap intervals and the confusion matrix, from annotations with the judge's names."""
    from sharpen.judges.agreement import human_agreement

    st = open_store(store)
    trajectories = [t for r in runs for t in st.iter_trajectories(st.resolve_run(r),
                                                                   with_steps=False)]
    found = human_agreement(trajectories, criterion)
    if json_out:
        print(json.dumps([a.model_dump(mode="json") for a in found], indent=2))
        return
    console = Console()
    if not found:
        console.print("No trajectory has both a judge score and a human annotation of the same "
                      "name. Annotate in `sharpen view` with the criterion's name (docs/judges.md).")
        raise typer.Exit(1)
    for a in found:
        console.print(agreement_table(a))
