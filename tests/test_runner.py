"""The Runner in-process, on SmolLM2 replies replayed from a cassette recorded from the real
model (benchmarks/cassettes/harness_overhead.jsonl; the command that recorded it is in
benchmarks/harness_overhead.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from sharpen.core import AgentSpec, PluginRef
from sharpen.core.outcome import Outcome
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Trajectory
from sharpen.envs.code import CodeEnv
from sharpen.models.pricing import PriceTable, parse_table
from sharpen.runner import RunConfig, Runner, RunSummary
from sharpen.runner.progress import RunProgress
from sharpen.store import Store

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "cassettes"
ENV = PluginRef(name="code", args={"source": "generated", "difficulty": "easy",
                                   "max_submissions": 2})


def _config(concurrency: int, n: int = 16) -> RunConfig:
    spec = AgentSpec.load(BENCH / "harness_overhead.agent.yaml")
    spec = spec.model_copy(update={"model": PluginRef(
        name="replay", args={"cassette": str(BENCH / "harness_overhead.jsonl"), "latency_s": 0}
    )})
    tasks = CodeEnv(**ENV.args).list_tasks(split=None, limit=64, seed=0)[:n]
    return RunConfig(env=ENV, agent=spec, tasks=tasks, concurrency=concurrency, seed=0)


async def test_results_do_not_depend_on_concurrency_and_match_the_store(tmp_path: Path):
    outcomes = []
    for c in (1, 8):
        store = Store(f"sqlite:///{tmp_path / f'c{c}.db'}")
        summary = await Runner(store, progress=False).run(_config(c))
        stored = list(store.iter_trajectories(summary.run_id))
        assert len(stored) == 16 and summary.n_trajectories == 16
        again = RunSummary.of(summary.run_id, stored, summary.wall_seconds)
        assert again.model_dump() == summary.model_dump()
        assert store.get_run(summary.run_id).status == "finished"
        for t in stored:  # every step's feedback points back at its own trajectory and step
            for fb in t.feedback:
                assert fb.target.trajectory_id == t.id and fb.target.run_id == t.run_id
                assert t.steps[fb.target.step_index].action is not None
        outcomes.append({t.task.id: (t.outcome.success, t.outcome.reward, len(t.steps))
                         for t in stored})
    assert outcomes[0] == outcomes[1]


async def test_resume_of_a_finished_run_does_nothing(tmp_path: Path):
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    first = await Runner(store, progress=False).run(_config(4, n=6))
    again = await Runner(store, progress=False).run(_config(4, n=6), resume=True)
    assert again.run_id == first.run_id and again.n_trajectories == 6
    assert len(store.list_runs()) == 1


async def test_a_different_config_is_not_resumed(tmp_path: Path):
    store = Store(f"sqlite:///{tmp_path / 'd.db'}")
    first = await Runner(store, progress=False).run(_config(4, n=4))
    other = await Runner(store, progress=False).run(_config(4, n=5), resume=True)
    assert other.run_id != first.run_id and other.n_trajectories == 5


async def test_a_run_prices_its_tokens_by_the_table_it_was_given(tmp_path: Path):
    """The cassette says the embedded model cost $0; a table that charges for it wins, and
    every trajectory's cost is its tokens at that price (applied once per call)."""
    prices = PriceTable([parse_table('"local/*": {input: 1000000, output: 2000000}', "test")])
    store = Store(f"sqlite:///{tmp_path / 'p.db'}")
    summary = await Runner(store, progress=False, prices=prices).run(_config(2, n=3))
    for t in store.iter_trajectories(summary.run_id):
        assert t.usage.input_tokens > 0
        assert t.usage.cost_usd == pytest.approx(t.usage.input_tokens + 2 * t.usage.output_tokens)
    assert store.get_run(summary.run_id).cost_usd == pytest.approx(summary.cost_usd)


def _finished(outcome: Outcome | None) -> Trajectory:
    return Trajectory(run_id="r", task=TaskSpec(env="code", id="t", seed=0), agent_hash="a",
                      epoch=0, seed=0, outcome=outcome)


def test_the_progress_bar_names_its_work_and_counts_successes():
    bar = RunProgress(total=3, label="gate: child {x} [b] on train")  # braces/brackets stay text
    bar.advance(_finished(Outcome(success=True, reward=1.0)))
    bar.advance(_finished(None))
    console = Console(width=150)
    with console.capture() as cap:
        console.print(bar._progress.make_tasks_table(bar._progress.tasks))
    line = cap.get()
    assert "gate: child {x} [b] on train" in line and "2/3" in line
    assert "success 1/1" in line and "errors 1" in line
