"""The progress bar shows work: steps, tokens, what episodes in flight are doing, a rate and an
ETA from steps before any episode finished; -v/-q on `sharpen run`; a disabled bar costs
nothing per step."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from conftest import sharpen

from sharpen.core.activity import REPORTER, doing
from sharpen.core.agent_spec import AgentSpec, Limits
from sharpen.core.messages import Message, ToolSpec, Usage
from sharpen.core.registry import PluginRef
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Step, Trajectory
from sharpen.models.base import Completion
from sharpen.runner import RunConfig, Runner
from sharpen.runner.progress import RunProgress
from sharpen.store import Store


def _traj(i: int) -> Trajectory:
    return Trajectory(run_id="r", task=TaskSpec(env="code", id=f"t{i}", seed=i),
                      agent_hash="a", epoch=0, seed=i)


def test_the_bar_counts_steps_tokens_and_activity_of_episodes_in_flight() -> None:
    bar = RunProgress(total=3, enabled=True, max_steps=4)
    a, b = _traj(0), _traj(1)
    with bar.episode(a), bar.episode(b):
        assert bar.active == {"model": 0, "environment": 2, "sandbox": 0}
        assert bar.eta_text() == "ETA -:--:--"  # no step yet: nothing to estimate from
        a.steps.append(Step(index=0, messages=[]))
        a.usage = Usage(input_tokens=1500, output_tokens=500)
        token = REPORTER.set(bar._flight[b.id])  # what the runner does in b's task
        try:
            with doing("sandbox"):
                assert bar.active["sandbox"] == 1 and bar.active["environment"] == 1
                assert bar.work_text() == "1 steps · 2000 tok · [cyan]env 1 sandbox 1[/]"
            assert bar.active["sandbox"] == 0 and bar.active["environment"] == 2
        finally:
            REPORTER.reset(token)
        # No episode finished: steps per episode is bounded by max_steps, so the ETA is a bound.
        assert "steps/s ETA ≤ " in bar.eta_text()
        a.steps.append(Step(index=1, messages=[]))
    bar.advance(a)
    assert bar.active == {"model": 0, "environment": 0, "sandbox": 0}
    assert bar.finished_steps == 2 and bar.finished_tokens == 2000
    eta = bar.eta_text()
    assert "steps/s ETA " in eta and "≤" not in eta  # now measured: 2 steps per episode


def test_a_disabled_bar_adds_nothing_per_step() -> None:
    bar = RunProgress(total=2, enabled=False, max_steps=4)
    t = _traj(0)
    model = object()
    with bar.episode(t):
        assert REPORTER.get() is None  # so a sandbox's doing() is a shared no-op
        assert bar.metered(model) is model  # type: ignore[arg-type]
        assert doing("sandbox") is doing("model")
    t.steps.append(Step(index=0, messages=[]))
    bar.advance(t)
    assert bar.finished == 1 and bar.finished_steps == 0  # only the episode count


class _Watching:
    """A model whose second call of an episode reads the bar it runs under."""

    name = "watching"
    supports_tools = False

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    async def complete(self, messages: list[Message], tools: list[ToolSpec] | None = None,
                       params: dict[str, Any] | None = None) -> Completion:
        await asyncio.sleep(0.01)
        episode = REPORTER.get()
        if episode is not None and len(messages) > 2:  # a later turn of its episode
            bar = episode.bar  # type: ignore[attr-defined]
            self.seen.append((bar.work_text(), bar.eta_text()))
        return Completion(message=Message(role="assistant", content="still thinking"),
                          usage=Usage(input_tokens=100, output_tokens=20))

    async def aclose(self) -> None:
        return None


def test_a_run_at_concurrency_above_its_tasks_shows_steps_and_an_eta_before_any_episode_ends(
    tmp_path: Path,
) -> None:
    spec = AgentSpec(model=PluginRef(name="watching"), limits=Limits(max_steps=3))
    model = _Watching()
    with Store(f"sqlite:///{tmp_path / 's.db'}") as store:
        env = PluginRef(name="code", args={"source": "generated"})
        from sharpen.core.registry import REGISTRY
        from sharpen.envs.base import ENV

        tasks = REGISTRY.create(ENV, env).list_tasks(limit=2, seed=0)
        config = RunConfig(env=env, agent=spec, tasks=tasks, epochs=1, concurrency=4, seed=0)
        runner = Runner(store, progress=True, model_factory=lambda _: model)
        summary = asyncio.run(runner.run(config))
    assert summary.n_trajectories == 2
    work, eta = model.seen[0]  # the first later turn: no episode has finished yet
    assert "model " in work and " steps" in work and "tok" in work
    assert work.split(" steps")[0] != "0"
    assert "steps/s ETA ≤ " in eta


def test_run_verbose_prints_a_line_per_episode_and_quiet_only_the_summary(tmp_path: Path) -> None:
    args = ["run", "code", "-E", "source=generated", "--agent-name", "reference", "--tasks", "3",
            "--store", f"sqlite:///{tmp_path / 's.db'}"]
    loud = sharpen(*args, "-v", cwd=tmp_path, timeout=300)
    assert loud.returncode == 0, loud.stderr
    lines = [ln for ln in loud.stdout.splitlines() if " epoch 0 · reward " in ln]
    assert len(lines) == 3 and all(ln.startswith("✓ gen/") for ln in lines), loud.stdout
    quiet = sharpen(*args, "-q", cwd=tmp_path, timeout=300)
    assert quiet.returncode == 0, quiet.stderr
    assert "sharpen run" not in quiet.stdout and "epoch 0 · reward" not in quiet.stdout
    assert "Run summary" in quiet.stdout
    both = sharpen(*args, "-q", "-v", cwd=tmp_path, timeout=300)
    assert both.returncode == 2 and "contradict" in both.stdout + both.stderr


def test_improve_obeys_no_progress_and_keeps_its_event_lines(tmp_path: Path) -> None:
    import yaml
    from record_improve_cassette import config

    spec = tmp_path / "seed.yaml"
    spec.write_text(yaml.safe_dump(config("replay").seed_spec.model_dump(mode="json")))
    args = ["improve", "code", "-E", "source=generated", "-E", "max_submissions=1",
            "--proposer", "reflexion", "--proposer-arg", "max_trials=4", "--train", "10",
            "--val", "3", "--test", "6", "--minibatch", "10", "--budget-rollouts", "80",
            "--agent", str(spec), "--store", f"sqlite:///{tmp_path / 's.db'}"]
    tty = {"TTY_COMPATIBLE": "1"}  # Rich draws bars as on a terminal, into the pipe
    shown = sharpen(*args, "--fresh", cwd=tmp_path, env=tty)
    assert shown.returncode == 0, shown.stderr
    bar = " steps · "  # the work column of an evaluation's bar
    assert bar in shown.stdout
    hidden = sharpen(*args, "--fresh", "--no-progress", cwd=tmp_path, env=tty)
    assert hidden.returncode == 0, hidden.stderr
    assert bar not in hidden.stdout
    for event in ("  [reflexion] improving on 10 train / 3 val tasks",
                  "  scoring the seed spec on 6 held-out test tasks"):
        assert event in shown.stdout and event in hidden.stdout
