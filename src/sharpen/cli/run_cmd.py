"""``sharpen run``: an agent on an environment's tasks, stored, summarised."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

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
    DecodingOpt,
    EnvArgOpt,
    JsonOpt,
    ModelArgOpt,
    ModelNameOpt,
    ModelOpt,
    StoreOpt,
    model_ref,
    open_store,
    parse_kv,
    run_json,
    with_decoding,
)
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import UserError
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.envs.base import ENV
from sharpen.runner import RetryPolicy, RunConfig, Runner
from sharpen.runner.compose import NO_MODEL, select_tasks, with_agent, with_perturbations
from sharpen.runner.signals import Terminated, run_sync

if TYPE_CHECKING:
    from sharpen.envs.base import Environment
    from sharpen.judges.runner import JudgeSetup, JudgeSummary
    from sharpen.store import Store


def _print_power_plan(console: Console, st: Store, environment: Environment, env_ref: PluginRef,
                      effect: float, tasks: int, epochs: int, split: str | None, seed: int) -> None:
    """Tasks × epochs needed for ``effect`` (pilot: the newest comparable stored run), and a
    warning when the chosen design is too small — with how many tasks the env can list."""
    from sharpen.cli.report_cmd import power_lines
    from sharpen.stats.pilot import find_pilot
    from sharpen.stats.power import plan

    p = plan(find_pilot(st, env_ref), effect, tasks=tasks, epochs=epochs)
    available = None
    if p.enough is False:
        need = next(r.tasks for r in p.rows if r.epochs == epochs)
        available = len(environment.list_tasks(split=split, limit=need, seed=seed))
    console.print("[bold]power plan[/]")
    for line in power_lines(p, available):
        console.print(f"  {line}", highlight=False)


def _inline_judge(judge: str, judge_arg: list[str] | None, judge_model: str | None,
                  run_model: PluginRef) -> JudgeSetup:
    """``--judge``'s setup, checked before the run so bad flags cost no episodes: the judge
    model is ``--judge-model`` or else the run's own model."""
    from sharpen.cli.judge_cmd import judge_setup
    from sharpen.judges.base import JUDGE, judge_info

    if judge_model is None and run_model == NO_MODEL:
        raise UserError("this agent uses no model, so there is none for the judge to default to",
                        "name the judge's model with --judge-model (e.g. local)")
    setup = judge_setup(judge, judge_arg, judge_model, None, None, None)
    if judge_model is None:
        setup = setup.model_copy(update={"model": run_model})
    if judge_info(REGISTRY.create(JUDGE, setup.judge)).pairwise:
        raise UserError("a pairwise judge compares two runs, not one as it finishes",
                        "run both, then `sharpen judge A --judge pairwise --versus B`")
    return setup


def _judge_after(console: Console, st: Store, run_id: str, setup: JudgeSetup,
                 concurrency: int) -> JudgeSummary:
    """Judge the finished run (what is judged already is kept: a resumed run judges the
    rest). Ctrl-C keeps the finished judgements and says how to go on."""
    from sharpen.judges.runner import judge_run

    try:
        return run_sync(judge_run(st, run_id, setup, resume=True, concurrency=concurrency))
    except KeyboardInterrupt as exc:
        console.print("[yellow]Interrupted while judging.[/] The run and finished judgements "
                      f"are saved; `sharpen judge {run_id[:12]} --judge ... --resume` judges "
                      "the rest.")
        raise typer.Exit(exc.exit_code if isinstance(exc, Terminated) else 130) from None


