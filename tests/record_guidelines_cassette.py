"""Record tests/cassettes/guidelines_code.jsonl: a short improvement run of the ``guidelines``
proposer on generated code tasks, with the embedded model (SmolLM2) both playing the agent
and writing the rules. tests/test_improve_guidelines.py replays it.

    .venv/bin/python tests/record_guidelines_cassette.py     # about three minutes on two busy cores

Re-record after any change to the proposer's prompt or params, the agent's prompt, or the
code environment's task text (a replay of a changed request fails with CassetteMissError).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from sharpen.core.agent_spec import AgentSpec, Limits
from sharpen.core.registry import PluginRef
from sharpen.improvement.budget import Budget
from sharpen.improvement.engine import Engine, EngineConfig
from sharpen.improvement.evaluate import Evaluator
from sharpen.improvement.experiment import ExperimentConfig, split_tasks
from sharpen.improvement.models import SharedModels
from sharpen.improvement.proposers.guidelines import GuidelinesProposer
from sharpen.store import Store

CASSETTE = Path(__file__).resolve().parent / "cassettes" / "guidelines_code.jsonl"

PROPOSER_ARGS: dict[str, Any] = {"top_k": 1}
"""Proposer args of the recording (``top_k`` 1, so selection matters once there are two rules)."""


def code_env() -> PluginRef:
    """The environment: generated code tasks, one submission each."""
    return PluginRef(name="code", args={"source": "generated", "max_submissions": 1})


def model_ref(mode: str) -> PluginRef:
    """The replay model over the cassette; recording forwards to the embedded model."""
    args: dict[str, Any] = {"cassette": str(CASSETTE), "mode": mode, "latency_s": 0}
    if mode == "record":  # one thread: on a busy two-core machine two threads run far slower
        args["inner"] = {"name": "local", "args": {"n_threads": 1}}
    return PluginRef(name="replay", args=args)


def build_engine(folder: Path, proposer: GuidelinesProposer, mode: str = "replay"):
    """``(engine, store, tasks)`` of the recorded run, storing under ``folder``."""
    seed_spec = AgentSpec(name="small", model=model_ref(mode),
                          params={"temperature": 0.0, "max_tokens": 200},
                          limits=Limits(max_steps=2, max_tokens=4000, max_seconds=300))
    config = ExperimentConfig(env=code_env(), seed_spec=seed_spec, train=4, val=2, test=2,
                              engine=EngineConfig(budget=Budget(rollouts=20), minibatch=2,
                                                  max_iterations=4, seed=0))
    tasks = split_tasks(config.env, config)
    store = Store(f"sqlite:///{folder / 'guidelines.db'}")
    models = SharedModels()
    evaluator = Evaluator(store, config.env, seed=config.engine.seed, model_factory=models,
                          labels={"experiment": "guidelines-test"})
    engine = Engine(proposer=proposer, proposer_name="guidelines", seed_spec=seed_spec,
                    train=tasks["train"], val=tasks["val"], evaluator=evaluator,
                    proposer_model=models.get(seed_spec.model), config=config.engine,
                    checkpoint=folder / "state.json", on_event=print)
    return engine, store, tasks


async def main() -> None:
    CASSETTE.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        engine, _store, _tasks = build_engine(Path(tmp), GuidelinesProposer(**PROPOSER_ARGS), mode="record")
        state = await engine.run()
        print(state.account)
        print(state.proposer_state)
    print(f"recorded {sum(1 for _ in CASSETTE.open())} calls to {CASSETTE}")


if __name__ == "__main__":
    asyncio.run(main())
