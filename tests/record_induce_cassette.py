"""Record tests/cassettes/induce_toolshop.jsonl: ``sharpen induce`` on the reference agent's
toolshop run (10 tasks, no model) with the 32 notes of tests/data/induce_notes.yaml (written
for the test), the embedded model (SmolLM2) grounding the notes, naming the metrics and judging
them. tests/test_induce.py replays it through the CLI.

    .venv/bin/python tests/record_induce_cassette.py     # minutes on two busy cores

Re-record after any change to induce's prompts, schemas or params, the rubric judge's prompt,
the transcript rendering, the notes, or the toolshop task text (a replay of a changed request
fails with CassetteMissError).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import yaml

from sharpen.api import arun
from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.core.registry import PluginRef
from sharpen.store import Store

HERE = Path(__file__).resolve().parent
CASSETTE = HERE / "cassettes" / "induce_toolshop.jsonl"
NOTES = HERE / "data" / "induce_notes.yaml"
TASKS = 10


def model_ref(mode: str) -> PluginRef:
    """The replay model over the cassette; recording forwards to the embedded model."""
    args: dict[str, Any] = {"cassette": str(CASSETTE), "mode": mode, "latency_s": 0}
    if mode == "record":  # one thread: on a busy two-core machine two threads run far slower
        args["inner"] = {"name": "local", "args": {"n_threads": 1}}
    return PluginRef(name="replay", args=args)


def model_flags() -> list[str]:
    """The CLI flags that name the replay model (what the test passes to ``sharpen induce``)."""
    return ["--model", "replay", "--model-arg", f"cassette={CASSETTE}",
            "--model-arg", "latency_s=0"]


async def build_store(folder: Path) -> tuple[Store, str]:
    """``(store, run_id)``: the reference agent's toolshop run under ``folder/.sharpen``, each
    note of :data:`NOTES` stored on its trajectory as the viewer stores a comment."""
    url = f"sqlite:///{folder / '.sharpen' / 'sharpen.db'}"
    run = await arun("toolshop", agent="reference", tasks=TASKS, concurrency=1, store=url)
    store = Store(url)
    by_task = {t.task.id: t for t in store.iter_trajectories(run.id, with_steps=False)}
    for n in yaml.safe_load(NOTES.read_text(encoding="utf-8")):
        t = by_task[n["task"]]
        step = n.get("step")
        target = FeedbackTarget(kind="trajectory" if step is None else "step", run_id=run.id,
                                trajectory_id=t.id, step_index=step)
        store.add_feedback(Feedback(source="human", target=target, rationale=n["text"],
                                    author="test-fixture"))
    return store, run.id


async def main() -> None:
    from sharpen.diagnose.induce import InduceConfig, induce
    from sharpen.judges.runner import build_judge_model

    CASSETTE.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        store, run_id = await build_store(Path(tmp))
        model = build_judge_model(model_ref("record"))
        try:  # the CLI's defaults, so that `sharpen induce` replays these requests
            result = await induce(store, run_id, model, config=InduceConfig())
        finally:
            await model.aclose()
    print(result.model_dump_json(indent=2))
    print(f"recorded {sum(1 for _ in CASSETTE.open())} calls to {CASSETTE}")


if __name__ == "__main__":
    asyncio.run(main())
