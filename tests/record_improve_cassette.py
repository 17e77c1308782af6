"""Record tests/cassettes/improve_reflexion.jsonl: a small ``reflexion`` improvement
experiment on generated code tasks with the embedded model (SmolLM2), every call recorded.
tests/test_improve_replay.py replays it.

    .venv/bin/python tests/record_improve_cassette.py     # about 12 minutes pinned to one core

Re-record after any change to the code environment's prompts, the tool agent's or the
Reflexion agent's prompts, or the experiment below (a replay of a changed request fails with
CassetteMissError, which names this fix).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from sharpen.core.agent_spec import AgentSpec, Limits
from sharpen.core.registry import PluginRef
from sharpen.improvement.budget import Budget
from sharpen.improvement.engine import EngineConfig
from sharpen.improvement.evaluate import Evaluator
from sharpen.improvement.experiment import Experiment, ExperimentConfig, split_tasks
from sharpen.improvement.models import SharedModels
from sharpen.improvement.proposers.reflexion import ReflexionProposer
from sharpen.store import Store

CASSETTE = Path(__file__).resolve().parent / "cassettes" / "improve_reflexion.jsonl"


def config(mode: str) -> ExperimentConfig:
    """The experiment, its model recording (``mode="record"``) or replaying."""
    model = PluginRef(name="replay", args={
        "cassette": str(CASSETTE), "mode": mode, "latency_s": 0,
        **({"inner": {"name": "local"}} if mode == "record" else {})})
    spec = AgentSpec(name="seed", model=model, params={"temperature": 0.0, "max_tokens": 160},
                     limits=Limits(max_steps=2, max_tokens=6000, max_seconds=600))
    return ExperimentConfig(
        env=PluginRef(name="code", args={"source": "generated", "max_submissions": 1}),
        seed_spec=spec, proposer=PluginRef(name="reflexion", args={"max_trials": 4}),
        train=10, val=3, test=6,
        engine=EngineConfig(budget=Budget(rollouts=80), minibatch=10),
    )


MEMORIES = ("reflections", "feedback", "none")


async def reflexion_on_test(cfg: ExperimentConfig, store: Store, memory: str = "reflections"):
    """Reflexion with three trials and episodic memory ``memory`` on the experiment's test
    tasks, with the seeds of the experiment's test runs (recorded so a replay can compare it
    with the seed there)."""
    models = SharedModels()
    evaluator = Evaluator(store, cfg.env, seed=cfg.engine.seed, model_factory=models,
                          labels={"role": "test"})
    spec = ReflexionProposer(max_trials=3).child(cfg.seed_spec, 3, memory)
    return await evaluator.evaluate(spec, split_tasks(cfg.env, cfg)["test"], "test")


async def main() -> None:
    CASSETTE.unlink(missing_ok=True)
    CASSETTE.parent.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{Path(tmp) / 'record.db'}")
        result = await Experiment(config("record"), store, Path(tmp) / "exp", on_event=print).run()
        r = result.results[0]
        print(f"seed test {result.baseline_test_score:.2f}, winner test {r.test_score:.2f}, "
              f"archive {r.archive_size}, rollouts {r.spend.rollouts}")
        for memory in MEMORIES:
            ev = await reflexion_on_test(config("record"), store, memory)
            print(f"reflexion(3, memory {memory}) on test: {ev.successes}/{len(ev.records)}")
    print(f"recorded {sum(1 for _ in CASSETTE.open())} calls to {CASSETTE}")


if __name__ == "__main__":
    asyncio.run(main())
