"""``sharpen report RUN``: accuracy with intervals, errors, cost, reliability, power and
validity of one run — as tables, or the same content as JSON (``--json``).

Definitions of every number: docs/evaluation.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from sharpen.cli.options import StoreOpt, open_store
from sharpen.cli.tables import fit
from sharpen.core.errors import UserError
from sharpen.stats.accuracy import Metric
from sharpen.stats.cost import CostSummary
from sharpen.stats.irt_runs import IRTSection
from sharpen.stats.judged import CriterionScore
from sharpen.stats.power import PowerPlan
from sharpen.stats.report import RunReport
from sharpen.stats.rounding import interval_text
from sharpen.stats.routing import RoutingSection

if TYPE_CHECKING:
    from sharpen.store import Store

PlotOpt = Annotated[Path | None, typer.Option(
    "--plot", help="Write the cost–accuracy frontier here: a folder (cost_accuracy.png and .svg) "
    "or a .png/.svg file (and its sibling in the other format). Needs matplotlib.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the report as JSON instead of tables.")]


def pct(x: float | None, digits: int = 1) -> str:
    """``0.123`` → ``12.3%``; ``None`` → ``n/a``."""
    return "n/a" if x is None else f"{100 * x:.{digits}f}%"


def metric_row(m: Metric) -> list[str]:
    """Cells of one accuracy row: name, value, interval, method, tasks."""
    ci = "—" if m.ci is None else interval_text(m.ci.low, m.ci.high)
    tasks = str(m.n_tasks) + (f" ({m.n_undefined} with < {m.k} trials left out)" if m.n_undefined else "")
    return [m.name, pct(m.value), ci, m.ci.method if m.ci else "—", tasks]


def cost_rows(c: CostSummary) -> list[tuple[str, str]]:
    """(label, text) rows of a cost summary."""
    def num(x: float | None, fmt: str) -> str:
        return "n/a" if x is None else format(x, fmt)

    if c.cost_usd is None:
        dollars = f"unknown ({c.cost_unknown_attempts} of {c.attempts} attempts have no price)"
    else:
        dollars = (f"${c.cost_usd:.4f} total · ${num(c.cost_per_task, '.5f')} per task · "
                   f"${num(c.cost_per_success, '.5f')} per success")
    return [
        ("tokens", f"{num(c.tokens_per_task, ',.0f')} per task · {num(c.tokens_per_success, ',.0f')} "
                   f"per success · {c.input_tokens:,} in / {c.output_tokens:,} out"),
        ("dollars", dollars),
        ("time", f"{num(c.seconds_per_task, '.2f')} s per task · {num(c.seconds_per_success, '.2f')} s "
                 f"per success (episode wall time, {c.episode_seconds:.1f} s in all)"),
    ]


def judge_rows(scores: list[CriterionScore]) -> list[list[str]]:
    """Cells of the judge-scores table: judge, criterion, mean, interval, scored, values."""
    rows = []
    for c in scores:
        if c.mean is None:
            mean, ci = "—", "—"
        elif c.boolean or c.pairwise:
            mean = pct(c.mean)
            ci = "—" if c.ci is None else interval_text(c.ci.low, c.ci.high)
        else:
            mean = f"{c.mean:.2f}"
            ci = "—" if c.ci is None else f"[{c.ci.low:.2f}, {c.ci.high:.2f}]"
        values = " · ".join(f"{k}: {v}" for k, v in sorted(c.counts.items())[:6])
        name = c.name + (" (vs other run)" if c.pairwise else "")
        rows.append([c.author, name, mean, ci, f"{c.n} on {c.n_tasks} tasks", values])
    return rows


def judge_table(scores: list[CriterionScore], errors: dict[str, int]) -> Table:
    """Judge scores per criterion with intervals, and the judgements that failed."""
    failed = sum(errors.values())
    title = "Judge scores: mean over tasks, 95% CI" + (
        f" · {failed} judgement(s) failed (error kind judge, left out): "
        + ", ".join(f"{k} {v}" for k, v in errors.items()) if failed else "")
    t = Table(title=title, title_justify="left")
    for col in ("judge", "criterion", "mean", "95% CI", "scored", "values"):
        t.add_column(col)
    for r in judge_rows(scores):
        t.add_row(*r)
    return t


def irt_tables(irt: IRTSection) -> list[Table]:
    """The abilities of the fitted agent specs (this run marked) and the hardest and most
    discriminating tasks, each with its 95% Laplace interval."""
    conv = "" if irt.converged else " · the optimiser did not converge"
    ab = Table(title=f"Ability (IRT): {(irt.model or '').upper()} over {len(irt.agents)} agent specs "
               f"on {irt.tasks} tasks, 95% CI{conv}", title_justify="left")
    for col in ("rank", "agent spec", "run", "ability [95% CI]", "success", "tasks"):
        ab.add_column(col, no_wrap=col == "ability [95% CI]")
    names = [a.agent_name for a in irt.agents]
    for a in irt.agents:
        # the spec's hash only where two fitted specs share a name
        name = a.agent_name + (f" ({a.agent_hash[:8]})" if names.count(a.agent_name) > 1 else "")
        ab.add_row(str(a.rank), name, a.run_id[:12] + (" (this run)" if a.this_run else ""),
                   f"{a.theta:+.2f} [{a.low:+.2f}, {a.high:+.2f}]", pct(a.success), str(a.tasks),
                   style="bold" if a.this_run else None)
    tables = [ab]
    two = irt.model == "2pl"
    same = irt.hardest == irt.most_discriminating  # then one table says both
    for title, rows in (("Hardest" + (" and most discriminating" if same else "") + " tasks",
                         irt.hardest),
                        ("Most discriminating tasks", [] if same else irt.most_discriminating)):
        if not rows:
            continue
        t = Table(title=f"{title} (IRT)", title_justify="left")
        for col in ("task", "difficulty [95% CI]", *(["discrimination"] if two else []), "solved"):
            t.add_column(col, no_wrap=col == "difficulty [95% CI]")
        for d in rows:
            t.add_row(d.task_id, f"{d.difficulty:+.2f} [{d.low:+.2f}, {d.high:+.2f}]",
                      *([f"{d.discrimination:.2f}"] if two else []), f"{d.solved} of {d.attempts}")
        tables.append(t)
    return tables


def routing_tables(routing: RoutingSection) -> list[Table]:
    """Calls per route of a router run, and its cost–success point next to each fixed
    route's run on the same environment (Pareto-optimal points marked)."""
    fell = f" · {routing.fallbacks} call(s) fell back to a later route (infra)" if routing.fallbacks else ""
    use = Table(title=f"Routing: calls per route{fell}", title_justify="left")
    for col in ("route", "calls", "tokens in / out", "dollars"):
        use.add_column(col)
    for r in routing.routes:
        use.add_row(r.route, str(r.calls), f"{r.input_tokens:,} / {r.output_tokens:,}",
                    "unknown" if r.cost_usd is None else f"${r.cost_usd:.4f}")
    tables = [use]
    front = routing.frontier
    if front is not None:
        axis = "dollars per task" if front.axis == "cost_usd" else "tokens per task"
        note = f" · {routing.note}" if routing.note else ""
        t = Table(title=f"Cost–success frontier: the router and each fixed route{note}",
                  title_justify="left")
        for col in ("model", "run", "success", "95% CI (points)", axis, "on frontier"):
            t.add_column(col)
        for p in front.points:
            cost = (f"{p.tokens_per_task:,.0f}" if front.axis == "tokens"
                    else f"${p.cost_per_task or 0:.5f}")
            t.add_row(p.label, p.run_id[:12], pct(p.accuracy), interval_text(p.ci_low, p.ci_high),
                      cost, "yes" if p.on_frontier else "no",
                      style="bold" if p.label == "router" else None)
        tables.append(t)
    return tables


