"""A real improvement experiment replayed from a cassette recorded from the embedded model
(tests/record_improve_cassette.py): Reflexion against its no-reflection seed, an interrupted
and resumed run against an uninterrupted one, and the winner as a spec file."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Interrupt
from record_improve_cassette import MEMORIES, config, reflexion_on_test

from sharpen.core.agent_spec import AgentSpec
from sharpen.improvement.experiment import Experiment
from sharpen.improvement.state import EngineState
from sharpen.store import Store


async def _run(tmp: Path, name: str, on_event=None):
    store = Store(f"sqlite:///{tmp / name}.db")
    return await Experiment(config("replay"), store, tmp / name, on_event=on_event).run(), store


async def test_interrupted_and_resumed_equals_uninterrupted(tmp_path: Path):
    whole, _ = await _run(tmp_path, "whole")
    with pytest.raises(KeyboardInterrupt):
        await _run(tmp_path, "parts", on_event=Interrupt(at=3))
    resumed, _ = await _run(tmp_path, "parts")
    a, b = whole.results[0], resumed.results[0]
    assert [e.hash for e in a.lineage] == [e.hash for e in b.lineage]
    assert a.archive_size == b.archive_size and a.account == b.account
    assert a.spend.rollouts == b.spend.rollouts
    assert (a.test_score, a.val_score) == (b.test_score, b.val_score)
    assert whole.baseline_test_score == resumed.baseline_test_score


@pytest.mark.parametrize("memory", MEMORIES)
async def test_reflexion_keeps_first_attempts_and_carries_its_memory(tmp_path: Path, memory: str):
    result, store = await _run(tmp_path, "r")
    ev = await reflexion_on_test(config("replay"), store, memory)
    seed = {t.task.id: t for t in store.iter_trajectories(result.baseline_run)}
    refl = {t.task.id: t for t in store.iter_trajectories(ev.records[0].run_id)}
    assert seed.keys() == refl.keys()
    retried = 0
    for task_id, base in seed.items():
        t = refl[task_id]
        # Attempt 1 of Reflexion is the seed's episode: same prompt, same seed, same reply.
        first = [s for s in t.steps if s.info.get("trial") == 0]
        assert [m.content for s in first for m in s.messages] == \
            [m.content for s in base.steps for m in s.messages]
        # On a greedy model Reflexion can only add successes, never lose one.
        assert t.outcome.success >= base.outcome.success
        trials = 1 + max(s.info.get("trial", 0) for s in t.steps)
        assert t.trials == trials and base.trials == 1
        assert trials == (1 if base.outcome.success else 3) or t.outcome.success
        reflections = [f for f in t.feedback if f.name == "reflection"]
        asked = [s for s in t.steps if "reflection" in s.info]
        assert len(reflections) == len(asked) == (trials - 1 if memory == "reflections" else 0)
        if trials > 1:  # what the last attempt's prompt carries over from the failed ones
            retried += 1
            system = t.messages[0].content
            assert ("earlier attempts" in system) == (memory != "none")
            assert ("Result:" in system) == (memory != "none")
            if memory == "reflections":
                assert reflections[-1].value in system
                assert "Task:" in asked[-1].messages[0].content  # the reflection sees the task
        assert t.usage.total_tokens >= base.usage.total_tokens
    assert retried, "the cassette has no failed first attempt, so no retry was checked"
    # Every attempt is an environment episode, and the budget is charged for each.
    assert ev.new_rollouts == sum(t.trials for t in refl.values()) > len(refl)
    assert sum(r.trials for r in ev.records) == ev.new_rollouts


async def test_archived_specs_are_files_sharpen_run_loads(tmp_path: Path):
    result, _ = await _run(tmp_path, "w")
    state = EngineState.load(tmp_path / "w" / "reflexion" / "state.json")
    assert len(state.archive.candidates) == result.results[0].archive_size >= 2
    child = state.archive.candidates[-1]
    path = tmp_path / "improved.yaml"
    child.spec.dump(path)
    spec = AgentSpec.load(path)
    assert spec.hash() == child.hash and spec.agent.name == "reflexion"
    assert spec.parents == [state.archive.candidates[0].hash]  # lineage survives the file
