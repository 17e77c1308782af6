"""``sharpen check env|agent|model|proposer NAME``: the conformance checks of
:mod:`sharpen.checks`, printed as a list of passed and failed checks (or JSON). Exits 1 when
any check fails."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from sharpen.checks import (
    CheckReport,
    acheck_agent,
    acheck_env,
    acheck_judge,
    acheck_model,
    acheck_proposer,
)
from sharpen.cli.options import BaseUrlOpt, EnvArgOpt, ModelArgOpt, ModelNameOpt, parse_kv
from sharpen.core.registry import PluginRef

app = typer.Typer(
    help="Check that a plug-in keeps its kind's contract (like Gymnasium's check_env).",
    no_args_is_help=True,
)

NameArg = Annotated[str, typer.Argument(
    help="Registered name, or module:Name / path/to/file.py:Name of your own plug-in.")]
ArgOpt = Annotated[list[str] | None, typer.Option(
    "--arg", "-A", help="The plug-in's own args, KEY=VALUE (repeatable).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the report as JSON.")]
CheckModelOpt = Annotated[str | None, typer.Option(
    "--model", "-m", help="Model the agent or proposer calls: a registered name or module:Name "
    "(openai with --base-url for a server).")]


def _model(model: str | None, base_url: str | None, model_name: str | None,
           model_args: list[str] | None) -> PluginRef | None:
    """The model ref the flags name, ``None`` when none is named (``--base-url`` alone
    implies ``openai``)."""
    args: dict[str, Any] = parse_kv(model_args, "--model-arg")
    if base_url is not None:
        args["base_url"] = base_url
    if model_name is not None:
        args["model"] = model_name
    if model is None and not args:
        return None
    return PluginRef(name=model or "openai", args=args)


def _show(report: CheckReport, as_json: bool) -> None:
    """Print ``report``; exit 1 when a check failed."""
    console = Console(highlight=False)
    if as_json:
        console.print_json(report.model_dump_json())
    else:
        verdict = "[bold green]ok[/]" if report.ok else "[bold red]FAILED[/]"
        console.print(f"{verdict} {report.kind} {escape(report.name)}: {len(report.passed)} "
                      f"passed, {len(report.problems)} failed")
        for line in report.passed:
            console.print(f"  [green]passed[/] {escape(line)}")
        for p in report.problems:
            console.print(f"  [red]failed[/] [bold]{escape(p.check)}[/]: {escape(p.message)}")
        for line in report.notes:
            console.print(f"  [dim]note[/]   {escape(line)}")
    if not report.ok:
        raise typer.Exit(1)


@app.command("env")
def env(
    name: NameArg,
    env_arg: EnvArgOpt = None,
    tasks: Annotated[int, typer.Option(min=1, help="Tasks to check.")] = 5,
    seed: Annotated[int, typer.Option(help="Seed of list_tasks.")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Check an environment: reset/step, tool schemas, determinism, replay, verifier, baselines.

    Tools are valid JSON Schema; the same seed gives the same tasks, resets and a
    byte-identical replay of a stored trajectory; the verifier re-scores it to the same
    outcome; the null agent scores at most 5% and the reference agent at least 95%."""
    args = parse_kv(env_arg, "-E")
    _show(asyncio.run(acheck_env(name, args=args, tasks=tasks, seed=seed)), as_json)


@app.command("agent")
def agent(
    name: NameArg,
    arg: ArgOpt = None,
    env_name: Annotated[str, typer.Option("--env", help="Environment of the episodes.")] = "code",
    env_arg: EnvArgOpt = None,
    model: CheckModelOpt = None,
    base_url: BaseUrlOpt = None,
    model_name: ModelNameOpt = None,
    model_arg: ModelArgOpt = None,
    episodes: Annotated[int, typer.Option(min=1, help="Episodes to run.")] = 2,
    as_json: JsonOpt = False,
) -> None:
    """Check an agent: build it, run short episodes, check the trajectories' shape.

    An agent that needs a model needs --model (or --base-url)."""
    env_args = parse_kv(env_arg, "-E")
    if env_name == "code" and "max_submissions" not in env_args:
        env_args["max_submissions"] = 1  # one submission keeps the check short
    report = asyncio.run(acheck_agent(
        name, args=parse_kv(arg, "--arg"), env=env_name, env_args=env_args,
        model=_model(model, base_url, model_name, model_arg), episodes=episodes))
    _show(report, as_json)


@app.command("model")
def model(
    name: NameArg,
    arg: ArgOpt = None,
    base_url: BaseUrlOpt = None,
    model_name: ModelNameOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check a model backend with short real requests (one offering a tool).

    Assistant reply, finish reason, usage, tool calls of known tools only, aclose; and, for a
    backend that constrains decoding, a reply valid against a small nested schema."""
    args = parse_kv(arg, "--arg")
    if base_url is not None:
        args["base_url"] = base_url
    if model_name is not None:
        args["model"] = model_name
    _show(asyncio.run(acheck_model(name, args=args)), as_json)


@app.command("proposer")
def proposer(
    name: NameArg,
    arg: ArgOpt = None,
    model: CheckModelOpt = None,
    base_url: BaseUrlOpt = None,
    model_name: ModelNameOpt = None,
    model_arg: ModelArgOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check a proposer: one proposal on a tiny context, observe, state round trip.

    The proposal is a new child (or InvalidProposal / NothingToPropose); state() is JSON
    that load_state restores. A proposer that asks an LLM needs --model (or --base-url)."""
    report = asyncio.run(acheck_proposer(name, args=parse_kv(arg, "--arg"),
                                         model=_model(model, base_url, model_name, model_arg)))
    _show(report, as_json)


@app.command("judge")
def judge(
    name: NameArg,
    arg: ArgOpt = None,
    model: CheckModelOpt = None,
    base_url: BaseUrlOpt = None,
    model_name: ModelNameOpt = None,
    model_arg: ModelArgOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check a judge: build it, judge a solved and an unsolved trajectory, judge one again.

    Feedback from source judge about the trajectory given, or a JudgeError; anything else it
    raises is a fault. The judge model is the embedded one unless --model or --base-url."""
    report = asyncio.run(acheck_judge(
        name, args=parse_kv(arg, "--arg"),
        model=_model(model, base_url, model_name, model_arg) or "local"))
    _show(report, as_json)
