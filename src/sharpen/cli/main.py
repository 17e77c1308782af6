"""The ``sharpen`` command line. Every user error ends in one message naming the fix."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from sharpen.cli.lazy import LazyCommand, LazyGroup
from sharpen.core.errors import UserError

COMMANDS: tuple[LazyCommand, ...] = (
    LazyCommand("envs", "sharpen.cli.envs_cmd", "envs",
                "List environments (one line each), or one environment's arguments, knobs, "
                "presets and tools."),
    LazyCommand("plugins", "sharpen.cli.plugins_cmd", "plugins",
                "List plug-ins by kind: the built-ins and every installed package's (entry points). "
                "Your own are named as module:Name or path/to/file.py:Name (docs/plugins.md)."),
    LazyCommand("run", "sharpen.cli.run_cmd", "run",
                "Run an agent on an environment's tasks and print a summary (and judge it, "
                "--judge)."),
    LazyCommand("runs", "sharpen.cli.browse", "runs",
                "List recent runs, newest first. A run whose process is gone (killed) is shown "
                "``interrupted``; an incomplete run's status says how many episodes are stored."),
    LazyCommand("show", "sharpen.cli.browse", "show",
                "Show a run: manifest, per-task results (one mark per epoch), summary."),
    LazyCommand("export", "sharpen.cli.browse", "export",
                "Export trajectories as JSON lines: the full record, or fine-tuning data (SFT "
                "examples, preference pairs, RL groups) filtered by outcome and feedback."),
    LazyCommand("import", "sharpen.cli.import_cmd", "app",
                "Import other tools' logs as runs: Inspect AI's .eval and .json logs (one run per "
                "log, one trajectory per sample and epoch), OpenTelemetry spans from an OTLP/JSON "
                "file or a Phoenix project, for report, compare, diagnose and view."),
    LazyCommand("train", "sharpen.cli.train_cmd", "train",
                "Train the agent's model on an environment's train tasks with a method (star, "
                "rerest, grpo, dpo, reward-model); report base vs trained on held-out test tasks."),
    LazyCommand("checkpoint", "sharpen.cli.train_cmd", "checkpoint",
                "Write the embedded model (or another GGUF model) as a float32 Hugging Face "
                "checkpoint with its tokenizer and chat template, for fine-tuning on `sharpen "
                "export` data with TRL."),
    LazyCommand("gguf", "sharpen.cli.train_cmd", "to_gguf",
                "Write a trained checkpoint as a GGUF file, with the metadata of the model it came "
                "from, so the embedded runner loads it: --model local --model-arg model_path=OUT."),
    LazyCommand("report", "sharpen.cli.report_cmd", "report",
                "Report a run: mean success, pass@k and pass^k with intervals over tasks, excluded "
                "errors, cost per task and per success, reliability, power and validity checks."),
    LazyCommand("judge", "sharpen.cli.judge_cmd", "judge",
                "Score a stored run with a judge: one feedback record per criterion per "
                "trajectory (pairwise: per pair), resumable; judge failures are counted, never "
                "the agent's."),
    LazyCommand("diagnose", "sharpen.cli.diagnose_cmd", "diagnose",
                "Find failure modes in a stored run: loops, stalls, invalid-action bursts, ignored "
                "errors, limit hits, context overflow and reward-hacking signatures, stored as "
                "feedback on their steps, with counts and intervals; stage metrics, a failure "
                "taxonomy, the decisive steps `sharpen attribute` found, and with --against what "
                "changed between two runs."),
    LazyCommand("induce", "sharpen.cli.induce_cmd", "induce",
                "Induce evaluation metrics from people's free-text comments on a run's "
                "trajectories (AutoLibra), judge them, and report coverage and redundancy; write "
                "them as a rubric."),
    LazyCommand("attribute", "sharpen.cli.attribute_cmd", "attribute",
                "Find the step that decided each failure of a stored run by replaying it with that "
                "step's action corrected: the earliest fix that turns the failure into a success, "
                "stored as feedback on the step, with the distribution of decisive steps."),
    LazyCommand("validate-judge", "sharpen.cli.judge_cmd", "validate_judge",
                "Measure a judge against a verifier: accuracy, Cohen's κ and AUROC with 95% "
                "intervals on reference, null and real-agent trajectories; length bias, position "
                "bias, self-consistency."),
    LazyCommand("agreement", "sharpen.cli.judge_cmd", "agreement",
                "Judge–human agreement per criterion: Cohen's κ, Krippendorff's α and Spearman's "
                "ρ with bootstrap intervals and the confusion matrix, from annotations with the "
                "judge's names."),
    LazyCommand("compare", "sharpen.cli.compare_cmd", "compare",
                "Compare runs on their common tasks: per-task paired differences, McNemar or a "
                "paired bootstrap, Holm-adjusted verdicts, cost next to accuracy."),
    LazyCommand("view", "sharpen.cli.view_cmd", "view",
                "Browse runs and trajectories, annotate them, compare runs and inspect improvement "
                "experiments and trainings in the browser."),
    LazyCommand("improve", "sharpen.cli.improve_cmd", "improve",
                "Improve an AgentSpec on train/val within a budget; report its held-out gain on test."),
    LazyCommand("demo", "sharpen.cli.demo_cmd", "demo",
                "Baseline the embedded model on code tasks, improve it with Reflexion on the failed "
                "tests within a budget, and print the held-out verdict with its paired 95% interval."),
    LazyCommand("router", "sharpen.cli.router_cmd", "app",
                "Fit the router model's classifier on stored runs of fixed models (one run per "
                "model, cheapest first): each task labelled with the cheapest model that solved it."),
    LazyCommand("check", "sharpen.cli.check_cmd", "app",
                "Check that a plug-in keeps its kind's contract (like Gymnasium's check_env)."),
)
"""Every command, in --help order: its module is imported only when it runs, so --help is
fast (tests/test_cli_json.py checks each help line against the command's docstring)."""


class SharpenGroup(LazyGroup):
    """The top-level group: :data:`COMMANDS`, loaded lazily."""

    lazy = COMMANDS

app = typer.Typer(
    name="sharpen",
    help="Close the feedback loop for LLM agents: environments, rollouts, feedback, evaluation.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    cls=SharpenGroup,
)


def _print_version(value: bool) -> None:
    if value:
        from sharpen import __version__

        print(f"sharpen {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_print_version,
        help="Print sharpen's version and exit.")] = False,
) -> None:
    """Close the feedback loop for LLM agents: environments, rollouts, feedback, evaluation."""


def main() -> None:
    """Console entry point: runs the app and turns UserErrors into one clear line."""
    try:
        app()
    except UserError as exc:
        from rich.console import Console
        from rich.markup import escape

        err = Console(stderr=True)
        # The message is text, not markup: "[source:]name" must not vanish as a style tag.
        err.print(f"[bold red]error:[/] {escape(exc.message)}", highlight=False)
        if exc.fix:
            err.print(f"[bold]fix:[/] {escape(exc.fix)}", highlight=False)
        sys.exit(2)


if __name__ == "__main__":
    main()
