"""``sharpen router fit RUN...``: the router model's classifier, fitted on stored runs of fixed
models (:mod:`sharpen.stats.routing`), written as a JSON file that ``--model router
--model-arg classifier=FILE`` reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from sharpen.cli.options import JsonOpt, StoreOpt, open_store

app = typer.Typer(
    help="Fit the router model's classifier on stored runs of fixed models (one run per model, "
    "cheapest first): each task labelled with the cheapest model that solved it.",
    no_args_is_help=True,
)


@app.command("fit")
def fit(
    runs: Annotated[list[str], typer.Argument(
        help="One run per route, cheapest model first (ids, unique prefixes or 'latest').")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the classifier (JSON).")],
    solved_at: Annotated[float, typer.Option(
        "--solved-at", min=0.0, max=1.0,
        help="A model solved a task when its success rate on it is at least this.")] = 0.5,
    max_features: Annotated[int, typer.Option(
        "--max-features", min=1, help="Words in the classifier's TF-IDF vocabulary at most.")] = 2000,
    json_out: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """Fit the router's classifier on runs of the same tasks by different models, cheapest
    first: a task's label is the cheapest model that solved it (the last when none did), its
    features the words and length of its prompt. Writes the classifier as JSON."""
    from sharpen.stats.routing import fit_router

    st = open_store(store)
    ids = [st.resolve_run(r) for r in runs]
    clf = fit_router(st, ids, solved_at=solved_at, max_features=max_features)
    out.parent.mkdir(parents=True, exist_ok=True)
    clf.save(out)
    summary = {"out": str(out), "runs": ids, "routes": clf.route_names, "tasks": clf.tasks,
               "label_counts": clf.label_counts, "vocabulary": len(clf.features.vocabulary)}
    if json_out:
        print(json.dumps(summary, indent=2))
        return
    counts = ", ".join(f"{n} {c}" for n, c in zip(clf.route_names, clf.label_counts, strict=True))
    Console().print(f"wrote {out}: fitted on {clf.tasks} tasks (cheapest model that solved each: "
                    f"{counts}), {len(clf.features.vocabulary)} words; use it with  --model router "
                    f"--model-arg classifier={out}", highlight=False)
