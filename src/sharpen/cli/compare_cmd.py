"""``sharpen compare A B [C ...]``: paired comparison of runs on the same tasks, with a
verdict in words; ``--fail-if-worse`` turns it into a regression gate for CI.

Exit status: 0, or 1 with ``--fail-if-worse`` when a run is significantly worse than the
baseline (Holm-adjusted when several are compared); user errors exit 2 as everywhere.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from sharpen.cli.options import StoreOpt, open_store
from sharpen.cli.report_cmd import JsonOpt, PlotOpt, pct
from sharpen.cli.tables import fit
from sharpen.core.errors import UserError
from sharpen.stats.bootstrap import DEFAULT_REPS
from sharpen.stats.compare import ComparisonReport
from sharpen.stats.rounding import interval_text, p_cell


def render(rep: ComparisonReport, console: Console) -> None:
    """Print ``rep`` as tables and verdicts."""
    runs = Table(title="Runs (A is the baseline)", title_justify="left")
    for col in ("", "run", "agent (model)", "tasks × epochs", "success [95% CI]", "excluded",
                "tokens/task", "$/task", "s/task"):
        runs.add_column(col, no_wrap=col in ("run", "success [95% CI]"))
    for b in rep.runs:
        s, cost = b.success, b.cost
        ci = f" {interval_text(s.ci.low, s.ci.high)}" if s.ci else ""
        runs.add_row(b.label, b.run.run_id, f"{b.run.agent_name} ({b.run.model})",
                     f"{b.run.tasks_planned} × {b.run.epochs_planned}", pct(s.value) + ci,
                     pct(b.errors.excluded_share),
                     "n/a" if cost.tokens_per_task is None else f"{cost.tokens_per_task:,.0f}",
                     "unknown" if cost.cost_per_task is None else f"{cost.cost_per_task:.4f}",
                     "n/a" if cost.seconds_per_task is None else f"{cost.seconds_per_task:.1f}")
    console.print(fit(runs, console))
    comps = Table(title="Paired comparisons on common tasks (difference = other − A, in points)",
                  title_justify="left")
    cols = ["", "tasks", "A", "other", "difference [95% CI]", "p", *(["p (Holm)"] if rep.holm else []),
            "method"]
    for col in cols:
        comps.add_column(col, no_wrap=col == "difference [95% CI]")
    for c in rep.comparisons:
        diff = "—" if c.difference is None or c.ci is None else (
            f"{100 * c.difference:+.1f} {interval_text(c.ci.low, c.ci.high, signed=True)}")
        disc = f" (discordant {c.discordant[0]}/{c.discordant[1]})" if c.discordant else ""
        mark = "≤ " if c.p_upper_bound else ""  # a bootstrap p below 1/replicates is a bound
        comps.add_row(f"{c.label_b} vs A", str(c.matched_tasks), pct(c.rate_a), pct(c.rate_b), diff,
                      mark + p_cell(c.p_value), *([mark + p_cell(c.p_adjusted)] if rep.holm else []),
                      c.method + disc)
    console.print(fit(comps, console))
    if rep.judge_scores:
        console.print(fit(judge_table(rep), console))
    if rep.irt is not None:
        note = "; the optimiser did not converge" if not rep.irt.converged else ""
        console.print(f"[bold]IRT ability[/] (other − A; {rep.irt.model.upper()} fit over the "
                      f"compared runs on {rep.irt.tasks} tasks, 95% CI by the delta method{note})",
                      highlight=False)
        for d in rep.irt.differences:
            console.print(f"  {d.label_b} vs A: {d.difference:+.2f} [{d.low:+.2f}, {d.high:+.2f}] "
                          f"({d.label_b} {d.theta_b:+.2f}, A {d.theta_a:+.2f})", highlight=False)
    for c in rep.comparisons:
        colour = {"better": "green", "worse": "bold red", "none": "default"}[c.direction]
        console.print(f"[bold]{c.label_b} vs A:[/] [{colour}]{c.verdict}[/]", highlight=False)
    for w in rep.warnings:
        console.print(f"[yellow]warning:[/] {w}", highlight=False)


def _score(x: float | None, boolean: bool) -> str:
    if x is None:
        return "—"
    return pct(x) if boolean else f"{x:.2f}"


def judge_table(rep: ComparisonReport) -> Table:
    """Judge scores paired on common tasks: yes/no criteria in points, graded ones in the
    judge's units (:mod:`sharpen.stats.judge_compare`)."""
    t = Table(title="Judge scores on common tasks (difference = other − A: points for yes/no, "
              "score units for graded; p unadjusted)", title_justify="left")
    for col in ("", "judge", "criterion", "tasks", "A", "other", "difference [95% CI]", "p",
                "method"):
        t.add_column(col, no_wrap=col == "difference [95% CI]")
    for c in rep.judge_scores:
        scale = 100.0 if c.boolean else 1.0
        diff = "—" if c.difference is None else (
            f"{scale * c.difference:+.{1 if c.boolean else 2}f}" + (
                "" if c.ci is None else " " + interval_text(
                    c.ci.low, c.ci.high, scale=scale, digits=1 if c.boolean else 2,
                    signed=True)))
        note = f" (discordant {c.discordant[0]}/{c.discordant[1]})" if c.discordant else (
            f" ({c.zero_differences} unchanged)" if c.method == "wilcoxon-pratt" else "")
        p = ("≤ " if c.p_upper_bound else "") + p_cell(c.p_value)
        t.add_row(f"{c.label_b} vs A", c.author, c.name, str(c.matched_tasks),
                  _score(c.mean_a, c.boolean), _score(c.mean_b, c.boolean), diff,
                  p if c.method != "none" else "—", c.method + note)
    return t


