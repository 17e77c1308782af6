"""What ``sharpen improve`` and ``sharpen demo`` print, and the anytime-curve plot."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from sharpen.cli.tables import fit
from sharpen.improvement.experiment import ExperimentResult, ProposerResult
from sharpen.stats.judge_compare import JudgeComparison
from sharpen.stats.mcnemar import mcnemar
from sharpen.stats.plot import plot_paths, pyplot, save
from sharpen.stats.rounding import interval_text, p_cell, p_text

CURVE_STEM = "anytime"
"""File name (without extension) of the anytime-curve plots."""


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def difference_text(r: ProposerResult) -> str:
    """The winner's paired difference from the seed in points, with its interval."""
    c = r.comparison
    if c.ci is None:
        return "n/a"
    return f"{100 * (c.difference or 0):+.1f} {interval_text(c.ci.low, c.ci.high, signed=True)}"


def objective_difference_text(c: JudgeComparison) -> str:
    """An objective's paired difference in points of [0, 1], with its interval."""
    if c.ci is None or c.difference is None:
        return "n/a"
    return f"{100 * c.difference:+.1f} {interval_text(c.ci.low, c.ci.high, signed=True)}"


def objective_verdict(c: JudgeComparison, label: str, alpha: float = 0.05) -> str:
    """The held-out verdict on an objective other than success, in words."""
    tested = f"{c.matched_tasks} tasks scored in both"
    if c.ci is None or c.difference is None:
        return f"no verdict on {label}: {tested}, too few to compare"
    p = p_text(c.p_value, bound=c.p_upper_bound)
    if c.p_value < alpha and c.difference != 0:
        word, d, lo, hi = (("gain", c.difference, c.ci.low, c.ci.high) if c.difference > 0
                           else ("loss", -c.difference, -c.ci.high, -c.ci.low))
        side = "better" if c.difference > 0 else "worse"
        return (f"held-out {word} on {label}: {c.label_b} is {side} by {100 * d:.1f} points, "
                f"95% CI {interval_text(lo, hi)}, {p} ({tested})")
    return (f"no detectable gain on held-out tasks on {label}: difference "
            f"{objective_difference_text(c)}, {p} ({tested})")


def success_verdict(r: ProposerResult) -> str:
    """The held-out verdict on success, in words."""
    c = r.comparison
    if c.significant and c.direction == "better":
        return f"held-out gain: {c.verdict}"
    if c.significant:
        return f"held-out loss: {c.verdict}"
    return f"no detectable gain on held-out tasks: {c.verdict.removeprefix('no detectable difference; ')}"


def verdict_line(r: ProposerResult) -> str:
    """The held-out verdict of one proposer, in words: on its objective and, when that is
    not success, on success beside it."""
    if r.objective_comparison is None:
        return success_verdict(r)
    return (f"{objective_verdict(r.objective_comparison, r.objective)}; "
            f"success: {success_verdict(r)}")


def selection_note(r: ProposerResult) -> str | None:
    """A warning when validation cannot tell the winner from the seed (exact McNemar on the
    validation tasks, p ≥ 0.05): then the winner was chosen on noise as far as validation
    knows, and only the held-out verdict says whether it is better. ``None`` when the winner
    is the seed, validation separates them, or the result predates the record."""
    if r.val_discordant is None or len(r.lineage) < 2:
        return None
    seed_only, winner_only = r.val_discordant
    p = mcnemar(seed_only, winner_only).p_value
    if p < 0.05:
        return None
    return (f"validation cannot tell the winner from the seed: {winner_only} validation "
            f"task{'s' if winner_only != 1 else ''} only the winner solved, {seed_only} only the "
            f"seed (exact McNemar {p_text(p)}); the held-out verdict decides")


