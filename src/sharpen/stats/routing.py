"""The router from stored runs: fitting its classifier on runs of fixed models, and what a
router run's report says — calls per route and the router's cost–success point next to each
fixed model's on the frontier.

Fitting (:func:`fit_router`): runs of the same tasks, one per route, cheapest first. A task
counts when every run has a valid trial of it; a route *solved* it when its success rate
over the valid trials is at least ``solved_at`` (default 0.5); the task's label is the
cheapest route that solved it, the last route when none did. Its text is its first user
message in any of the runs (what the router reads at call time).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from sharpen.core.errors import UserError
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.models.base import MODEL, ROUTE
from sharpen.models.router import ROUTE_FAILED, task_text
from sharpen.models.routing import RouterClassifier, fit_classifier
from sharpen.stats.cost import Frontier
from sharpen.stats.taskdata import TaskTable
from sharpen.store import RunRecord, Store
from sharpen.store.aggregate import run_aggregate

ROUTER = "router"
"""The router's model plug-in name."""


def model_label(ref: PluginRef) -> str:
    """The name a model ref's model goes by (what a router step records as its ``route``):
    built to ask it — backends load nothing until called — or, when it cannot be built here,
    its ``name`` arg or the plug-in's name."""
    try:
        return REGISTRY.create(MODEL, ref).name
    except UserError:
        name = ref.args.get("name")
        return str(name) if name else ref.name


def fit_router(store: Store, run_ids: Sequence[str], *, solved_at: float = 0.5,
               max_features: int = 2000, c: float = 1.0) -> RouterClassifier:
    """The classifier of a router over the models of ``run_ids`` (full ids, cheapest route
    first), fitted on the tasks they share (see the module docstring)."""
    if len(run_ids) < 2:
        raise UserError("a router needs runs of at least two models to learn from",
                        "name one run per model, cheapest first")
    if len(set(run_ids)) < len(run_ids):
        raise UserError("the same run is named twice", "name each model's run once")
    records = [store.get_run(r) for r in run_ids]
    tables = [TaskTable.from_aggregate(run_aggregate(store, r)) for r in run_ids]
    rates: list[dict[str, float]] = [
        {h: int(t.c[i]) / int(t.n[i]) for i, h in enumerate(t.task_hash) if t.n[i] > 0}
        for t in tables]
    shared = [h for h in rates[0] if all(h in r for r in rates[1:])]
    texts = _task_texts(store, run_ids, set(shared))
    hashes = [h for h in shared if h in texts]
    if not hashes:
        raise UserError(f"the runs {', '.join(r[:12] for r in run_ids)} share no scored task "
                        "with a recorded prompt", "fit on runs of the same tasks by a model agent")
    last = len(run_ids) - 1
    labels = [next((i for i, r in enumerate(rates) if r[h] >= solved_at), last) for h in hashes]
    refs = [rec.agent.model for rec in records]
    return fit_classifier([texts[h] for h in hashes], labels, refs, [model_label(r) for r in refs],
                          runs=list(run_ids), max_features=max_features, c=c)


def _task_texts(store: Store, run_ids: Sequence[str], wanted: set[str]) -> dict[str, str]:
    """Task hash → its first user message, from whichever run recorded one."""
    found: dict[str, str] = {}
    for run_id in run_ids:
        for traj in store.iter_trajectories(run_id, with_steps=False, with_messages=True):
            h = traj.task.hash()
            if h in wanted and h not in found and any(m.role == "user" for m in traj.messages):
                found[h] = task_text(traj.messages)
        if len(found) == len(wanted):
            break
    return found


class RouteUse(BaseModel):
    """What one route served in a router run."""

    route: str
    """The route's model name."""
    calls: int
    """Calls it served."""
    input_tokens: int
    """Prompt tokens of those calls."""
    output_tokens: int
    """Completion tokens of those calls."""
    cost_usd: float | None
    """Their dollars, priced as this route (``None`` when any price was unknown)."""


class RoutingSection(BaseModel):
    """The routing part of a router run's report."""

    routes: list[RouteUse]
    """Calls per route, in the order the router lists them (then any other that served)."""
    fallbacks: int
    """Calls served by a later route after the one picked failed (infra)."""
    frontier: Frontier | None
    """This run (label ``router``) and the newest run of each fixed route on the same
    environment, on the cost–accuracy plane; ``None`` when this run scored no task."""
    note: str = ""
    """What is missing (a route with no run of its own to compare with)."""


def routing_section(store: Store, rec: RunRecord) -> RoutingSection | None:
    """The routing section of ``rec``'s report, ``None`` unless its model is the router."""
    ref = rec.agent.model
    if ref.name != ROUTER:
        return None
    # Imported here: stats.compare imports stats.report, whose RunReport holds this section.
    from sharpen.stats.compare import brief, brief_frontier
    from sharpen.stats.report import load_table

    routes = _route_refs(ref)
    names = [model_label(r) for r in routes]
    use: dict[str, dict[str, Any]] = {n: {"calls": 0, "in": 0, "out": 0, "cost": 0.0} for n in names}
    fallbacks = 0
    for traj in store.iter_trajectories(rec.id, with_messages=False):
        for step in traj.steps:
            served = step.info.get(ROUTE)
            if not isinstance(served, str):
                continue
            u = use.setdefault(served, {"calls": 0, "in": 0, "out": 0, "cost": 0.0})
            u["calls"] += step.usage.calls or 1
            u["in"] += step.usage.input_tokens
            u["out"] += step.usage.output_tokens
            u["cost"] = None if u["cost"] is None or step.usage.cost_usd is None \
                else u["cost"] + step.usage.cost_usd
            fallbacks += bool(step.info.get(ROUTE_FAILED))
    uses = [RouteUse(route=n, calls=u["calls"], input_tokens=u["in"], output_tokens=u["out"],
                     cost_usd=u["cost"]) for n, u in use.items()]
    fixed = [_fixed_run(store, rec, r) for r in routes]
    missing = [n for n, f in zip(names, fixed, strict=True) if f is None]
    note = (f"no finished run of {', '.join(missing)} alone on this environment to compare with"
            if missing else "")
    briefs = [brief(ROUTER, rec, load_table(store, rec.id))]
    briefs += [brief(n, f, load_table(store, f.id))
               for n, f in zip(names, fixed, strict=True) if f is not None]
    front = brief_frontier(briefs) if briefs[0].success.value is not None else None
    return RoutingSection(routes=uses, fallbacks=fallbacks, frontier=front, note=note)


def _route_refs(ref: PluginRef) -> list[PluginRef]:
    """The router's routes: its ``routes`` arg, else its classifier file's (empty when that
    file is gone)."""
    if ref.args.get("routes"):
        return [PluginRef.model_validate(r) for r in ref.args["routes"]]
    path = ref.args.get("classifier")
    if not path:
        return []
    try:
        return list(RouterClassifier.load(path).routes)
    except UserError:
        return []


def _fixed_run(store: Store, rec: RunRecord, route: PluginRef) -> RunRecord | None:
    """The newest run on ``rec``'s environment (name and args) whose model is ``route``
    and that counted at least one trial."""
    for other in store.list_runs(None, env=rec.manifest.env.name):
        if (other.id != rec.id and other.manifest.env == rec.manifest.env
                and other.agent.model == route and other.n_counted):
            return other
    return None
