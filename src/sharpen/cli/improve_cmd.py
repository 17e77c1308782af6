"""``sharpen improve``: improve an AgentSpec with a proposer, prove it on held-out tasks."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from sharpen.cli.executor_option import (
    ExecutorArgOpt,
    ExecutorOpt,
    RayAddressOpt,
    build_executor,
    closing,
)
from sharpen.cli.options import (
    BaseUrlOpt,
    CurvePlotOpt,
    DecodingOpt,
    EnvArgOpt,
    JsonOpt,
    ModelArgOpt,
    ModelNameOpt,
    ModelOpt,
    StoreOpt,
    above_zero,
    model_ref,
    open_store,
    parse_kv,
    with_decoding,
)
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.registry import PluginRef
from sharpen.improvement import launch
from sharpen.improvement.budget import Budget, preflight
from sharpen.improvement.engine import EngineConfig
from sharpen.improvement.experiment import ExperimentConfig, ExperimentResult
from sharpen.improvement.objective import parse_objective
from sharpen.improvement.report import plot_curves, render, verdict_line
from sharpen.runner.executor import Executor, LocalExecutor
from sharpen.runner.signals import Terminated, run_sync


def view_hint(experiment_id: str, store_url: str | None, folder: Path | None) -> str:
    """The command that shows this experiment in the viewer, and where."""
    args = (f" --store {shlex.quote(store_url)}" if store_url else "") + (
        f" --improve-dir {shlex.quote(str(folder))}" if folder else "")
    return f"inspect it in the browser: sharpen view{args}  → /improve/{experiment_id}"


def run_experiment(config: ExperimentConfig, *, store_url: str | None, folder: Path | None,
                   resume: bool, fresh: bool, concurrency: int, console: Console,
                   progress: bool = True, executor: Executor | None = None) -> ExperimentResult:
    """Run ``config`` with progress lines on ``console`` (and progress bars unless not
    ``progress``), its episodes played by ``executor`` (closed at the end; default: in this
    process); checkpoint, resume, Ctrl-C."""
    plays = executor or LocalExecutor()
    launch.check_config(config)
    st = open_store(store_url)
    folder = launch.prepare_folder(st, config, folder, resume=resume, fresh=fresh)
    others = ", ".join(b.name for b in config.baselines)
    console.print(f"[bold]sharpen improve[/] {config.env.name} · proposer {config.proposer.name}"
                  + (f" · baselines {others}" if others else "")
                  + f" · experiment {config.experiment_id()} · store {st.url}")
    console.print(preflight(config.engine.budget, val_size=config.val, minibatch=config.engine.minibatch),
                  highlight=False)
    try:
        result = run_sync(closing(plays, launch.run_experiment(  # SIGTERM stops it as Ctrl-C does
            config, st, folder, concurrency=concurrency, progress=progress, executor=plays,
            on_event=lambda m: console.print(f"  {m}", highlight=False, markup=False))))
    except KeyboardInterrupt as exc:
        console.print("[yellow]Interrupted.[/] Progress is checkpointed in "
                      f"{folder}; rerun the same command with --resume to continue.")
        raise typer.Exit(exc.exit_code if isinstance(exc, Terminated) else 130) from None
    return result


def improve(
    env: Annotated[str, typer.Argument(
        help="Environment: a registered name (`sharpen envs`) or module:Name / file.py:Name.")],
    proposer: Annotated[str, typer.Option(
        "--proposer", "-p", help="Proposer: reflexion, guidelines, evolve, opro, best_of_n, or any "
        "registered name or module:Name / file.py:Name (`sharpen plugins proposer` lists them).")
    ] = "reflexion",
    proposer_arg: Annotated[list[str] | None, typer.Option(
        "--proposer-arg", help="Proposer args, KEY=VALUE (repeatable).")] = None,
    baselines: Annotated[str, typer.Option(
        help="Comma-separated proposers to run with the same budget for comparison, e.g. opro,best_of_n.")
    ] = "",
    agent: Annotated[Path | None, typer.Option("--agent", help="Seed AgentSpec YAML.")] = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    model_name: ModelNameOpt = None,
    model_arg: ModelArgOpt = None,
    decoding: DecodingOpt = None,
    env_arg: EnvArgOpt = None,
    budget_rollouts: Annotated[int | None, typer.Option(
        min=1, help="Rollouts on train+val (an environment episode each; a retry is one more).")] = 60,
    budget_tokens: Annotated[int | None, typer.Option(min=1, help="Tokens (rollouts + proposers).")] = None,
    budget_usd: Annotated[float | None, typer.Option(
        callback=above_zero, help="Dollars (rollouts + proposers).")] = None,
    train: Annotated[int, typer.Option(min=1, help="Training tasks.")] = 20,
    val: Annotated[int, typer.Option(min=1, help="Validation tasks.")] = 10,
    test: Annotated[int, typer.Option(min=1, help="Held-out test tasks.")] = 30,
    minibatch: Annotated[int, typer.Option(min=1, help="Training tasks per gate.")] = 4,
    seed: Annotated[int, typer.Option(help="Engine seed (parents, minibatches, sampling).")] = 0,
    task_seed: Annotated[int, typer.Option(help="Seed of the generated task lists.")] = 0,
    objective: Annotated[str, typer.Option(
        "--objective", help="What to maximise: success, or judge:J[:CRITERION] with J a rubric "
        "file (e.g. from `sharpen induce`), rubric:NAME or a registered pointwise judge; the "
        "judge's score in [0, 1] then decides gates, validation and the held-out verdict, "
        "with success reported beside it.")] = "success",
    judge_model: Annotated[str | None, typer.Option(
        "--judge-model", help="The objective judge's model backend (default: the seed spec's "
        "model).")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Write the winning AgentSpec here (YAML; `sharpen run --agent` loads it).")
    ] = None,
    folder: Annotated[Path | None, typer.Option(
        "--dir", help="Where experiment folders go; this one is DIR/<experiment id> "
                      "(default: improve/ next to a SQLite store, else .sharpen/improve).")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the checkpointed experiment.")] = False,
    fresh: Annotated[bool, typer.Option("--fresh", help="Delete its checkpoint and start over.")] = False,
    plot: CurvePlotOpt = None,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1)] = 1,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
    executor_arg: ExecutorArgOpt = None,
    progress: Annotated[bool, typer.Option(
        help="Show the progress bar of each evaluation (the engine's event lines stay).")] = True,
    json_out: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """Improve an AgentSpec on train/val within a budget; report its held-out gain on test."""
    console = Console(stderr=json_out)  # with --json, stdout holds the JSON alone
    plays = build_executor(executor, ray_address, executor_arg)
    spec = AgentSpec.load(agent) if agent else AgentSpec()
    spec = spec.model_copy(update={"model": model_ref(spec, model, base_url, model_name,
                                                      parse_kv(model_arg, "--model-arg"))})
    spec = with_decoding(spec, decoding)
    refs = [PluginRef(name=proposer, args=parse_kv(proposer_arg, "--proposer-arg"))]
    refs += [PluginRef(name=b.strip()) for b in baselines.split(",") if b.strip()]
    jmodel = None if judge_model is None else model_ref(AgentSpec(name="judge"), judge_model,
                                                        None, None, {})
    config = ExperimentConfig(
        objective=parse_objective(objective, seed_model=spec.model, judge_model=jmodel),
        env=PluginRef(name=env, args=parse_kv(env_arg, "--env-arg")), seed_spec=spec,
        proposer=refs[0], baselines=refs[1:], train=train, val=val, test=test, task_seed=task_seed,
        engine=EngineConfig(budget=Budget(rollouts=budget_rollouts, tokens=budget_tokens, usd=budget_usd),
                            minibatch=minibatch, seed=seed),
    )
    result = run_experiment(config, store_url=store, folder=folder, resume=resume, fresh=fresh,
                            concurrency=concurrency, console=console,
                            progress=progress and not json_out, executor=plays)
    if not json_out:
        render(result, console)
    console.print(view_hint(result.experiment_id, store, folder), highlight=False, markup=False)
    if out is not None:
        result.results[0].winner.dump(out)
        console.print(f"winning spec written to {out} (run it: sharpen run {env} --agent {out})")
    paths = plot_curves(result, plot) if plot is not None else []
    if paths:
        console.print(f"anytime curve: {', '.join(map(str, paths))}")
    if json_out:
        print(experiment_json(result, out, paths))


def experiment_json(result: ExperimentResult, out: Path | None, plots: list[Path]) -> str:
    """What ``improve --json`` and ``demo --json`` print: the result
    (``model_dump(mode="json")``), the main proposer's verdict line, where the winner went."""
    return json.dumps({"experiment": result.model_dump(mode="json"),
                       "verdict": verdict_line(result.results[0]),
                       "out": None if out is None else str(out),
                       "plots": [str(p) for p in plots]}, indent=2)
