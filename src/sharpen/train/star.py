"""``star``: iterated rejection-sampling fine-tuning (STaR, Zelikman et al. 2022; RFT).

Each round: K attempts per train task at temperature T with the current model
(``ctx.rollouts``), the verified successes kept (``sharpen export --format sft --success``),
TRL SFT on them (:mod:`sharpen.train.sft`: the loss on the agent's last reply; LoRA with
``lora=true``, else every weight), the result written as GGUF; the next round samples with
the new model. A round with no success leaves the model as it was.

Every finished round is a checkpoint: ``round-N/`` (model) and ``round-N.gguf`` in the
workdir, and a line in its ``star.json``; with ``ctx.resume`` finished rounds are skipped
and an unfinished one starts again (its attempts, already stored, are not sampled again).
Budget: a round samples no more than ``max_samples`` leaves (fewer train tasks), and no round
starts after ``max_seconds``.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from sharpen.core.errors import UserError
from sharpen.train.export import Where, export
from sharpen.train.method import BaseTrainMethod, StopReason, TrainContext, TrainEvent, TrainResult
from sharpen.train.sft import SftSettings, fine_tune

STATE = "star.json"


class RoundRecord(BaseModel):
    """One finished round."""

    round: int
    run_id: str
    """The run of its attempts."""
    attempts: int
    successes: int
    kept: int
    """Examples fine-tuned on (successes, plus corrected attempts for ``rerest``)."""
    losses: list[float] = Field(default_factory=list)
    checkpoint: Path | None = None
    """The round's model (``None``: nothing kept, the model did not change)."""
    gguf: Path | None = None
    seconds: float = 0.0
    steps: int = 0
    events: list[TrainEvent] = Field(default_factory=list)
    """Its curve: one event per optimiser step, then the round's."""
    extra: dict[str, Any] = Field(default_factory=dict)


class StarState(BaseModel):
    rounds: list[RoundRecord] = Field(default_factory=list)


