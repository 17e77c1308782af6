"""The training engine (``sharpen train METHOD ENV``): everything around a training method.

1. Splits: train / val / test tasks from the environment's own splits
   (:func:`sharpen.improvement.experiment.split_tasks`, as ``sharpen improve`` takes them).
2. The start model: the spec's ``local`` GGUF (default: the embedded model) written once as a
   float32 checkpoint and back as a float32 GGUF (what the trained model is compared with:
   same weights as the start, same format as the result), in the training folder.
3. The method (a ``trainer`` plug-in) gets a :class:`~sharpen.train.method.TrainContext`
   holding the train and val tasks only; its ``rollouts`` are sharpen's runner with a GGUF
   at ``model_path``, through ``check_tasks`` — which the engine instruments: every task a
   method asked for is recorded in the folder's ``state.json`` (``seen_tasks``), so a test can
   show the test split never reached it.
4. The GGUF of the trained checkpoint (none for a reward model: ``TrainResult.policy``), its
   lineage (base model hash → checkpoint hash →
   GGUF path) in ``result.json`` and in the labels of the test runs.
5. The held-out verdict (:mod:`sharpen.train.verdict`): base vs trained on the test tasks with
   the same seeds, outside every budget (for a chat model; a reward model's own held-out
   measure is the method's, in ``TrainResult.extra``).

The folder, ``train/<training id>/`` next to a SQLite store (else ``.sharpen/train``)::

    config.json   TrainConfig (its hash is the training id)
    state.json    TrainState: seen tasks, every event so far (rewritten on each)
    base/         the start checkpoint;  base.gguf  its float32 GGUF
    method/       the method's workdir (its checkpoints, its own resume state)
    trained.gguf  the result's GGUF (unless the method wrote one)
    result.json   TrainReport, once the verdict is in;  curves.png/.svg  the curves

``resume=True`` continues a training whose process died (SIGKILL included): the folder is
kept, the method is called with ``ctx.resume`` (it continues from its last checkpoint), runs
already stored are resumed by their config hash, and a finished training returns its report.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import UserError
from sharpen.core.folders import beside_store
from sharpen.core.hashing import content_hash
from sharpen.core.registry import REGISTRY, PluginRef, Registry
from sharpen.core.task import TaskSpec
from sharpen.improvement.experiment import ExperimentConfig, split_tasks
from sharpen.runner import RunConfig, Runner
from sharpen.store import Store
from sharpen.train.method import TRAINER, TrainBudget, TrainContext, TrainEvent, TrainResult
from sharpen.train.verdict import Verdict, held_out, verdict_text, with_model

CONFIG_FILE, STATE_FILE, RESULT_FILE = "config.json", "state.json", "result.json"


class TrainConfig(BaseModel):
    """Everything that defines a training (its hash names its folder)."""

    method: PluginRef
    env: PluginRef
    spec: AgentSpec
    """The agent whose model is trained (its model must be ``local``: a GGUF file)."""
    train: int = 8
    val: int = 4
    test: int = 30
    task_seed: int = 0
    seed: int = 0
    budget: TrainBudget = Field(default_factory=TrainBudget)
    trainer_args: dict[str, Any] = Field(default_factory=dict)

    def train_id(self) -> str:
        """Content hash of the config (12 hex digits)."""
        return content_hash(self.model_dump(mode="json"))[:12]


class Lineage(BaseModel):
    """Where the trained model came from, by content."""

    base_model: str
    """The GGUF file training started from."""
    base_hash: str
    """Content hash of the start checkpoint's ``model.safetensors``."""
    checkpoint: str
    checkpoint_hash: str
    """Content hash of the trained checkpoint's ``model.safetensors``."""
    gguf: str | None
    """``None`` for a checkpoint that is no chat model (a reward model)."""


class TrainState(BaseModel):
    """What the engine knows mid-training (``state.json``)."""

    seen_tasks: list[str] = Field(default_factory=list)
    """Ids of every task the method asked for (rollouts, datasets), in first-seen order."""
    events: list[TrainEvent] = Field(default_factory=list)


class TrainReport(BaseModel):
    """What ``sharpen train`` reports."""

    train_id: str
    config: TrainConfig
    folder: Path
    result: TrainResult
    lineage: Lineage
    verdict: Verdict | None
    """``None`` when the method trained no chat model (``TrainResult.policy`` false: a reward
    model, whose own held-out measure is in ``result.extra``)."""
    verdict_text: str
    seen_tasks: list[str]
    test_tasks: list[str]
    command: str
    """How to run the trained model: ``sharpen run ENV --model local --model-arg ...`` (empty
    for a checkpoint that is no chat model)."""


def trainings_base(store_url: str) -> Path:
    """Where trainings of the store at ``store_url`` keep their folders by default."""
    return beside_store(store_url, "train")