def _epochs(n: int) -> str:
    return f"{n} epoch" if n == 1 else f"{n} epochs"


def power_lines(p: PowerPlan, available: int | None = None) -> list[str]:
    """What a power plan says, one line each (rich markup)."""
    m = p.model
    effect = f"{100 * p.effect:g} points"
    src = (f"{m.source}: {m.pilot_tasks} tasks × ≤{m.pilot_epochs} epochs, p = {m.p:.2f}, "
           f"ICC = {m.icc:.2f}" if m.pilot_tasks else f"{m.source}: p = {m.p:.2f}, ICC = {m.icc:.2f}")
    if len({r.tasks for r in p.rows}) == 1:
        rows = f"{p.rows[0].tasks:,} tasks, however many epochs"
    else:
        rows = " · ".join(f"{_epochs(r.epochs)}: {r.tasks:,} tasks" for r in p.rows)
    lines = [f"to detect {effect} vs another agent ({100 * p.power:.0f}% power, α = {p.alpha:g}): {rows}",
             f"model: {src}" + (f" ({m.note})" if m.note else "")]
    if p.tasks is not None and p.mde is not None:
        design = f"{p.tasks} tasks × {_epochs(p.epochs or 1)}"
        mde = f"smallest detectable effect {100 * p.mde:.0f} points"
        if p.enough:
            lines.insert(0, f"[green]{design}: {mde} — enough for {effect}[/]")
        else:
            need = next(r for r in p.rows if r.epochs == p.epochs)
            msg = (f"[yellow]{design}: {mde} — too few for {effect}; need {need.tasks:,} tasks × "
                   f"{_epochs(need.epochs)}")
            if available is not None and need.tasks > available:
                msg += (f" (the environment lists {available}: add epochs if the plan credits them, "
                        "or aim for a larger effect)")
            lines.insert(0, msg + "[/]")
    return lines