def run(
    env: Annotated[str, typer.Argument(
        help="Environment: a registered name (`sharpen envs`) or module:Name / file.py:Name.")],
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    model_name: ModelNameOpt = None,
    model_arg: ModelArgOpt = None,
    decoding: DecodingOpt = None,
    tasks: Annotated[int | None, typer.Option("--tasks", "-n", min=1, help="Run the first N tasks.")] = None,
    split: Annotated[str | None, typer.Option(help="train, val or test (default: all).")] = None,
    epochs: Annotated[int, typer.Option("--epochs", "-k", min=1, help="Repetitions per task.")] = 1,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1)] = 4,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
    executor_arg: ExecutorArgOpt = None,
    agent: Annotated[Path | None, typer.Option(
        "--agent", help="AgentSpec YAML (model, params, components, limits).")] = None,
    agent_name: Annotated[str | None, typer.Option(
        "--agent-name", help="Agent plug-in: tool (default), null (submits nothing), reference "
                             "(submits the env's reference solution), any other registered name or "
                             "module:Name / file.py:Name (`sharpen plugins agent` lists them).")
    ] = None,
    agent_arg: Annotated[list[str] | None, typer.Option(
        "--agent-arg", "-A", help="Agent args, KEY=VALUE, over the spec's agent args (e.g. "
                                  "confidence=true: a stated confidence, for calibration).")] = None,
    env_arg: EnvArgOpt = None,
    seed: Annotated[int, typer.Option(help="Base seed.")] = 0,
    perturb: Annotated[list[str] | None, typer.Option(
        "--perturb", help="Also run each task's variant under this perturbation the env "
                          "declares (`sharpen envs ENV` lists them; repeatable); `sharpen "
                          "report` then fills the robustness row.")] = None,
    retries: Annotated[int, typer.Option(min=0, help="Retries per model call on infra errors.")] = 4,
    retry_delay: Annotated[float, typer.Option(min=0.0, help="First retry delay, seconds.")] = 0.5,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue the newest run with the same config; skip finished work.")
    ] = False,
    progress: Annotated[bool, typer.Option(help="Show the progress bar.")] = True,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Print a line per finished episode (mark, task, reward, steps, "
                                "tokens, seconds).")] = False,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="No header and no progress bar: only the summary.")] = False,
    target_effect: Annotated[float | None, typer.Option(
        "--target-effect", min=0.001, max=1.0,
        help="Before running, print the tasks × epochs needed to detect this difference (a rate, "
             "0.1 = 10 points) and warn if --tasks/--epochs are too few.")] = None,
    judge: Annotated[str | None, typer.Option(
        "--judge", "-j", help="Judge the run when it finishes (as `sharpen judge`): a rubric "
        "file, rubric:NAME or a registered pointwise judge.")] = None,
    judge_arg: Annotated[list[str] | None, typer.Option(
        "--judge-arg", help="Judge args, KEY=VALUE (repeatable).")] = None,
    judge_model: Annotated[str | None, typer.Option(
        "--judge-model", help="The judge's model backend (default: the run's model).")] = None,
    otlp: Annotated[str | None, typer.Option(
        "--otlp", help="Send each episode as OpenTelemetry GenAI spans, live, to this OTLP/HTTP "
        "receiver (Phoenix http://127.0.0.1:6006; docs/integrations.md).")] = None,
    otlp_project: Annotated[str, typer.Option(
        "--otlp-project", help="--otlp: the project / service.name of the spans.")] = "sharpen",
    otlp_header: Annotated[list[str] | None, typer.Option(
        "--otlp-header", help="--otlp: an HTTP header, NAME=VALUE (repeatable).")] = None,
    json_out: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """Run an agent on an environment's tasks and print a summary (and judge it, --judge)."""
    console = Console(stderr=json_out)  # with --json, stdout holds the JSON alone
    if verbose and quiet:
        raise UserError("--verbose and --quiet contradict each other", "pass one of them")
    spec = AgentSpec.load(agent) if agent else AgentSpec()
    agent_args = parse_kv(agent_arg, "--agent-arg") if agent_arg else {}
    if agent_name is not None:  # with its args: with_agent builds it to ask if it needs a model
        spec = with_agent(spec, PluginRef(name=agent_name, args=agent_args), named=agent is None,
                          keep_model=any((model, base_url, model_name, model_arg)))
    elif agent_args:
        spec = spec.model_copy(update={"agent": spec.agent.model_copy(update={
            "args": {**spec.agent.args, **agent_args}})})
    ref = model_ref(spec, model, base_url, model_name, parse_kv(model_arg, "--model-arg"))
    spec = with_decoding(spec.model_copy(update={"model": ref}), decoding)
    env_ref = PluginRef(name=env, args=parse_kv(env_arg, "--env-arg"))
    environment = REGISTRY.create(ENV, env_ref)
    task_list = with_perturbations(
        environment, select_tasks(environment, env, split=split, limit=tasks, seed=seed),
        perturb or [], seed)
    config = RunConfig(env=env_ref, agent=spec, tasks=task_list, epochs=epochs,
                       concurrency=concurrency, seed=seed,
                       retry=RetryPolicy(max_retries=retries, base_delay=retry_delay))
    setup = None if judge is None else _inline_judge(judge, judge_arg, judge_model, ref)
    plays = build_executor(executor, ray_address, executor_arg)
    st = open_store(store)
    if not quiet:
        console.print(
            f"[bold]sharpen run[/] {env} · model {ref.name}"
            f"{' ' + str(ref.args) if ref.args else ''}"
            f" · {len(task_list)} tasks × {epochs} epochs · concurrency {concurrency}"
            f"{'' if executor == 'local' else ' · executor ' + executor}"
            f" · store {st.url}"
        )
    if target_effect is not None:
        _print_power_plan(console, st, environment, env_ref, target_effect, len(task_list), epochs,
                          split, seed)
    live = None
    if otlp is not None:
        from sharpen.cli.otel_cmd import sink

        live = sink(otlp, otlp_project, otlp_header, st)
    try:
        runner = Runner(st, progress=progress and not (json_out or quiet),
                        verbose=verbose and not json_out, on_episode=[live] if live else [], executor=plays)
        summary = run_sync(closing(plays, runner.run(config, resume=resume)))
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Terminated)
        console.print("[yellow]Interrupted.[/] Finished episodes are saved; rerun the same "
                      "command with --resume to do the rest.")
        raise typer.Exit(exc.exit_code if isinstance(exc, Terminated) else 130) from None
    finally:
        if live is not None:  # the run's root span, then every queued span flushed
            try:
                sent = live.close()
                console.print(f"sent {sent} spans to {otlp} (project {otlp_project})",
                              highlight=False)
            except UserError as exc:  # the run is stored all the same: say so, not fail it
                console.print(f"[yellow]warning:[/] {exc.message}; `sharpen export RUN --format "
                              f"otlp --endpoint {otlp}` sends it again", highlight=False)
    judged = None if setup is None else _judge_after(console, st, summary.run_id, setup,
                                                     concurrency)
    if json_out:
        out = {"run": run_json(st.get_run(summary.run_id)), "summary": summary.model_dump(mode="json")}
        if judged is not None:
            from sharpen.stats.judged import run_scores

            scores = run_scores(st, summary.run_id)
            out["judge"] = {"summary": judged.model_dump(mode="json"),
                            "scores": [s.model_dump(mode="json") for s in scores]}
        print(json.dumps(out, indent=2))
        return
    console.print(summary.table())
    if summary.errors:
        console.print("[yellow]Errored attempts are excluded from the success rate; see "
                      f"`sharpen show {summary.run_id}`.[/]")
    if judged is not None:
        from sharpen.cli.judge_cmd import scores_table, summary_table

        console.print(summary_table(judged))
        table = scores_table(st, summary.run_id)
        if table is not None:
            console.print(table)
