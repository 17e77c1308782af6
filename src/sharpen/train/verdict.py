"""The held-out verdict of a training: the start model against the trained one on the test
tasks, with the same agent spec and seeds, the paired difference with its 95% interval
(:func:`sharpen.stats.paired.compare_pair`, as ``sharpen improve`` reports), and tokens per
task. Outside every training budget; nothing a method did ever saw these tasks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import BaseModel

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.registry import PluginRef
from sharpen.core.task import TaskSpec
from sharpen.runner import RunConfig, Runner
from sharpen.stats.paired import PairedComparison, compare_pair
from sharpen.stats.report import load_table
from sharpen.stats.rounding import interval_text
from sharpen.store import Store


class Verdict(BaseModel):
    """Base vs trained on the test split."""

    tasks: int
    base_run: str
    trained_run: str
    base_success: float
    trained_success: float
    base_tokens_per_task: float
    trained_tokens_per_task: float
    comparison: PairedComparison
    """Trained (B) against base (A), paired on the test tasks."""


def with_model(spec: AgentSpec, gguf: Path, temperature: float | None = None) -> AgentSpec:
    """``spec`` running the GGUF file ``gguf`` on the ``local`` model (its other model args
    kept), at ``temperature`` when given."""
    args = dict(spec.model.args) if spec.model.name == "local" else {}
    update: dict[str, object] = {"model": PluginRef(name="local", args={**args, "model_path": str(gguf)})}
    if temperature is not None:
        update["params"] = {**spec.params, "temperature": temperature}
    return spec.model_copy(update=update)


def _tokens_per_task(store: Store, run_id: str) -> float:
    tokens = [t.usage.total_tokens for t in store.iter_trajectories(run_id, with_steps=False)]
    return float(np.mean(tokens)) if tokens else 0.0


async def held_out(store: Store, env: PluginRef, spec: AgentSpec, tasks: list[TaskSpec], *,
                   base_gguf: Path, trained_gguf: Path, seed: int,
                   labels: dict[str, str]) -> Verdict:
    """Run ``spec`` with each model on ``tasks`` (resumed when started before) and compare."""
    runs: dict[str, str] = {}
    for role, gguf in (("base", base_gguf), ("trained", trained_gguf)):
        config = RunConfig(env=env, agent=with_model(spec, gguf), tasks=tasks, seed=seed,
                           labels={**labels, "role": f"test:{role}", "model_path": str(gguf)})
        runs[role] = (await Runner(store, progress=False).run(config, resume=True)).run_id
    a, b = load_table(store, runs["base"]), load_table(store, runs["trained"])
    cmp = compare_pair(a, b, np.random.default_rng(seed), label_a="base", label_b="trained")
    return Verdict(tasks=len(tasks), base_run=runs["base"], trained_run=runs["trained"],
                   base_success=float(a.c.sum() / max(1, a.n.sum())),
                   trained_success=float(b.c.sum() / max(1, b.n.sum())),
                   base_tokens_per_task=_tokens_per_task(store, runs["base"]),
                   trained_tokens_per_task=_tokens_per_task(store, runs["trained"]),
                   comparison=cmp)


def verdict_text(v: Verdict) -> str:
    """The verdict in words, as ``sharpen improve`` words its own."""
    c = v.comparison
    if c.difference is None or c.ci is None:
        return f"no verdict: {c.verdict}"
    diff = f"{100 * c.difference:+.1f} points {interval_text(c.ci.low, c.ci.high, signed=True)}"
    head = ("held-out gain" if c.significant and c.direction == "better" else
            "held-out loss" if c.significant else "no detectable gain on held-out tasks")
    return (f"{head}: trained {100 * v.trained_success:.1f}% vs base {100 * v.base_success:.1f}% "
            f"on {v.tasks} test tasks, {diff}; {c.verdict}")