def render(result: ExperimentResult, console: Console) -> None:
    """Print the account, the held-out table, lineages and verdicts."""
    cfg = result.config
    console.print(f"[bold]Experiment {result.experiment_id}[/] · env {cfg.env.name} · "
                  f"{cfg.train} train / {cfg.val} val / {cfg.test} test tasks · "
                  f"seed spec {cfg.seed_spec.hash()[:8]}")
    acc = Table(title="Budget account (train + val; test is outside the budget)", title_justify="left")
    for col in ("proposer", "stopped because", "rollouts", "tokens", "proposals", "invalid",
                "gated out", "accepted", "archive"):
        acc.add_column(col)
    for r in result.results:
        a = r.account
        acc.add_row(r.proposer.name, r.stop_reason, str(r.spend.rollouts), f"{r.spend.tokens:,}",
                    str(a.proposals), str(a.invalid), str(a.gated_out), str(a.accepted),
                    str(r.archive_size))
    console.print(fit(acc, console))  # at 80 columns or in a log: no header cut to 'gate…'
    label = cfg.objective.label()
    judged = not cfg.objective.is_success
    title = f"Held-out test ({cfg.test} tasks, same seeds for every spec)"
    if judged:
        title += f"; val, test and difference on the objective {label}, success beside it"
    held = Table(title=title, title_justify="left")
    cols = ["spec", "val", "test", "val→test gap", "tokens/task", "rollouts/task", "rollouts to best",
            "difference vs seed [95% CI]", "p"]
    if judged:
        cols += ["test success", "success difference [95% CI]", "p (success)"]
    for col in cols:
        held.add_column(col)
    base_row = ["seed (baseline)", "", _pct(result.baseline_test_score), "",
                f"{result.baseline_tokens_per_task:,.0f}", f"{result.baseline_rollouts_per_task:.2f}",
                "", "", ""]
    if judged:
        base_row += [_pct(result.baseline_test_success or 0.0), "", ""]
    held.add_row(*base_row)
    for r in result.results:
        c = r.comparison
        row = [f"{r.proposer.name} winner {r.winner.hash()[:8]}", _pct(r.val_score),
               _pct(r.test_score), f"{100 * r.val_test_gap:+.1f} pts", f"{r.tokens_per_task:,.0f}",
               f"{r.rollouts_per_task:.2f}", str(r.rollouts_to_best)]
        if r.objective_comparison is None:
            row += [difference_text(r), p_cell(c.p_value)]
        else:
            oc = r.objective_comparison
            row += [objective_difference_text(oc), p_cell(oc.p_value),
                    _pct(r.test_success or 0.0), difference_text(r), p_cell(c.p_value)]
        held.add_row(*row)
    console.print(fit(held, console))
    if judged:
        train_val = ", ".join(f"{r.proposer.name} {r.account.judge_errors}" for r in result.results)
        test = ", ".join([f"seed {result.baseline_judge_errors}"]
                         + [f"{r.proposer.name} winner {r.test_judge_errors}" for r in result.results])
        console.print(f"objective {label}: episodes left unscored by judge errors (excluded from "
                      f"every comparison): train/val {train_val}; test {test}", highlight=False)
    for r in result.results:
        console.print(f"[bold]{r.proposer.name}[/] lineage:")
        for e in r.lineage:
            console.print(f"  {e.hash[:8]}  it {e.iteration:>3}  val {_pct(e.val_score):>6}  "
                          f"{e.proposer}: {e.change}", highlight=False)
        note = selection_note(r)
        if note:
            console.print(f"[yellow]{r.proposer.name}: {note}[/]", highlight=False)
        console.print(f"[bold]{r.proposer.name}:[/] {verdict_line(r)}", highlight=False)


def plot_curves(result: ExperimentResult, target: Path) -> list[Path]:
    """Best validation success against rollouts and against tokens, one line per proposer,
    as PNG and SVG at :func:`~sharpen.stats.plot.plot_paths` of ``target`` (a folder gets
    ``anytime.png`` and ``.svg``)."""
    paths = plot_paths(target, CURVE_STEM)
    plt = pyplot(paths[0].parent)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4), dpi=120)
    for r in result.results:
        xs = [p.rollouts for p in r.curve]
        ts = [p.tokens for p in r.curve]
        ys = [100 * p.best_val for p in r.curve]
        ax1.step(xs, ys, where="post", label=r.proposer.name)
        ax2.step(ts, ys, where="post", label=r.proposer.name)
    for ax, label in ((ax1, "rollouts spent"), (ax2, "tokens spent")):
        ax.set_xlabel(label)
        ax.set_ylabel(f"best validation {result.config.objective.label()} (%)")
        ax.grid(alpha=0.3)
        ax.set_ylim(-2, 102)
    ax1.axhline(100 * result.baseline_test_score, ls=":", color="gray", label="seed on test")
    ax1.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Anytime curve · experiment {result.experiment_id}")
    fig.tight_layout()
    return save(fig, paths)
