"""Improvement pages: the experiments ``sharpen improve`` and ``sharpen demo`` left in their
folders — the held-out verdict, each engine's account, archive, validation grid (the Pareto
front) and rejection log, and one candidate's spec next to its parent's."""

from __future__ import annotations

import difflib
import json
from collections import Counter
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markupsafe import Markup
from pydantic import BaseModel

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import UserError
from sharpen.improvement.candidate import Candidate
from sharpen.improvement.evaluate import EvalRecord, cache_key
from sharpen.improvement.folder import ExperimentFolder, find_experiment, list_experiments
from sharpen.improvement.proposal import Rejection
from sharpen.improvement.report import (
    difference_text,
    objective_difference_text,
    selection_note,
    verdict_line,
)
from sharpen.improvement.state import EngineState
from sharpen.stats.paired import p_cell
from sharpen.store.records import RunRecord
from sharpen.store.store import Store
from sharpen.viewer import svg
from sharpen.viewer.app import render
from sharpen.viewer.twins import wants_json

router = APIRouter()


class Cell(BaseModel):
    """One (candidate, validation task) result, with the trajectory that scored it."""

    success: bool | None
    """``None`` when the candidate has no result for the task."""
    trajectory_id: str | None = None


class GridRow(BaseModel):
    """One validation task across the archive."""

    task_hash: str
    task_id: str
    cells: list[Cell]


def _base(request: Request) -> Path:
    return request.app.state.improve_dir


def _experiment(request: Request, ref: str) -> ExperimentFolder:
    return find_experiment(_base(request), ref)


def _task_ids(store: Store, state: EngineState) -> dict[str, str]:
    """Task hash -> task id, from the runs the engine's evaluations were stored in."""
    out: dict[str, str] = {}
    for run_id in sorted({r.run_id for r in state.cache.values()}):
        out.update({t.hash(): t.id for t in store.tasks_for(run_id)})  # [] for a run not here
    return out


def validation_grid(state: EngineState, task_ids: dict[str, str]) -> list[GridRow]:
    """Rows of validation tasks, a cell per archived candidate (in archive order)."""
    tasks = sorted({t for c in state.archive.candidates for t in c.val}, key=lambda h: task_ids.get(h, h))
    rows = []
    for task in tasks:
        cells = []
        for c in state.archive.candidates:
            rec = state.cache.get(cache_key(c.hash, task))
            ok = c.val.get(task)
            cells.append(Cell(success=None if ok is None else ok > 0,
                              trajectory_id=rec.trajectory_id if rec else None))
        rows.append(GridRow(task_hash=task, task_id=task_ids.get(task, task[:12]), cells=cells))
    return rows


def episodes_of(state: EngineState, spec_hash: str) -> list[tuple[str, EvalRecord]]:
    """Every stored evaluation of ``spec_hash`` the engine ran, as ``(task hash, record)`` —
    for a rejected child, its gate on the minibatch."""
    prefix = cache_key(spec_hash, "")
    return sorted((key.removeprefix(prefix), rec) for key, rec in state.cache.items()
                  if key.startswith(prefix))


def experiment_runs(store: Store, exp: ExperimentFolder) -> list[RunRecord]:
    """The stored runs the experiment made (train and validation evaluations of every engine,
    and the test runs), oldest first; runs no longer in the store are left out."""
    ids = {rec.run_id for state in exp.states.values() for rec in state.cache.values()}
    if exp.result is not None:
        ids |= {exp.result.baseline_run, *(r.test_run for r in exp.result.results)}
    found = []
    for run_id in ids:
        try:
            found.append(store.get_run(run_id))
        except UserError:  # deleted from the store since
            continue
    return sorted(found, key=lambda r: (r.created_at, r.id))


def spec_lines(spec: AgentSpec) -> list[str]:
    """``spec`` as lines to read and diff: one per setting, each component's text below
    its name (YAML would fold or escape long prompts and hide the change)."""
    def flat(value: Any) -> str:
        return json.dumps(value, sort_keys=True)

    lines = [f"model: {spec.model.name} {flat(spec.model.args)}",
             f"agent: {spec.agent.name} {flat(spec.agent.args)}",
             f"params: {flat(spec.params)}",
             f"limits: {flat(spec.limits.model_dump(mode='json'))}"]
    for name, text in sorted(spec.components.items()):
        lines.append(f"components.{name}:")
        lines.extend(f"  {line}" for line in str(text).splitlines() or [""])
    return lines


def spec_diff(parent: AgentSpec, child: AgentSpec) -> list[tuple[str, str]]:
    """The unified diff parent → child as ``(kind, line)``, kind in ``add``/``del``/``ctx``/``hunk``."""
    out = []
    for line in difflib.unified_diff(spec_lines(parent), spec_lines(child), lineterm="", n=2):
        if line.startswith(("---", "+++")):
            continue
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "ctx")
        out.append((kind, line))
    return out


def _curve(name: str, state: EngineState) -> Markup:
    points = [(f"#{p.iteration}", float(p.rollouts), p.best_val) for p in state.curve]
    if len(points) < 2:
        return Markup("")
    return Markup(svg.scatter(f"{name}: best validation success", points, "rollouts spent", line=True))


