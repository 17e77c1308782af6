"""``sharpen import inspect LOG...``, ``import otlp FILE...`` and ``import phoenix``: other
tools' logs into the store, as runs that ``report``, ``compare``, ``diagnose`` and ``view``
read like any other."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from sharpen.cli.options import JsonOpt, StoreOpt, open_store
from sharpen.core.errors import UserError

app = typer.Typer(
    help="Import other tools' logs as runs: Inspect AI's .eval and .json logs (one run per log, "
    "one trajectory per sample and epoch), OpenTelemetry spans from an OTLP/JSON file or a "
    "Phoenix project, for report, compare, diagnose and view.",
    no_args_is_help=True,
)

INSTALL_FIX = "pip install 'sharpen[inspect]' (the Inspect AI version sharpen reads logs with)"


@app.command("inspect")
def inspect_logs(
    logs: Annotated[list[Path], typer.Argument(help="Inspect logs (.eval or .json) to import.")],
    json_out: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """Import Inspect AI logs: each log a run (environment inspect:TASK), each sample and epoch a
    trajectory, the first scorer's value the outcome and the others feedback. Importing a log
    again adds nothing."""
    try:
        from sharpen.interop.inspect_log import import_log
    except ImportError as exc:
        raise UserError(f"reading Inspect logs needs inspect_ai ({exc})", INSTALL_FIX) from exc
    db = open_store(store)
    done = [import_log(db, path) for path in logs]
    if json_out:
        print(json.dumps([d.model_dump(mode="json") for d in done], indent=2))
        return
    out = Console(highlight=False)
    for d in done:
        acc = "" if d.accuracy is None else f", Inspect's accuracy {d.accuracy:.3f}"
        again = "" if d.written else " (imported before: nothing new)"
        out.print(f"run {d.run_id}: {d.task} on {d.model}, {d.written} of {d.samples} samples "
                  f"stored (scorer {d.scorer or 'none'}{acc}){again} — sharpen report {d.run_id}")


@app.command("otlp")
def otlp_files(
    files: Annotated[list[Path], typer.Argument(
        help="OTLP/JSON files (the collector's file exporter: a request a line).")],
    json_out: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """Import OpenTelemetry spans: runs sharpen exported come back as they were; other GenAI /
    OpenInference spans become a run per service, an episode per agent span (docs/integrations.md).
    Importing the same spans again adds nothing."""
    from sharpen.cli.otel_cmd import import_otlp

    import_otlp(files, json_out, store)


@app.command("phoenix")
def phoenix_project(
    endpoint: Annotated[str, typer.Option(help="Phoenix's base URL, e.g. http://127.0.0.1:6006.")],
    project: Annotated[str, typer.Option(help="The Phoenix project whose spans to import.")] = "default",
    header: Annotated[list[str] | None, typer.Option(
        "--header", help="An HTTP header, NAME=VALUE (e.g. Authorization=Bearer KEY).")] = None,
    json_out: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """Import a Phoenix project's spans through its REST API, as `import otlp` does a file."""
    from sharpen.cli.otel_cmd import import_phoenix

    import_phoenix(endpoint, project, header, json_out, store)