def compare(
    runs: Annotated[list[str], typer.Argument(
        help="Baseline run, then one or more runs to compare with it (ids, prefixes or 'latest').")],
    fail_if_worse: Annotated[bool, typer.Option(
        "--fail-if-worse", help="Exit 1 when a run is significantly worse than the baseline.")] = False,
    alpha: Annotated[float, typer.Option(min=0.0001, max=0.5, help="Significance level.")] = 0.05,
    json_out: JsonOpt = False,
    plot: PlotOpt = None,
    seed: Annotated[int, typer.Option(
        help="Seed of the paired bootstrap's numpy Generator (same seed, same result).")] = 0,
    bootstrap: Annotated[int, typer.Option(
        "--bootstrap", min=200, help="Bootstrap replicates (multi-epoch comparisons).")] = DEFAULT_REPS,
    store: StoreOpt = None,
) -> None:
    """Compare runs on their common tasks: per-task paired differences, McNemar or a paired
    bootstrap, Holm-adjusted verdicts, cost next to accuracy."""
    from sharpen.stats.compare import compare_stored

    if len(runs) < 2:
        raise UserError("compare needs at least two runs", "sharpen compare BASE NEW [MORE ...]")
    st = open_store(store)
    rep = compare_stored([(st, st.resolve_run(r)) for r in runs], seed=seed, alpha=alpha,
                         n_boot=bootstrap)
    if json_out:
        print(rep.model_dump_json(indent=2))
    else:
        render(rep, Console())
    if plot is not None:
        from sharpen.stats.plot import plot_frontier

        paths = plot_frontier(rep.frontier, plot)
        Console(stderr=True).print(f"wrote {', '.join(str(p) for p in paths)}", highlight=False)
    if fail_if_worse and rep.any_worse:
        worse = ", ".join(c.label_b for c in rep.comparisons if c.direction == "worse")
        Console(stderr=True).print(f"[bold red]regression:[/] {worse} significantly worse than A",
                                   highlight=False)
        raise typer.Exit(1)
