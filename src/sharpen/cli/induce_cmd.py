"""``sharpen induce RUN``: metrics induced from people's free-text comments on a run's
trajectories (AutoLibra) — aspects, clustered metrics, the metrics judged, coverage and
redundancy — written as a rubric for ``sharpen judge`` (docs/diagnose.md, Induced metrics).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
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
from sharpen.cli.tables import fit
from sharpen.core.agent_spec import AgentSpec

if TYPE_CHECKING:
    from sharpen.diagnose.induce import Induction


def _share(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def render(ind: Induction, out: Path | None, console: Console) -> None:
    """Print the induction: one row per metric, then coverage and redundancy."""
    console.print(
        f"[bold]sharpen induce[/] run {ind.run_id} · {len(ind.notes)} notes → "
        f"{len(ind.aspects)} aspects ({len(ind.grounding_errors)} notes not grounded) → "
        f"{len(ind.metrics)} metrics · model {ind.model}", highlight=False)
    table = Table(title="Induced metrics: aspects (+/-) and the judge's traits (+/-/n/a) on the "
                  "annotated trajectories", title_justify="left")
    for col in ("metric", "definition", "aspects +/-", "traits +/-/0", "named by"):
        table.add_column(col)
    for m in ind.metrics:
        signs = [ind.aspects[i].sign for i in m.aspects]
        rates = [r.rating for r in ind.ratings if r.metric == m.name]
        table.add_row(m.name, m.definition, f"{signs.count(1)}/{signs.count(-1)}",
                      f"{rates.count(1)}/{rates.count(-1)}/{rates.count(0)}", m.named_by)
    console.print(fit(table, console))
    if ind.meta is not None:
        me = ind.meta
        console.print(f"coverage {_share(me.coverage)} ({me.matched} of {me.aspects} aspects "
                      f"matched by a trait) · redundancy {_share(me.redundancy)} "
                      f"({me.unmatched_traits} of {me.traits} traits asked for by no aspect)"
                      + (f" · {me.unjudged_aspects} aspects on unjudged trajectories"
                         if me.unjudged_aspects else ""), highlight=False)
    for e in ind.grounding_errors[:3]:
        console.print(f"[yellow]not grounded:[/] note {e}", highlight=False)
    for e in ind.judge_errors[:3]:
        console.print(f"[yellow]not judged:[/] trajectory {e}", highlight=False)
    if out is not None:
        console.print(f"rubric written to {out} · score a run with it: sharpen judge RUN "
                      f"--judge {out}", highlight=False)


def induce(
    run: Annotated[str, typer.Argument(help="Run id, a unique prefix, or 'latest'.")],
    notes: Annotated[Path | None, typer.Option(
        help='Notes as JSONL, {"trajectory_id": ..., "text": ...} a line (default: the '
             "run's human comments from the viewer).")] = None,
    metrics: Annotated[int | None, typer.Option(
        min=1, help="Number of metrics (default: picked by silhouette, 2 to 4).")] = None,
    out: Annotated[Path | None, typer.Option(
        help="Write the metrics here as a rubric YAML (for sharpen judge --judge FILE).")] = None,
    evaluate: Annotated[bool, typer.Option(
        help="Judge the metrics on the annotated trajectories: coverage and redundancy.")
    ] = True,
    token_budget: Annotated[int, typer.Option(
        min=100, help="Transcript tokens the model reads per call.")] = 400,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    model_name: ModelNameOpt = None,
    model_arg: ModelArgOpt = None,
    json_out: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """Induce evaluation metrics from people's free-text comments on a run's trajectories
    (AutoLibra), judge them, and report coverage and redundancy; write them as a rubric."""
    from sharpen.diagnose.induce import InduceConfig, induce, notes_from_file, write_rubric
    from sharpen.judges.runner import build_judge_model
    from sharpen.runner.signals import run_sync

    mref = model_ref(AgentSpec(name="induce"), model, base_url, model_name,
                     parse_kv(model_arg, "--model-arg"))
    st = open_store(store)
    rid = st.resolve_run(run)
    given = None
    if notes is not None:
        ids = [t.id for t in st.iter_trajectories(rid, with_steps=False)]
        given = notes_from_file(notes, ids)
    config = InduceConfig(metrics=metrics, evaluate=evaluate, token_budget=token_budget)
    chat = build_judge_model(mref)

    async def go() -> Induction:
        try:
            return await induce(st, rid, chat, given, config)
        finally:
            await chat.aclose()

    result = run_sync(go())
    if out is not None:
        write_rubric(result, out)
    if json_out:
        print(result.model_dump_json(indent=2))
    else:
        render(result, out, Console())
