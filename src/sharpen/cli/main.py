"""The ``sharpen`` command line. Every user error ends in one message naming the fix."""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from rich.markup import escape

from sharpen.cli import (
    browse,
    check_cmd,
    compare_cmd,
    demo_cmd,
    envs_cmd,
    improve_cmd,
    plugins_cmd,
    report_cmd,
    run_cmd,
    train_cmd,
    view_cmd,
)
from sharpen.core.errors import UserError

app = typer.Typer(
    name="sharpen",
    help="Close the feedback loop for LLM agents: environments, rollouts, feedback, evaluation.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.command("envs")(envs_cmd.envs)
app.command("plugins")(plugins_cmd.plugins)
app.command("run")(run_cmd.run)
app.command("runs")(browse.runs)
app.command("show")(browse.show)
app.command("export")(browse.export)
app.command("checkpoint")(train_cmd.checkpoint)
app.command("gguf")(train_cmd.to_gguf)
app.command("report")(report_cmd.report)
app.command("compare")(compare_cmd.compare)
app.command("view")(view_cmd.view)
app.command("improve")(improve_cmd.improve)
app.command("demo")(demo_cmd.demo)
app.add_typer(check_cmd.app, name="check")


def main() -> None:
    """Console entry point: runs the app and turns UserErrors into one clear line."""
    try:
        app()
    except UserError as exc:
        err = Console(stderr=True)
        # The message is text, not markup: "[source:]name" must not vanish as a style tag.
        err.print(f"[bold red]error:[/] {escape(exc.message)}", highlight=False)
        if exc.fix:
            err.print(f"[bold]fix:[/] {escape(exc.fix)}", highlight=False)
        sys.exit(2)


if __name__ == "__main__":
    main()
