"""``sharpen train``, ``sharpen checkpoint`` and ``sharpen gguf``: train a model on an
environment (:mod:`sharpen.train.engine`), the embedded model to a Hugging Face checkpoint
for TRL, and a trained checkpoint back to a GGUF file the ``local`` model runs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from sharpen.cli.options import (
    DecodingOpt,
    EnvArgOpt,
    JsonOpt,
    ModelArgOpt,
    ModelOpt,
    StoreOpt,
    above_zero,
    model_ref,
    open_store,
    parse_kv,
    with_decoding,
)
from sharpen.core.errors import UserError
from sharpen.train.checkpoint import write_checkpoint, write_gguf


def checkpoint(
    out: Annotated[Path, typer.Argument(help="New folder for the checkpoint.")],
    gguf: Annotated[Path | None, typer.Option(
        help="GGUF model to convert (default: the embedded SmolLM2-135M-Instruct).")] = None,
) -> None:
    """Write the embedded model (or another GGUF model) as a float32 Hugging Face checkpoint
    with its tokenizer and chat template, for fine-tuning on `sharpen export` data with TRL."""
    console = Console(stderr=True)
    with console.status("de-quantizing the GGUF model…"):
        written = write_checkpoint(out, gguf)
    console.print(f"wrote {written} (load it with AutoModelForCausalLM.from_pretrained; "
                  "docs/training-data.md shows a TRL run)", highlight=False, markup=False)


def to_gguf(
    checkpoint: Annotated[Path, typer.Argument(help="Checkpoint folder a trainer saved.")],
    out: Annotated[Path, typer.Argument(help="New .gguf file.")],
    template: Annotated[Path | None, typer.Option(
        help="The GGUF model the checkpoint came from (default: the embedded model).")] = None,
    dtype: Annotated[str, typer.Option(help="Storage of the matrices: f32 or f16.")] = "f32",
) -> None:
    """Write a trained checkpoint as a GGUF file, with the metadata of the model it came from,
    so the embedded runner loads it: --model local --model-arg model_path=OUT."""
    console = Console(stderr=True)
    with console.status("writing the GGUF file…"):
        written = write_gguf(checkpoint, out, template, dtype)
    console.print(f"wrote {written} (run it: sharpen run ENV --model local --model-arg "
                  f"model_path={written})", highlight=False, markup=False)


def train(
    method: Annotated[str, typer.Argument(
        help="Training method: star, rerest, grpo, dpo, reward-model, or any registered name or "
        "module:Name / file.py:Name (`sharpen plugins trainer` lists them).")],
    env: Annotated[str, typer.Argument(
        help="Environment: a registered name (`sharpen envs`) or module:Name / file.py:Name.")],
    env_arg: EnvArgOpt = None,
    spec_file: Annotated[Path | None, typer.Option(
        "--spec", "--agent", help="AgentSpec YAML whose model is trained (its model must be "
        "local).")] = None,
    model: ModelOpt = None,
    model_arg: ModelArgOpt = None,
    decoding: DecodingOpt = None,
    method_arg: Annotated[list[str] | None, typer.Option(
        "--method-arg", help="Method hyperparameters, KEY=VALUE (repeatable), e.g. rounds=2.")] = None,
    train_n: Annotated[int, typer.Option("--train", min=1, help="Training tasks.")] = 8,
    val: Annotated[int, typer.Option(min=1, help="Validation tasks.")] = 4,
    test: Annotated[int, typer.Option(min=1, help="Held-out test tasks (the verdict).")] = 30,
    task_seed: Annotated[int, typer.Option(help="Seed of the generated task lists.")] = 0,
    seed: Annotated[int, typer.Option(help="Training seed (sampling, TRL, the verdict).")] = 0,
    max_samples: Annotated[int | None, typer.Option(
        min=1, help="Budget: samples (episodes or completions) the method may generate.")] = None,
    max_seconds: Annotated[float | None, typer.Option(
        callback=above_zero, help="Budget: wall seconds of training (resumed sessions added up).")
    ] = None,
    device: Annotated[str | None, typer.Option(
        help="cpu, cuda or cuda:N (default: cuda where torch sees a GPU, else cpu).")] = None,
    trainer_arg: Annotated[list[str] | None, typer.Option(
        "--trainer-arg", help="TRL config settings, KEY=VALUE (repeatable), e.g. "
        "gradient_accumulation_steps=4.")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue this training from its "
                                         "last checkpoint (after a kill too).")] = False,
    fresh: Annotated[bool, typer.Option("--fresh", help="Delete its folder and start over.")] = False,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Where training folders go; this one is OUT/<training id> (default: "
        "train/ next to a SQLite store, else .sharpen/train).")] = None,
    base_checkpoint: Annotated[Path | None, typer.Option(
        "--base-checkpoint", help="The start model already as a checkpoint (`sharpen checkpoint` "
        "of the spec's model): skips that conversion.")] = None,
    base_gguf: Annotated[Path | None, typer.Option(
        "--base-gguf", help="With --base-checkpoint: that checkpoint as a float32 GGUF (`sharpen "
        "gguf`), the verdict's base: skips writing it.")] = None,
    json_out: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """Train the agent's model on an environment's train tasks with a method (star, rerest,
    grpo, dpo, reward-model); report base vs trained on held-out test tasks."""
    from sharpen.core.agent_spec import AgentSpec
    from sharpen.core.registry import PluginRef
    from sharpen.runner.signals import Terminated, run_sync
    from sharpen.train.engine import TrainConfig, Training, prepare_folder
    from sharpen.train.method import TrainBudget, TrainEvent
    from sharpen.train.progress import TrainProgress, event_text, plot_curves

    if base_gguf is not None and base_checkpoint is None:
        raise UserError("--base-gguf needs --base-checkpoint (the checkpoint it was written from)",
                        "pass both, or neither")
    os.environ.setdefault("TQDM_DISABLE", "1")  # the loaders' bars would break the engine's
    console = Console(stderr=True)
    spec = AgentSpec.load(spec_file) if spec_file else AgentSpec()
    spec = with_decoding(spec.model_copy(update={"model": model_ref(
        spec, model, None, None, parse_kv(model_arg, "--model-arg"))}), decoding)
    config = TrainConfig(
        method=PluginRef(name=method, args=parse_kv(method_arg, "--method-arg")),
        env=PluginRef(name=env, args=parse_kv(env_arg, "--env-arg")), spec=spec,
        train=train_n, val=val, test=test, task_seed=task_seed, seed=seed,
        budget=TrainBudget(max_samples=max_samples, max_seconds=max_seconds),
        trainer_args=parse_kv(trainer_arg, "--trainer-arg"))
    st = open_store(store)
    folder = prepare_folder(st.url, config, out, fresh=fresh)
    console.print(f"[bold]sharpen train[/] {method} · {env} · training {config.train_id()} · "
                  f"folder {folder} · store {st.url}", highlight=False)
    with TrainProgress(console, config.budget, enabled=not json_out, title=method) as bar:
        def on_event(event: TrainEvent) -> None:
            bar.update(event)
            if json_out or event.reward is not None:  # round ends stay on screen
                console.print(f"  {event_text(event)}", highlight=False, markup=False)

        training = Training(config, st, folder, device=device, resume=resume, on_event=on_event,
                            base=None if base_checkpoint is None else (base_checkpoint, base_gguf),
                            on_line=lambda m: console.print(f"  {m}", highlight=False, markup=False))
        try:
            report = run_sync(training.run())
        except KeyboardInterrupt as exc:
            console.print(f"[yellow]Interrupted.[/] Checkpoints are in {folder}; rerun the same "
                          "command with --resume to continue.")
            raise typer.Exit(exc.exit_code if isinstance(exc, Terminated) else 130) from None
    plots = plot_curves(report.result.events or training.state.events, folder,
                        f"sharpen train {method} · {report.train_id}")
    v = report.verdict
    console.print(f"[bold]held-out verdict:[/] {report.verdict_text}", highlight=False,
                  soft_wrap=True)
    if v is not None:
        console.print(f"tokens per task: base {v.base_tokens_per_task:.0f}, trained "
                      f"{v.trained_tokens_per_task:.0f}; lineage: base {report.lineage.base_hash} "
                      f"→ checkpoint {report.lineage.checkpoint_hash} → {report.lineage.gguf}",
                      highlight=False, markup=False, soft_wrap=True)
    if plots:
        console.print(f"curves: {', '.join(map(str, plots))}", highlight=False, markup=False)
    if report.command:
        console.print(f"run the trained model: {report.command}", highlight=False, markup=False,
                      soft_wrap=True)
    if json_out:
        print(json.dumps({"train": report.model_dump(mode="json"),
                          "plots": [str(p) for p in plots]}, indent=2))