def known_candidates(exp: ExperimentFolder) -> dict[str, str]:
    """Every spec the experiment has a page for — archived candidates and children that lost
    their gate — by hash -> the proposer whose page shows it (the main one where several
    engines share a spec, as they share the seed)."""
    out: dict[str, str] = {}
    for name, state in reversed(exp.states.items()):
        out.update({r.child_hash: name for rs in state.rejected.values() for r in rs})
        out.update({c.hash: name for c in state.archive.candidates})
    return out


def find_spec(exp: ExperimentFolder, proposer: str, spec_hash: str
              ) -> tuple[str, str, tuple[str, Rejection] | None] | None:
    """Where the experiment has ``spec_hash`` (full, or a unique prefix): ``(proposer, full
    hash, None)`` for an archived candidate, ``(proposer, full hash, (parent, rejection))``
    for a child that lost its gate; ``proposer``'s engine is searched first."""
    names = sorted(exp.states, key=lambda n: n != proposer)
    for name in names:
        state = exp.states[name]
        hits = {c.hash for c in state.archive.candidates if c.hash.startswith(spec_hash)}
        if len(hits) == 1:
            return name, hits.pop(), None
        rejected = [(parent, r) for parent, rs in state.rejected.items() for r in rs
                    if r.child_hash.startswith(spec_hash)]
        if not hits and len({r.child_hash for _, r in rejected}) == 1:
            return name, rejected[0][1].child_hash, rejected[0]
    return None


@router.get("/improve", response_class=HTMLResponse)
@router.get("/improve.json")
def experiments_page(request: Request) -> Response:
    rows = list_experiments(_base(request))
    return render(request, "improve_list.html", {"rows": rows, "base": _base(request),
                                                 "verdict": verdict_line})


@router.get("/improve/{ref}", response_class=HTMLResponse)
@router.get("/improve/{ref}.json")
def experiment_page(request: Request, ref: str) -> Response:
    exp = _experiment(request, ref)
    store: Store = request.app.state.store
    engines = []
    for name, state in exp.states.items():
        front = state.archive.front() if state.archive.candidates else {}
        best = state.archive.best().hash if state.archive.candidates else None
        engines.append({
            "name": name, "state": state, "front": front, "best": best,
            "grid": validation_grid(state, _task_ids(store, state)),
            "invalid": Counter(state.invalid_reasons).most_common(),
            "curve": _curve(name, state),
            "rejected": [(parent, r, episodes_of(state, r.child_hash))
                         for parent, rs in state.rejected.items() for r in rs],
        })
    return render(request, "improve.html", {"exp": exp, "cfg": exp.definition, "engines": engines,
                                            "verdict": verdict_line, "difference": difference_text,
                                            "objective_difference": objective_difference_text,
                                            "p_cell": p_cell, "selection_note": selection_note,
                                            "runs": experiment_runs(store, exp),
                                            "known": known_candidates(exp)})


@router.get("/improve/{ref}/{proposer}/{spec_hash}", response_class=HTMLResponse)
@router.get("/improve/{ref}/{proposer}/{spec_hash}.json")
def candidate_page(request: Request, ref: str, proposer: str, spec_hash: str) -> Response:
    """One candidate (a full hash or a unique prefix; looked for under ``proposer`` first,
    then under the experiment's other proposers), or a child that lost its gate."""
    exp = _experiment(request, ref)
    found = find_spec(exp, proposer, spec_hash)
    if found is None:
        raise HTTPException(404, f"experiment {exp.id} has no candidate or rejected child {spec_hash}")
    where, full, rejection = found
    if (where, full) != (proposer, spec_hash):
        suffix = ".json" if wants_json(request) else ""
        return RedirectResponse(f"/improve/{exp.id}/{where}/{full}{suffix}", status_code=307)
    state = exp.states[where]
    if rejection is not None:
        parent_hash, rej = rejection
        return render(request, "rejected.html", {
            "exp": exp, "proposer": where, "parent": parent_hash, "rejection": rej,
            "episodes": episodes_of(state, rej.child_hash),
            "task_ids": _task_ids(request.app.state.store, state)})
    cand: Candidate = state.archive.get(spec_hash)
    parent = next((state.archive.get(p) for p in cand.spec.parents if state.archive.has(p)), None)
    store: Store = request.app.state.store
    ids = _task_ids(store, state)
    results = [(ids.get(t, t[:12]), ok > 0, state.cache.get(cache_key(cand.hash, t)))
               for t, ok in sorted(cand.val.items(), key=lambda kv: ids.get(kv[0], kv[0]))]
    ctx = {"exp": exp, "proposer": proposer, "cand": cand, "parent": parent,
           "lines": spec_lines(cand.spec),
           "diff": spec_diff(parent.spec, cand.spec) if parent else [],
           "lineage": state.archive.lineage(cand.hash), "results": results,
           "rejected": state.rejected.get(cand.hash, [])}
    return render(request, "candidate.html", ctx)
