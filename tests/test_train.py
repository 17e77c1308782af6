"""``sharpen train``: the engine, ``star`` and ``rerest`` through real TRL on the CPU with the
embedded model, tiny (two train tasks, one attempt each, greedy, one or two SFT steps).

The demo's code tasks with task seed 0: the start model (greedy) solves the second train task
and fails the first, so a round keeps one success (``star``) and has one failure to correct
(``rerest``)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from page_text import text

from sharpen.cli.demo_cmd import DEMO_ENV, DEMO_SPEC
from sharpen.core.errors import UserError
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Trajectory
from sharpen.store import Store
from sharpen.train.engine import TrainState, train
from sharpen.train.method import BaseTrainMethod, TrainBudget, TrainContext, TrainResult
from sharpen.train.rerest import verified
from sharpen.train.star import StarMethod
from sharpen.viewer import create_app

TINY = {"k": 1, "temperature": 0.0, "max_steps": 1, "batch_size": 1, "max_length": 512}
"""One greedy attempt per task, one optimiser step per round."""


class LeakyMethod(BaseTrainMethod):
    """A trainer that asks for a test task (it builds one: the context never hands it one)."""

    async def train(self, ctx: TrainContext) -> TrainResult:
        assert ctx.rollouts is not None
        task = ctx.train_tasks[0].model_copy(update={"id": "gen/smuggled", "split": "test"})
        await ctx.rollouts([task], model_path=ctx.base_gguf)
        raise AssertionError("the guard let a test task through")


class ScoreHeadMethod(BaseTrainMethod):
    """A trainer whose result is no chat model (as a reward model's): a checkpoint folder
    with weights, ``policy=False``."""

    async def train(self, ctx: TrainContext) -> TrainResult:
        out = ctx.workdir / "rm"
        out.mkdir()
        (out / "model.safetensors").write_bytes(b"a scalar head")
        return TrainResult(checkpoint=out, policy=False, extra={"val_accuracy": 0.5})


def _tasks(split: str, n: int) -> list[TaskSpec]:
    return REGISTRY.create("env", DEMO_ENV).list_tasks(split=split, limit=n, seed=0)[:n]


def _context(tmp: Path, store: Store, budget: TrainBudget | None = None) -> TrainContext:
    ctx = TrainContext(env=DEMO_ENV, spec=DEMO_SPEC, train_tasks=_tasks("train", 2),
                       val_tasks=_tasks("val", 1), base_checkpoint=tmp / "ckpt",
                       base_gguf=tmp / "base.gguf", workdir=tmp / "work", store=store,
                       budget=budget or TrainBudget())
    ctx.workdir.mkdir(parents=True, exist_ok=True)
    return ctx


def test_a_method_that_asks_for_a_test_task_is_refused_and_nothing_of_it_is_recorded(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    with pytest.raises(UserError, match="outside its train/val split"):
        asyncio.run(train(PluginRef(name=f"{__file__}:LeakyMethod"), DEMO_ENV, DEMO_SPEC, store,
                          folder=tmp_path / "t", train=2, val=1, test=2,
                          base=(tmp_path / "never-read", tmp_path / "never-read.gguf")))
    (folder,) = (tmp_path / "t").iterdir()  # t/<training id>
    state = TrainState.model_validate_json((folder / "state.json").read_text())
    assert state.seen_tasks == []  # refused: it never reached the method
    assert store.list_runs(None) == []


def test_a_result_that_is_no_chat_model_gets_no_gguf_and_no_verdict(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    start = tmp_path / "start"
    start.mkdir()
    (start / "model.safetensors").write_bytes(b"start weights")
    report = asyncio.run(train(PluginRef(name=f"{__file__}:ScoreHeadMethod"), DEMO_ENV, DEMO_SPEC,
                               store, folder=tmp_path / "t", train=2, val=1, test=2,
                               base=(start, tmp_path / "never-read.gguf")))
    assert report.verdict is None and report.lineage.gguf is None and report.command == ""
    assert report.lineage.checkpoint_hash != report.lineage.base_hash
    assert "no base-vs-trained verdict" in report.verdict_text
    assert store.list_runs(None) == [] and not list(report.folder.glob("*.gguf"))


async def test_star_stops_at_its_sample_budget_before_sampling_more(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    asked: list[int] = []

    async def rollouts(tasks: list[TaskSpec], **kw: object) -> str:
        asked.append(len(tasks))
        raise AssertionError("sampled past the budget")

    ctx = _context(tmp_path, store, TrainBudget(max_samples=3))
    ctx.rollouts = rollouts
    result = await StarMethod(k=4).train(ctx)  # one task costs 4 samples: none fits in 3
    assert (result.stopped_by, result.samples, asked) == ("max_samples", 0, [])
    assert result.checkpoint == ctx.base_checkpoint  # no round: the start model is the result


async def test_a_correction_is_kept_only_when_the_environment_verifies_it(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    ctx = _context(tmp_path, store)
    task = ctx.train_tasks[0]
    solution = REGISTRY.create("env", DEMO_ENV).reference_solution(task)
    assert solution is not None
    attempt = Trajectory(task=task, agent_hash=DEMO_SPEC.hash(), seed=7)
    right = f"```python\n{solution.rstrip()}\n```"
    kept = await verified(ctx, attempt, right, "verify")
    assert len(kept) == 1 and kept[0]["messages"][-1] == {"role": "assistant", "content": right}
    assert kept[0]["messages"][0]["role"] in ("system", "user")  # the agent's own prompt
    wrong = "```python\ndef nothing():\n    return None\n```"
    assert await verified(ctx, attempt, wrong, "verify") == []
    with pytest.raises(UserError):  # the guard: a correction of a test task is refused
        await verified(ctx, attempt.model_copy(update={"task": _tasks("test", 1)[0]}), right, "v")


def test_trl_trains_in_float32_on_the_cpu_unless_told_otherwise(tmp_path: Path) -> None:
    """TRL's configs default to bf16 autocast, 9x slower on a CPU without bfloat16 arithmetic
    (benchmarks/cpu_precision.py): every method's config is float32 there."""
    pytest.importorskip("trl")
    from trl import DPOConfig, RewardConfig, SFTConfig

    from sharpen.train.grpo import GrpoMethod
    from sharpen.train.hf import trl_args

    for config in (DPOConfig, RewardConfig, SFTConfig):
        assert config(**trl_args("cpu", tmp_path, 0)).bf16 is False
        assert config(**trl_args("cpu", tmp_path, 0, bf16=True)).bf16 is True  # --trainer-arg
    assert "bf16" not in trl_args("cuda", tmp_path, 0)  # a GPU keeps TRL's default
    ctx = _context(tmp_path, Store(f"sqlite:///{tmp_path / 's.db'}"))
    assert GrpoMethod().config(ctx)["bf16"] is False


def _labelled(store: Store, role: str) -> list[str]:
    return [r.id for r in store.list_runs(None) if r.manifest.extra.get("role") == role]


@pytest.mark.slow
def test_rerest_trains_on_a_verified_success_corrects_a_failure_and_writes_a_model_local_runs(
        tmp_path: Path, base_checkpoint: Path, base_gguf: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    report = asyncio.run(train(PluginRef(name="rerest", args=TINY), DEMO_ENV, DEMO_SPEC, store,
                               folder=tmp_path / "t", train=2, val=1, test=1,
                               base=(base_checkpoint, base_gguf)))
    (record,) = report.result.extra["rounds"]
    assert record["successes"] == 1, "the start model solves one of the two train tasks greedily"
    assert record["extra"]["failed"] == record["extra"]["corrected"] == 1
    assert record["kept"] == 1 + record["extra"]["verified"]
    (check,) = _labelled(store, "rerest:round1:verify")  # the correction went through the env
    (t,) = store.iter_trajectories(check, with_steps=False, with_messages=True)
    assert t.outcome is not None and t.task.split == "train"
    ckpt = Path(report.lineage.checkpoint)
    assert (ckpt / "model.safetensors").is_file() and Path(report.lineage.gguf).is_file()
    assert report.lineage.checkpoint_hash != report.lineage.base_hash  # the weights moved
    # The trained GGUF ran as --model local on the test task.
    run = store.get_run(report.verdict.trained_run)
    assert run.manifest.extra["model_path"] == report.lineage.gguf
    (played,) = store.iter_trajectories(run.id, with_steps=False, with_messages=True)
    assert any(m.role == "assistant" and m.content for m in played.messages)
    assert set(report.seen_tasks) <= {t.id for t in _tasks("train", 2) + _tasks("val", 1)}


@pytest.mark.slow
def test_cli_star_killed_mid_training_resumes_from_its_last_round_and_never_sees_test(
        tmp_path: Path, base_checkpoint: Path, base_gguf: Path) -> None:
    spec = tmp_path / "spec.yaml"
    DEMO_SPEC.dump(spec)
    out = tmp_path / "train"
    cmd = [sys.executable, "-m", "sharpen.cli.main", "train", "star", "code",
           *[f"-E{k}={v}" for k, v in DEMO_ENV.args.items()], "--spec", str(spec),
           *[f"--method-arg={k}={v}" for k, v in {**TINY, "rounds": 2}.items()],
           "--train", "2", "--val", "1", "--test", "1", "--out", str(out),
           "--store", f"sqlite:///{tmp_path / 's.db'}", "--base-checkpoint", str(base_checkpoint),
           "--base-gguf", str(base_gguf), "--json"]
    env = {**os.environ, "TQDM_DISABLE": "1"}
    with (tmp_path / "first.log").open("w") as log:
        first = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                 start_new_session=True)
        deadline = time.monotonic() + 900
        state: list[Path] = []
        while not state:
            assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "round 1 never finished"
            time.sleep(0.5)
            state = list(out.glob("*/method/star.json"))
        os.killpg(first.pid, signal.SIGKILL)  # mid round 2: its sampling or its fine-tune
        first.wait()
    training_id = state[0].parent.parent.name
    viewer = TestClient(create_app(Store(f"sqlite:///{tmp_path / 's.db'}"), train_dir=out))
    listed = text(viewer.get("/train").text)  # the viewer's page of the killed training
    assert training_id in listed and "not finished" in listed
    page = text(viewer.get(f"/train/{training_id[:6]}").text)
    assert "No verdict yet" in page and "--resume" in page and "star" in page
    round1 = json.loads(state[0].read_text())["rounds"]
    assert len(round1) == 1 and round1[0]["kept"] == 1, round1
    weights = Path(round1[0]["checkpoint"]) / "model.safetensors"
    written = weights.stat().st_mtime_ns
    done = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)["train"]
    rounds = report["result"]["extra"]["rounds"]
    assert [r["round"] for r in rounds] == [1, 2] and rounds[0] == round1[0]  # not redone
    assert weights.stat().st_mtime_ns == written
    assert {e["round"] for e in report["result"]["events"]} == {1, 2}  # the whole curve
    assert any(e["loss"] is not None for e in report["result"]["events"])
    assert report["lineage"]["checkpoint"] == rounds[1]["checkpoint"]
    assert Path(report["lineage"]["gguf"]).is_file()
    assert "held-out verdict:" in done.stderr and report["command"] in done.stderr
    # The guard, instrumented: what reached the method is train/val, never test.
    seen, test = set(report["seen_tasks"]), set(report["test_tasks"])
    assert seen and not seen & test
    assert seen <= {t.id for t in _tasks("train", 2) + _tasks("val", 1)}
    # The viewer's page of the finished training: its verdict, guard, lineage, curve and runs.
    twin = viewer.get(f"/train/{training_id}.json").json()
    assert twin["report"]["verdict_text"] == report["verdict_text"] and twin["leaked"] == []
    assert len(twin["events"]) == len(report["result"]["events"])
    assert {r["manifest"]["extra"]["role"] for r in twin["runs"]} >= {"test:base", "test:trained"}
    page = text(viewer.get(f"/train/{training_id}").text)
    assert report["verdict_text"] in page and report["command"] in page
    assert f"{len(seen)} task(s) passed the guard" in page and "Test tasks among them: 0 of 1" in page
    assert report["lineage"]["checkpoint_hash"] in page and report["lineage"]["base_hash"] in page
    assert "finished · stopped by done" in text(viewer.get("/train").text)
