"""The cost–accuracy frontier as a picture (PNG and SVG), drawn with matplotlib.

matplotlib is an optional extra (``pip install 'sharpen[plot]'``); without it
:func:`plot_frontier` raises a :class:`~sharpen.core.errors.UserError` naming that fix.
The Agg backend is used, so no display is needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sharpen.core.errors import UserError
from sharpen.stats.cost import Frontier, FrontierPoint

STEM = "cost_accuracy"
"""File name (without extension) of the plots."""


FORMATS = (".png", ".svg")
"""Every plot is written in these formats."""


def plot_paths(target: Path, stem: str) -> list[Path]:
    """Where a plot named ``stem`` goes for ``--plot TARGET``: ``TARGET`` itself and its
    sibling in the other format when it names a ``.png`` or ``.svg`` file, else
    ``TARGET/stem.png`` and ``.svg`` (``TARGET`` a folder)."""
    if target.suffix.lower() in FORMATS:
        return [target.with_suffix(fmt) for fmt in FORMATS]
    return [target / f"{stem}{fmt}" for fmt in FORMATS]


def save(fig: Any, paths: list[Path]) -> list[Path]:
    """Write ``fig`` to ``paths`` and close it."""
    import matplotlib.pyplot as plt

    for path in paths:
        fig.savefig(path)
    plt.close(fig)
    return paths


def pyplot(out_dir: Path) -> Any:
    """``matplotlib.pyplot`` on the Agg backend, with ``out_dir`` created; a UserError
    naming the fix when matplotlib is missing or the folder cannot be made."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError("plots need matplotlib, which is not installed",
                        "pip install 'sharpen[plot]' (or pip install matplotlib)") from None
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the plot folder {out_dir}: {exc.strerror}",
                        "give --plot a folder or a .png/.svg file where you can write") from None
    return plt


def plot_frontier(front: Frontier, target: Path, title: str = "Cost–accuracy frontier") -> list[Path]:
    """Draw ``front`` as PNG and SVG at :func:`plot_paths` of ``target`` (a folder gets
    ``cost_accuracy.png`` and ``.svg``); returns both paths.

    Each run is a point with its 95% interval as an error bar; runs on the Pareto frontier
    are filled and joined by a line, dominated runs are hollow.
    """
    paths = plot_paths(target, STEM)
    plt = pyplot(paths[0].parent)
    usd = front.axis == "cost_usd"

    def x(p: FrontierPoint) -> float:
        return float(p.cost_per_task or 0.0) if usd else p.tokens_per_task

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    pts = front.points
    for p in pts:
        y = 100 * p.accuracy
        err = [[y - 100 * p.ci_low], [100 * p.ci_high - y]]
        ax.errorbar(x(p), y, yerr=err, fmt="o", ms=7, capsize=3, color="tab:blue",
                    mfc="tab:blue" if p.on_frontier else "white", zorder=3)
        ax.annotate(p.label, (x(p), y), textcoords="offset points", xytext=(6, 6), fontsize=9)
    best = sorted((p for p in pts if p.on_frontier), key=x)
    if len(best) > 1:
        ax.plot([x(p) for p in best], [100 * p.accuracy for p in best], "-", color="tab:blue",
                alpha=0.6, zorder=2, label="Pareto frontier")
        ax.legend(loc="lower right", fontsize=8)
    ax.set_xlabel("dollars per task" if usd else "tokens per task")
    ax.set_ylabel("success (%), 95% CI")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    lo = min(0.0, *(100 * p.ci_low for p in pts)) if pts else 0.0
    ax.set_ylim(lo - 2, 102)
    fig.tight_layout()
    return save(fig, paths)
