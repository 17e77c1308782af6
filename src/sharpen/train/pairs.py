"""Preference pairs for the preference methods (``dpo``, ``reward-model``), and what both do
around a TRL trainer: the budget, the progress events and the resume point.

Pairs come from the model's own attempts, sampled through :meth:`TrainContext.rollouts` (so
every task passes the test-split guard) and paired by the exporter
(:func:`sharpen.train.export.export`, format ``preference``):

- ``verifier`` (the default): ``attempts`` episodes per task in one run; per task, the best
  attempt against the worst (then the second best against the second worst, up to
  ``pairs_per_prompt``), kept only where the environment scored them differently;
- ``judge``: two runs of ``attempts`` episodes per task (seeds ``ctx.seed`` and
  ``ctx.seed + 1``); a pairwise judge (``judge``, on ``judge_model``) compares the two runs'
  attempts of the same task and epoch, and each decisive verdict is a pair — no verifier is
  read (the way to train from preferences where none exists).

A pair's conversations are the exporter's: the prompt is the messages before the first reply,
``chosen``/``rejected`` end at the agent's last reply (the environment's final verdict is
never in them).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from sharpen.core.errors import UserError
from sharpen.core.registry import PluginRef
from sharpen.core.task import TaskSpec
from sharpen.train.export import ExportCount, Where, export
from sharpen.train.method import StopReason, TrainContext, TrainEvent

PairSource = Literal["verifier", "judge"]


def check_pair_source(method: str, pairs: str) -> PairSource:
    """``pairs`` as a :data:`PairSource`; :class:`UserError` naming ``method`` otherwise."""
    if pairs == "verifier":
        return "verifier"
    if pairs == "judge":
        return "judge"
    raise UserError(f"{method}: unknown pairs source {pairs!r}",
                    "use --method-arg pairs=verifier (the environment's score) or pairs=judge")


def capped(ctx: TrainContext, tasks: Sequence[TaskSpec], episodes_per_task: int,
           spent: int = 0) -> tuple[list[TaskSpec], bool]:
    """The first tasks whose episodes fit in what is left of ``ctx.budget.max_samples`` after
    ``spent``; whether the budget cut the list."""
    limit = ctx.budget.max_samples
    if limit is None:
        return list(tasks), False
    fit = max(0, (limit - spent) // max(1, episodes_per_task))
    return list(tasks[:fit]), fit < len(tasks)


async def sample_pairs(
    ctx: TrainContext, tasks: Sequence[TaskSpec], *, model_path: Path, attempts: int,
    temperature: float, source: PairSource, pairs_per_prompt: int, label: str,
    judge: str = "pairwise", judge_model: str | dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], ExportCount]:
    """Preference lines (``prompt``/``chosen``/``rejected``, ``meta``) from ``attempts``
    episodes per task of the model at ``model_path`` (see the module doc), and the export's
    count. ``tasks`` must be train or val tasks (:meth:`TrainContext.check_tasks`)."""
    ctx.check_tasks(tasks)
    if ctx.rollouts is None:
        raise UserError("this training method samples attempts, and the context has no rollouts",
                        "run it through `sharpen train`, which gives it the runner")
    if not tasks:
        return [], ExportCount()
    if source == "verifier":
        run = await ctx.rollouts(list(tasks), model_path=model_path, epochs=attempts,
                                 temperature=temperature, label=label, seed=ctx.seed)
        lines, count = export(ctx.store, [run], "preference", Where(),
                              pairs_per_prompt=pairs_per_prompt)
        return list(lines), count
    from sharpen.judges.runner import JudgeSetup, judge_run

    runs = [await ctx.rollouts(list(tasks), model_path=model_path, epochs=attempts,
                               temperature=temperature, label=f"{label}-{side}", seed=ctx.seed + k)
            for k, side in enumerate("ab")]
    model = ctx.spec.model if judge_model is None else (
        PluginRef(name=judge_model) if isinstance(judge_model, str)
        else PluginRef.model_validate(judge_model))
    await judge_run(ctx.store, runs[0], JudgeSetup(judge=PluginRef(name=judge), model=model),
                    versus=runs[1], resume=True)
    lines, count = export(ctx.store, runs, "preference", Where(), preference="judge")
    return list(lines), count


def dataset_rows(lines: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The lines as TRL reads them: ``prompt``, ``chosen``, ``rejected`` (``meta`` dropped)."""
    return [{"prompt": x["prompt"], "chosen": x["chosen"], "rejected": x["rejected"]}
            for x in lines]


class State:
    """A method's small JSON state in its workdir (``state.json``): what a resumed session
    needs to know about the sessions before it (seconds spent, samples, the pair counts)."""

    def __init__(self, workdir: Path) -> None:
        self.path = workdir / "state.json"
        self.data: dict[str, Any] = (json.loads(self.path.read_text())
                                     if self.path.is_file() else {})

    def save(self, **update: Any) -> None:
        self.data.update(update)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, default=str))
        tmp.replace(self.path)  # a kill mid-write leaves the old state, never half of one


def trainer_callback(ctx: TrainContext, events: list[TrainEvent], started: float,
                     seconds_before: float, samples: int,
                     metrics: Sequence[str]) -> tuple[Any, list[StopReason]]:
    """A ``transformers`` callback that reports each logged step as a :class:`TrainEvent`
    (``loss``, and the TRL ``metrics`` named that it logs) and stops the trainer once
    ``ctx.budget.max_seconds`` is spent; the list it appends ``"max_seconds"`` to when it
    does."""
    from transformers import TrainerCallback

    stopped: list[StopReason] = []
    limit = ctx.budget.max_seconds

    class Report(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
                   **kwargs: Any) -> None:
            if not logs or "loss" not in logs:
                return
            event = TrainEvent(
                step=state.global_step, samples=samples, loss=float(logs["loss"]),
                seconds=seconds_before + time.monotonic() - started,
                metrics={k: float(logs[k]) for k in metrics if k in logs})
            events.append(event)
            ctx.report(event)

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if limit is not None and seconds_before + time.monotonic() - started >= limit:
                control.should_training_stop = True
                control.should_save = True  # a later --resume continues from here
                if not stopped:
                    stopped.append("max_seconds")
            elif state.global_step >= state.max_steps:
                # transformers saves a resume point at the last step; a finished training is
                # never resumed (the method saves the model), and it is 3× the model on disk
                control.should_save = False

    return Report(), stopped
