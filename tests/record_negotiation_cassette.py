"""Record benchmarks/cassettes/negotiation_local.jsonl: the embedded model (SmolLM2) playing
the opponent and the critic of the ``negotiation`` environment against the ``reference``
agent, on the first 8 medium test tasks. tests/test_env_negotiation.py replays it.

    .venv/bin/python tests/record_negotiation_cassette.py     # ~1 minute on two cores

Re-record after any change to the opponent's or the critic's prompts or params (a replay of
a changed request fails with CassetteMissError, which names this fix).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from sharpen.core import AgentSpec, PluginRef
from sharpen.envs.negotiation import NegotiationEnv
from sharpen.runner import RunConfig, Runner
from sharpen.store import Store

CASSETTE = Path(__file__).resolve().parent.parent / "benchmarks" / "cassettes" / "negotiation_local.jsonl"
N_TASKS = 8


def env_ref(mode: str) -> PluginRef:
    """The env of the recording (``mode="record"``) and of its replay (``mode="replay"``)."""
    model = {"name": "replay", "args": {"cassette": str(CASSETTE), "mode": mode, "latency_s": 0,
                                        **({"inner": {"name": "local"}} if mode == "record" else {})}}
    return PluginRef(name="negotiation", args={"difficulty": "medium", "opponent": model,
                                               "critic": model})


def tasks():
    return NegotiationEnv(difficulty="medium").list_tasks("test", limit=N_TASKS)


async def main() -> None:
    CASSETTE.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{Path(tmp) / 'record.db'}")
        config = RunConfig(env=env_ref("record"), agent=AgentSpec(agent=PluginRef(name="reference")),
                           tasks=tasks())
        summary = await Runner(store, progress=False).run(config)
        for t in store.iter_trajectories(summary.run_id):
            print(t.task.id, t.outcome.success, t.outcome.error_kind, t.outcome.evidence)
    print(f"recorded {sum(1 for _ in CASSETTE.open())} calls to {CASSETTE}")


if __name__ == "__main__":
    asyncio.run(main())