def file_hash(path: Path) -> str:
    """SHA-256 of a file's bytes (16 hex digits)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


@dataclass
class _Guarded(TrainContext):
    """The context with its guard instrumented: every task that passes it is recorded."""

    on_check: Callable[[Sequence[TaskSpec]], None] = lambda tasks: None

    def check_tasks(self, tasks: Sequence[TaskSpec]) -> None:
        super().check_tasks(tasks)
        self.on_check(tasks)  # what passed: what reached the method


class Training:
    """Runs a :class:`TrainConfig` into ``store`` in ``folder``. ``base`` is an existing start
    checkpoint of the spec's model and its float32 GGUF (``None``: written into the folder
    from the checkpoint); tests share one. ``on_event`` sees each event and ``on_line`` the
    engine's progress lines."""

    def __init__(self, config: TrainConfig, store: Store, folder: Path, *, device: str | None = None,
                 resume: bool = False, base: tuple[Path, Path | None] | None = None,
                 on_event: Callable[[TrainEvent], None] = lambda e: None,
                 on_line: Callable[[str], None] = lambda m: None,
                 registry: Registry = REGISTRY) -> None:
        self.config, self.store, self.folder = config, store, folder
        self.device, self.resume, self.base = device, resume, base
        self.on_event, self.on_line, self.registry = on_event, on_line, registry
        self.id = config.train_id()
        self.state = TrainState()
        if config.spec.model.name != "local":
            raise UserError(f"training needs the local model, not {config.spec.model.name!r}",
                            "train a GGUF model run by llama.cpp: --model local [--model-arg "
                            "model_path=FILE.gguf] (default: the embedded model)")

    def _prepare(self) -> None:
        f = self.folder
        started = (f / CONFIG_FILE).exists()
        if started and not self.resume:
            raise UserError(f"training {self.id} was started before in {f}",
                            "rerun with --resume to continue it, or --fresh to start over")
        f.mkdir(parents=True, exist_ok=True)
        if started:
            self.state = TrainState.model_validate_json((f / STATE_FILE).read_text())
        (f / CONFIG_FILE).write_text(self.config.model_dump_json(indent=2))
        self._save_state()

    def _save_state(self) -> None:
        tmp = self.folder / f"{STATE_FILE}.tmp"
        tmp.write_text(self.state.model_dump_json(indent=2))
        tmp.replace(self.folder / STATE_FILE)  # a kill mid-write leaves the last whole state

    def _seen(self, tasks: Sequence[TaskSpec]) -> None:
        new = [t.id for t in tasks if t.id not in set(self.state.seen_tasks)]
        if new:
            self.state.seen_tasks.extend(dict.fromkeys(new))
            self._save_state()

    def _event(self, event: TrainEvent) -> None:
        self.state.events.append(event)
        self._save_state()
        self.on_event(event)

    def _source_gguf(self) -> Path:
        from sharpen.models.local import gguf_path

        path = self.config.spec.model.args.get("model_path")
        return Path(path).expanduser().resolve() if path else gguf_path()

    def _start_model(self) -> tuple[Path, Path]:
        """The start checkpoint and its float32 GGUF, written once per folder."""
        from sharpen.train.checkpoint import write_checkpoint, write_gguf

        if self.base is not None and self.base[1] is not None:
            return self.base[0], self.base[1]
        ckpt, gguf = self.folder / "base", self.folder / "base.gguf"
        if self.base is not None:
            ckpt = self.base[0]
        elif not (ckpt / "model.safetensors").is_file():
            shutil.rmtree(ckpt, ignore_errors=True)  # a conversion killed half-way
            self.on_line("writing the start model as a checkpoint")
            write_checkpoint(ckpt, self._source_gguf())
        if not gguf.is_file():
            tmp = gguf.with_suffix(".gguf.tmp")
            tmp.unlink(missing_ok=True)
            write_gguf(ckpt, tmp, self._source_gguf())
            tmp.replace(gguf)
        return ckpt, gguf

    def _context(self, tasks: dict[str, list[TaskSpec]], ckpt: Path, gguf: Path) -> TrainContext:
        from sharpen.train.hf import pick_device

        c = self.config
        ctx = _Guarded(env=c.env, spec=c.spec, train_tasks=tasks["train"], val_tasks=tasks["val"],
                       base_checkpoint=ckpt, base_gguf=gguf, workdir=self.folder / "method",
                       store=self.store, seed=c.seed, budget=c.budget, resume=self.resume,
                       device=pick_device(self.device), report=self._event,
                       trainer_args=dict(c.trainer_args), on_check=self._seen)

        async def rollouts(tasks: Sequence[TaskSpec], *, model_path: str | Path, epochs: int = 1,
                           temperature: float | None = None, label: str = "rollouts",
                           seed: int | None = None) -> str:
            ctx.check_tasks(tasks)
            config = RunConfig(env=c.env, agent=with_model(c.spec, Path(model_path), temperature),
                               tasks=list(tasks), epochs=epochs, seed=c.seed if seed is None else seed,
                               labels={"train": self.id, "role": label, "model_path": str(model_path)})
            return (await Runner(self.store, progress=False, registry=self.registry)
                    .run(config, resume=True)).run_id

        ctx.rollouts = rollouts
        ctx.workdir.mkdir(parents=True, exist_ok=True)
        return ctx

    async def run(self) -> TrainReport:
        """Train (resuming when asked), write the GGUF, score base and trained on test."""
        if self.resume and (self.folder / RESULT_FILE).is_file():
            return TrainReport.model_validate_json((self.folder / RESULT_FILE).read_text())
        c = self.config
        split = split_tasks(c.env, ExperimentConfig(env=c.env, train=c.train, val=c.val, test=c.test,
                                                    task_seed=c.task_seed), self.registry)
        self._prepare()
        ckpt, gguf = self._start_model()
        method = self.registry.create(TRAINER, c.method)
        ctx = self._context(split, ckpt, gguf)
        self.on_line(f"training with {c.method.name} on {len(split['train'])} train / "
                     f"{len(split['val'])} val tasks (device {ctx.device})")
        started = time.monotonic()
        result = await method.train(ctx)
        self.on_line(f"{c.method.name} stopped ({result.stopped_by}) after "
                     f"{time.monotonic() - started:.0f} s in this session")
        trained_gguf = ((result.gguf or self._write_gguf(result.checkpoint, gguf))
                        if result.policy else None)
        lineage = Lineage(base_model=str(self._source_gguf()),
                          base_hash=file_hash(ckpt / "model.safetensors"),
                          checkpoint=str(result.checkpoint),
                          checkpoint_hash=file_hash(result.checkpoint / "model.safetensors"),
                          gguf=None if trained_gguf is None else str(trained_gguf))
        verdict, text, command = None, (
            f"no base-vs-trained verdict: {c.method.name} trains no chat model (its checkpoint "
            f"{result.checkpoint}; its own held-out measure is in the result's extra)"), ""
        if trained_gguf is not None:
            self.on_line(f"scoring base and trained on {len(split['test'])} held-out test tasks")
            verdict = await held_out(
                self.store, c.env, c.spec, split["test"], base_gguf=gguf, trained_gguf=trained_gguf,
                seed=c.seed, labels={"train": self.id, "base_hash": lineage.base_hash,
                                     "checkpoint_hash": lineage.checkpoint_hash})
            text = verdict_text(verdict)
            command = f"sharpen run {c.env.name} --model local --model-arg model_path={trained_gguf}"
        report = TrainReport(
            train_id=self.id, config=c, folder=self.folder, result=result, lineage=lineage,
            verdict=verdict, verdict_text=text, seen_tasks=self.state.seen_tasks,
            test_tasks=[t.id for t in split["test"]], command=command)
        (self.folder / RESULT_FILE).write_text(report.model_dump_json(indent=2))
        return report

    def _write_gguf(self, checkpoint: Path, template: Path) -> Path:
        from sharpen.train.checkpoint import write_gguf

        out = self.folder / "trained.gguf"
        if not out.is_file():
            tmp = out.with_suffix(".gguf.tmp")
            tmp.unlink(missing_ok=True)
            write_gguf(checkpoint, tmp, template)
            tmp.replace(out)
        return out


