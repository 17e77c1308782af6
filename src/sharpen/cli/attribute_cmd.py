"""``sharpen attribute RUN``: counterfactual attribution of a stored run's failures — replay
each failed trajectory with one step's action corrected and find the earliest step whose fix
turns the failure into a success (the decisive step), stored as feedback on that step; print
the distribution of decisive steps and stages, or the same as JSON (``--json``).
How it works and what it cannot see: docs/diagnose.md, Counterfactual attribution.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from sharpen.cli.diagnose_cmd import share_text
from sharpen.cli.options import JsonOpt, StoreOpt, open_store
from sharpen.cli.tables import fit
from sharpen.diagnose.attribution import Attribution, AttributionSummary


def render(s: AttributionSummary, console: Console) -> None:
    """Print ``s``: the counts by status, then decisive steps and stages."""
    total = sum(s.statuses.values())
    console.print(
        f"[bold]sharpen attribute[/] run {s.run_id} · fix {s.fixer} · {total} failed "
        f"trajectories looked at, {s.attributed} attributed · flipped "
        f"{share_text(s.flipped)} · no flip {s.no_flip} · {s.stored} new records stored",
        highlight=False)
    others = {k: v for k, v in s.statuses.items() if k not in ("flipped", "no_flip")}
    if others:
        console.print("not attributed: " + ", ".join(f"{k} {v}" for k, v in others.items()),
                      highlight=False)
    if s.decisive_steps:
        table = Table(title="Decisive steps", title_justify="left")
        table.add_column("step", justify="right")
        table.add_column("trajectories", justify="right")
        for step, n in s.decisive_steps.items():
            table.add_row(str(step), str(n))
        console.print(fit(table, console))
    if any(k != "none" for k in s.decisive_stages):
        console.print("decisive stages: " + ", ".join(
            f"{k} {v}" for k, v in s.decisive_stages.items()), highlight=False)


def attribute(
    run: Annotated[str, typer.Argument(help="Run id, a unique prefix, or 'latest'.")],
    fix: Annotated[str, typer.Option(
        "--fix", help="Where the corrected action comes from: 'reference' (the environment's "
        "next reference action not yet taken; for a one-answer environment, its reference "
        "answer) or 'resample' (the run's model, at temperature 1, given the conversation "
        "so far).")] = "reference",
    samples: Annotated[int, typer.Option(
        "--samples", min=1, help="With --fix resample: tries per step.")] = 1,
    limit: Annotated[int | None, typer.Option(
        "--limit", min=1, help="Attribute only the first N failed trajectories.")] = None,
    progress: Annotated[bool, typer.Option(help="Show a progress bar with ETA.")] = True,
    json_out: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """Find the step that decided each failure of a stored run by replaying it with that step's
    action corrected: the earliest fix that turns the failure into a success, stored as feedback
    on the step, with the distribution of decisive steps."""
    from sharpen.diagnose.attribution import attribute_run
    from sharpen.runner.signals import run_sync

    console = Console(stderr=json_out)
    st = open_store(store)
    rid = st.resolve_run(run)
    bar = Progress(TextColumn("[bold]attributing[/]"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[flipped]} flipped"), TimeRemainingColumn(),
                   console=console, disable=not progress or json_out, transient=True)
    task = bar.add_task("attribute", total=None, flipped=0)
    flipped = [0]

    def done(a: Attribution, n: int, total: int) -> None:
        flipped[0] += a.status == "flipped"
        bar.update(task, total=total, completed=n, flipped=flipped[0])

    with bar:
        summary = run_sync(attribute_run(st, rid, fix, limit, on_done=done, samples=samples))
    if json_out:
        print(summary.model_dump_json(indent=2))
    else:
        render(summary, Console())