def render(report: RunReport, console: Console) -> None:
    """Print ``report`` as tables."""
    r = report.run
    env_args = f" {r.env.args}" if r.env.args else ""
    decoding = f" · decoding {r.decoding}" if r.decoding else ""
    console.print(f"[bold]sharpen report[/] run {r.run_id} · {r.status} · env {r.env.name}{env_args} · "
                  f"model {r.model} · agent {r.agent} ({r.agent_name}, {r.agent_hash[:8]}){decoding} · "
                  f"{r.tasks_planned} tasks × {_epochs(r.epochs_planned)}", highlight=False)
    if report.alarms:
        console.print(Panel("\n".join(report.alarms), title="[bold red]NOT TRUSTWORTHY",
                            border_style="red"))
    acc = report.accuracy
    scope = f"mean over {acc.n_tasks} tasks"
    if acc.cluster_key:
        scope += f" in {acc.n_clusters} clusters (metadata[{acc.cluster_key!r}])"
    table = Table(title=f"Accuracy: {scope}", title_justify="left")
    for col in ("metric", "value", "95% CI (points)", "method", "tasks"):
        table.add_column(col)
    table.add_row(*metric_row(acc.success))
    for m in acc.pass_at_k[1:] + acc.pass_hat_k[1:]:
        table.add_row(*metric_row(m))
    console.print(fit(table, console))
    e = report.errors
    kinds = ", ".join(f"{k}: {v}" for k, v in e.excluded.items()) or "none"
    console.print(f"[bold]excluded (errors)[/] {e.attempts - e.counted} of {e.attempts} attempts "
                  f"({pct(e.excluded_share)}): {kinds}", highlight=False)
    if report.judges or report.judge_errors:
        console.print(fit(judge_table(report.judges, report.judge_errors), console))
    _section(console, "Cost", cost_rows(report.cost)
             + ([("run wall time", f"{r.wall_seconds:.1f} s")] if r.wall_seconds is not None else []))
    if report.routing is not None:
        for t in routing_tables(report.routing):
            console.print(fit(t, console))
    rel = report.reliability
    c = rel.consistency
    cons = ("not available (one valid trial per task)" if not c.available else
            f"{pct(c.all_agree)} of {c.tasks} tasks agree across all epochs · mean per-task variance "
            f"{c.mean_task_variance:.3f} · ICC " + ("n/a" if c.icc is None else f"{c.icc:.2f}"))
    rob = ("not declared by this environment" if not rel.robustness.declared else "; ".join(
        f"{p.name}: {pct(p.rate)} vs {pct(p.base_rate)} unperturbed"
        + (f" (drop {100 * p.drop:.1f} points{', paired' if p.paired else ''})" if p.drop is not None else "")
        for p in rel.robustness.perturbations))
    cal = rel.calibration
    calib = ("not available (no outcome states a confidence)" if not cal.available else
             f"ECE {cal.ece:.3f} · Brier {cal.brier:.3f} · mean confidence {pct(cal.mean_confidence)} "
             f"vs success {pct(cal.accuracy)} ({cal.n} trials)")
    s = rel.safety
    safety = f"{s.flagged} of {s.attempts} attempts flagged ({pct(s.rate)}), {s.records} safety records"
    _section(console, "Reliability", [("consistency", cons), ("robustness", rob),
                                      ("calibration", calib), ("safety", safety)])
    console.print("[bold]Power[/]")
    for line in power_lines(report.power):
        console.print(f"  {line}", highlight=False)
    if report.irt is not None and report.irt.available:
        for t in irt_tables(report.irt):
            console.print(fit(t, console))
    elif report.irt is not None:
        console.print(f"[bold]Ability (IRT)[/] {report.irt.note}", highlight=False)
    console.print("[bold]Validity[/]")
    marks = {"ok": "[green]✓[/]", "failed": "[bold red]✗[/]", "missing": "[yellow]?[/]"}
    for v in report.validity:
        console.print(f"  {marks[v.status]} {v.message}", highlight=False)
    shown = {v.message for v in report.validity}
    for w in (w for w in report.warnings if w not in shown):
        console.print(f"[yellow]warning:[/] {w}", highlight=False)


