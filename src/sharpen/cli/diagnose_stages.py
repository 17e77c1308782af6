"""The stage table of ``sharpen diagnose``: per stage of the run's environment, the funnel
(attempts reaching it, failed against solved), steps, tokens, time, precision and recall
against the reference, then the success predictor's cross-validated accuracy and AUROC
(:mod:`sharpen.diagnose.stages`, :mod:`sharpen.diagnose.predict`)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from sharpen.cli.tables import fit
from sharpen.diagnose.predict import Prediction
from sharpen.diagnose.stages import StageReport
from sharpen.stats.intervals import Interval
from sharpen.stats.rounding import interval_text


def _share(rate: float | None, ci: Interval) -> str:
    return "—" if rate is None else f"{100 * rate:.0f}% {interval_text(ci.low, ci.high)}"


def _ratio(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def predictor_text(p: Prediction) -> str:
    """One line on the success predictor."""
    head = "Success predicted from stage metrics (logistic regression"
    if p.status != "ok" or p.accuracy is None or p.accuracy_ci is None:
        return f"{head}): {p.status} — {p.reason}"
    auc = "—" if p.auroc is None else f"{p.auroc:.2f}"
    if p.auroc_ci is not None:
        auc += f" [{p.auroc_ci[0]:.2f}, {p.auroc_ci[1]:.2f}]"
    over = f"a seeded sample of {p.n} attempts" if p.sampled else f"{p.n} attempts"
    return (f"{head}, {p.folds}-fold CV over {over}): accuracy {p.accuracy:.2f} "
            f"[{p.accuracy_ci.low:.2f}, {p.accuracy_ci.high:.2f}] (always the majority: "
            f"{p.majority or 0.0:.2f}), AUROC {auc}")


def render_stages(r: StageReport, console: Console) -> None:
    """Print ``r`` as a table, one row per stage in order, then the predictor's line."""
    table = Table(title=f"Stages of {r.env}: attempts reaching each (95% Wilson CI, points); "
                        f"precision / recall against the reference ({r.with_reference} of "
                        f"{r.trajectories} trajectories have one)", title_justify="left")
    for col in ("stage", "reached: failed", "reached: solved", "steps", "tokens", "time s",
                "precision", "recall"):
        table.add_column(col)
    for s in r.summaries:
        table.add_row(s.stage, _share(s.reached_failed, s.reached_failed_ci),
                      _share(s.reached_solved, s.reached_solved_ci), str(s.steps), str(s.tokens),
                      f"{s.seconds:.1f}", _ratio(s.precision), _ratio(s.recall))
    console.print(fit(table, console))
    if r.predictor is not None:
        console.print(predictor_text(r.predictor), highlight=False)