class StarMethod(BaseTrainMethod):
    """STaR: sample, keep verified successes, fine-tune, repeat (see the module docstring)."""

    title = "STaR: K attempts per train task, keep verified successes, fine-tune; repeat"

    def __init__(self, rounds: int = 1, k: int = 4, temperature: float = 0.8, epochs: float = 2.0,
                 learning_rate: float = 3e-5, batch_size: int = 4, max_steps: int = -1,
                 max_length: int = 1024, lora: bool = False, lora_r: int = 16,
                 gguf_dtype: str = "f32") -> None:
        if rounds < 1 or k < 1:
            raise UserError("rounds and k must be at least 1", "set --method-arg rounds=1 k=4")
        if temperature < 0:
            raise UserError("temperature must be 0 or more", "set --method-arg temperature=0.8")
        self.rounds, self.k, self.temperature, self.gguf_dtype = rounds, k, temperature, gguf_dtype
        self.sft = SftSettings(epochs=epochs, learning_rate=learning_rate, batch_size=batch_size,
                               max_steps=max_steps, max_length=max_length, lora=lora, lora_r=lora_r)

    async def examples(self, ctx: TrainContext, run_id: str, gguf: Path, round_no: int
                       ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The round's training examples (``sft`` lines) from its attempts ``run_id`` and
        what to record about them. Here: the successes; ``rerest`` adds corrected failures."""
        lines, _ = export(ctx.store, [run_id], "sft", Where(success=True, split="train"))
        return list(lines), {}

    async def train(self, ctx: TrainContext) -> TrainResult:
        if ctx.rollouts is None:
            raise UserError("star samples attempts: it needs the engine's rollouts", "run it "
                            "through sharpen train")
        state_file = ctx.workdir / STATE
        state = (StarState.model_validate_json(state_file.read_text())
                 if ctx.resume and state_file.is_file() else StarState())
        ckpt, gguf = ctx.base_checkpoint, ctx.base_gguf
        samples = steps = 0
        prior = 0.0
        for rec in state.rounds:  # finished before: their models and counts, not their work
            ckpt, gguf = rec.checkpoint or ckpt, rec.gguf or gguf
            samples, steps, prior = samples + rec.attempts, steps + rec.steps, prior + rec.seconds
        start = time.monotonic()

        def elapsed() -> float:
            return prior + time.monotonic() - start
        stopped: StopReason = "done"
        for r in range(len(state.rounds) + 1, self.rounds + 1):
            t0 = time.monotonic()
            budget = ctx.budget
            if budget.max_seconds is not None and prior + t0 - start >= budget.max_seconds:
                stopped = "max_seconds"
                break
            tasks = ctx.train_tasks
            if budget.max_samples is not None:
                tasks = tasks[: max(0, (budget.max_samples - samples) // self.k)]
                if not tasks:
                    stopped = "max_samples"
                    break
            run_id = await ctx.rollouts(tasks, model_path=gguf, epochs=self.k,
                                        temperature=self.temperature, label=f"star:round{r}",
                                        seed=ctx.seed + r)
            attempts = ctx.store.iter_trajectories(run_id, with_steps=False)
            ctx.check_tasks([t.task for t in attempts])  # the dataset passes the guard too
            successes = sum(bool(t.outcome and t.outcome.success)
                            for t in ctx.store.iter_trajectories(run_id, with_steps=False))
            samples += len(tasks) * self.k
            lines, extra = await self.examples(ctx, run_id, gguf, r)
            rec = RoundRecord(round=r, run_id=run_id, attempts=len(tasks) * self.k,
                              successes=successes, kept=len(lines), extra=extra)
            if lines:
                out = ctx.workdir / f"round-{r}"
                shutil.rmtree(out, ignore_errors=True)  # a round killed mid-training

                def on_loss(step: int, loss: float, r: int = r, before: int = steps,
                            n: int = samples, rec: RoundRecord = rec) -> None:
                    rec.events.append(TrainEvent(step=before + step, round=r, samples=n, loss=loss,
                                                 seconds=elapsed(),
                                                 metrics={"progress": (r - 1) / self.rounds}))
                    ctx.report(rec.events[-1])
                rec.losses = await asyncio.to_thread(
                    fine_tune, ckpt, lines, out, device=ctx.device, seed=ctx.seed + r,
                    settings=self.sft, trainer_args=ctx.trainer_args, on_loss=on_loss)
                rec.steps = len(rec.losses)
                steps += rec.steps
                rec.checkpoint, rec.gguf = out, await asyncio.to_thread(self._gguf, ctx, out)
                ckpt, gguf = out, rec.gguf
            rec.seconds = time.monotonic() - t0
            event = TrainEvent(step=steps, round=r, samples=samples,
                               reward=successes / max(1, rec.attempts), seconds=elapsed(),
                               loss=rec.losses[-1] if rec.losses else None,
                               metrics={"kept": float(rec.kept), "progress": r / self.rounds})
            ctx.report(event)
            rec.events.append(event)
            state.rounds.append(rec)
            tmp = state_file.with_suffix(".tmp")
            tmp.write_text(state.model_dump_json(indent=2))
            tmp.replace(state_file)  # the round is a checkpoint once this lands
        return TrainResult(checkpoint=ckpt, gguf=gguf,
                           events=[e for x in state.rounds for e in x.events], samples=samples,
                           seconds=prior + time.monotonic() - start,
                           stopped_by=stopped,
                           extra={"rounds": [r.model_dump(mode="json") for r in state.rounds]})

    def _gguf(self, ctx: TrainContext, checkpoint: Path) -> Path:
        from sharpen.train.checkpoint import write_gguf

        out = checkpoint.with_suffix(".gguf")
        out.unlink(missing_ok=True)
        return write_gguf(checkpoint, out, ctx.base_gguf, self.gguf_dtype)