def _section(console: Console, title: str, rows: list[tuple[str, str]]) -> None:
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    for k, v in rows:
        table.add_row(k, v)
    console.print(fit(table, console))


def report(
    run: Annotated[str, typer.Argument(help="Run id, a unique prefix, or 'latest'.")],
    json_out: JsonOpt = False,
    plot: PlotOpt = None,
    target_effect: Annotated[float, typer.Option(
        "--target-effect", min=0.001, max=1.0, help="Effect (rate) the power section plans for.")] = 0.10,
    store: StoreOpt = None,
) -> None:
    """Report a run: mean success, pass@k and pass^k with intervals over tasks, excluded
    errors, cost per task and per success, reliability, power and validity checks."""
    from sharpen.stats.report import build_report

    st = open_store(store)
    rid = st.resolve_run(run)
    rep = build_report(st, rid, effect=target_effect)
    console = Console()
    if json_out:
        print(rep.model_dump_json(indent=2))
    else:
        render(rep, console)
    if plot is not None:
        paths = plot_env_frontier(st, rid, plot)
        Console(stderr=True).print(f"wrote {', '.join(str(p) for p in paths)}", highlight=False)


def plot_env_frontier(st: Store, run_id: str, out_dir: Path, limit: int = 12) -> list[Path]:
    """Plot this run and the newest other runs on the same environment (name and args)."""
    from sharpen.stats.compare import brief, brief_frontier
    from sharpen.stats.plot import plot_frontier
    from sharpen.stats.report import load_table

    rec = st.get_run(run_id)
    others = [r for r in st.list_runs(200, env=rec.manifest.env.name)
              if r.manifest.env == rec.manifest.env and r.id != run_id and r.n_counted][: limit - 1]
    briefs = [brief(r.id[:8] + (" (this run)" if r.id == run_id else ""), r, load_table(st, r.id))
              for r in [rec, *others]]
    if briefs[0].success.value is None:
        raise UserError(f"run {run_id} has no scored task to plot", "run it first, or pick another run")
    return plot_frontier(brief_frontier(briefs), out_dir, title=f"Cost–accuracy on {rec.manifest.env.name}")
