"""What ``sharpen improve`` and ``sharpen demo`` print, and the anytime-curve plot."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from sharpen.cli.tables import fit
from sharpen.improvement.experiment import ExperimentResult, ProposerResult
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


def verdict_line(r: ProposerResult) -> str:
    """The held-out verdict of one proposer, in words."""
    c = r.comparison
    if c.significant and c.direction == "better":
        return f"held-out gain: {c.verdict}"
    if c.significant:
        return f"held-out loss: {c.verdict}"
    return f"no detectable gain on held-out tasks: {c.verdict.removeprefix('no detectable difference; ')}"


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
    held = Table(title=f"Held-out test ({cfg.test} tasks, same seeds for every spec)", title_justify="left")
    for col in ("spec", "val", "test", "val→test gap", "tokens/task", "rollouts/task", "rollouts to best",
                "difference vs seed [95% CI]", "p"):
        held.add_column(col)
    held.add_row("seed (baseline)", "", _pct(result.baseline_test_score), "",
                 f"{result.baseline_tokens_per_task:,.0f}", f"{result.baseline_rollouts_per_task:.2f}",
                 "", "", "")
    for r in result.results:
        c = r.comparison
        held.add_row(f"{r.proposer.name} winner {r.winner.hash()[:8]}", _pct(r.val_score),
                     _pct(r.test_score), f"{100 * r.val_test_gap:+.1f} pts", f"{r.tokens_per_task:,.0f}",
                     f"{r.rollouts_per_task:.2f}", str(r.rollouts_to_best), difference_text(r),
                     p_cell(c.p_value))
    console.print(fit(held, console))
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
        ax.set_ylabel("best validation success (%)")
        ax.grid(alpha=0.3)
        ax.set_ylim(-2, 102)
    ax1.axhline(100 * result.baseline_test_score, ls=":", color="gray", label="seed on test")
    ax1.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Anytime curve · experiment {result.experiment_id}")
    fig.tight_layout()
    return save(fig, paths)