def prepare_folder(store_url: str, config: TrainConfig, base: Path | None, *, fresh: bool) -> Path:
    """The training's folder under ``base`` (default :func:`trainings_base`), emptied when
    ``fresh``."""
    folder = (base if base is not None else trainings_base(store_url)) / config.train_id()
    if fresh and folder.exists():
        shutil.rmtree(folder)
    return folder


async def train(method: str | PluginRef, env: str | PluginRef, spec: AgentSpec, store: Store, *,
                folder: Path | None = None, train: int = 8, val: int = 4, test: int = 30,
                task_seed: int = 0, seed: int = 0, budget: TrainBudget | None = None,
                trainer_args: dict[str, Any] | None = None, device: str | None = None,
                resume: bool = False, fresh: bool = False,
                base: tuple[Path, Path | None] | None = None,
                on_event: Callable[[TrainEvent], None] = lambda e: None,
                on_line: Callable[[str], None] = lambda m: None,
                registry: Registry = REGISTRY) -> TrainReport:
    """Train ``spec``'s model with ``method`` on ``env`` and return the report (the Python API
    of ``sharpen train``; see the module docstring)."""
    config = TrainConfig(
        method=method if isinstance(method, PluginRef) else PluginRef(name=method),
        env=env if isinstance(env, PluginRef) else PluginRef(name=env), spec=spec,
        train=train, val=val, test=test, task_seed=task_seed, seed=seed,
        budget=budget or TrainBudget(), trainer_args=trainer_args or {})
    where = prepare_folder(store.url, config, folder, fresh=fresh)
    return await Training(config, store, where, device=device, resume=resume, base=base,
                          on_event=on_event, on_line=on_line, registry=registry).run()
