"""Record tests/cassettes/taxonomy_names.jsonl: the embedded model (SmolLM2) naming the five
groups of tests/test_taxonomy.py's planted failures (``name_groups``). tests/test_taxonomy.py
replays it.

    .venv/bin/python tests/record_taxonomy_cassette.py     # about a minute

Re-record after any change to the naming prompt, schema or params, to the signatures, the
clustering or the planted corpus (a replay of a changed request fails with
CassetteMissError).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from sharpen.core.registry import PluginRef

HERE = Path(__file__).resolve().parent
CASSETTE = HERE / "cassettes" / "taxonomy_names.jsonl"


def model_ref(mode: str) -> PluginRef:
    """The replay model over the cassette; recording forwards to the embedded model."""
    args: dict[str, Any] = {"cassette": str(CASSETTE), "mode": mode, "latency_s": 0}
    if mode == "record":  # one thread: on a busy two-core machine two threads run far slower
        args["inner"] = {"name": "local", "args": {"n_threads": 1}}
    return PluginRef(name="replay", args=args)


async def named(mode: str) -> Any:
    """The planted corpus's taxonomy, named through the replay model in ``mode``."""
    sys.path.insert(0, str(HERE))
    from test_taxonomy import corpus, findings_of

    from sharpen.diagnose.taxonomy import build_taxonomy, signatures_of
    from sharpen.diagnose.taxonomy_names import name_groups
    from sharpen.judges.runner import build_judge_model

    ts = corpus()
    tax = build_taxonomy(signatures_of(ts, findings_of(ts)))
    model = build_judge_model(model_ref(mode))
    try:
        return tax, await name_groups(tax, model)
    finally:
        await model.aclose()


if __name__ == "__main__":
    CASSETTE.unlink(missing_ok=True)
    _, result = asyncio.run(named("record"))
    for g in result.groups:
        print(f"{g.count:3d} {g.named_by:5s} {g.name!r}")
    print(f"recorded {sum(1 for _ in CASSETTE.open())} calls to {CASSETTE}")
