"""``sharpen diagnose A --against B`` (what changed between two runs, per detector, on their
shared tasks) and the decisive-step tally a diagnosis reads back from ``sharpen attribute``'s
records — on real runs of the textworld environment (the model-free null and reference
agents; no sandbox, so no time limit can fail a reference solution on a busy machine) in real
SQLite stores."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from conftest import run_agent, sharpen
from scipy.stats import binomtest

from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.diagnose.changes import changes
from sharpen.diagnose.decisive import NAME
from sharpen.diagnose.run import diagnose_run
from sharpen.store import Store

TEXTWORLD = PluginRef(name="textworld")


def two_runs(tmp_path: Path) -> tuple[Store, str, str]:
    """The null agent (gives up: ``limit_hit`` on every task) and the reference agent (solves
    every task) on the same 5 textworld tasks, in one store."""
    tasks = REGISTRY.create("env", TEXTWORLD).list_tasks("test", limit=5)
    db = tmp_path / "s.db"
    null = asyncio.run(run_agent(db, TEXTWORLD, "null", tasks))[0].run_id
    ref = asyncio.run(run_agent(db, TEXTWORLD, "reference", tasks))[0].run_id
    return Store(f"sqlite:///{db}"), null, ref


def test_against_counts_fixed_and_introduced_tasks(tmp_path: Path) -> None:
    store, null, ref = two_runs(tmp_path)
    a, b = diagnose_run(store, null), diagnose_run(store, ref)
    forward = changes(store, a, b)
    assert forward.shared_tasks == 5 and forward.only_a == forward.only_b == 0
    hit = next(r for r in forward.detectors if r.detector == "limit_hit")
    assert (hit.fixed, hit.introduced, hit.kept) == (5, 0, 0)
    assert hit.a.count == 5 and hit.b.count == 0
    assert hit.p_value == binomtest(5, 5, 0.5).pvalue and len(hit.fixed_examples) == 3
    assert forward.detectors[0].detector == "limit_hit"  # most fixed first
    quiet = next(r for r in forward.detectors if r.detector == "loop")
    assert (quiet.fixed, quiet.introduced, quiet.p_value) == (0, 0, None)
    back = changes(store, b, a)
    hit = next(r for r in back.detectors if r.detector == "limit_hit")
    assert (hit.fixed, hit.introduced) == (0, 5) and back.detectors[-1].detector == "limit_hit"


def test_cli_against_table_and_json(tmp_path: Path) -> None:
    _, null, ref = two_runs(tmp_path)
    env = {"SHARPEN_STORE": f"sqlite:///{tmp_path / 's.db'}"}
    res = sharpen("diagnose", null[:8], "--against", ref[:8], "--json", "--taxonomy", "none",
                  cwd=tmp_path, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["a"]["run_id"] == null and out["b"]["run_id"] == ref
    hit = next(r for r in out["changes"]["detectors"] if r["detector"] == "limit_hit")
    assert hit["fixed"] == 5 and hit["introduced"] == 0
    res = sharpen("diagnose", null[:8], "--against", ref[:8], cwd=tmp_path, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "5 shared tasks" in res.stdout and "fixed" in res.stdout


def test_decisive_steps_are_tallied_by_step_and_stage(tmp_path: Path) -> None:
    """Records as ``sharpen attribute`` stores them, on the reference agent's textworld run: the
    diagnosis counts them by step and names the stage of the agent's action there."""
    env = PluginRef(name="textworld")
    tasks = REGISTRY.create("env", env).list_tasks("test", limit=3)
    ts = asyncio.run(run_agent(tmp_path / "t.db", env, "reference", tasks))
    store = Store(f"sqlite:///{tmp_path / 't.db'}")
    assert diagnose_run(store, ts[0].run_id, save=False).decisive is None
    textworld = REGISTRY.create("env", env)
    marked = ts[:2]
    for t in marked:
        store.add_feedback(Feedback(source="detector", name=NAME, value=1, rationale="planted",
                                    target=FeedbackTarget(kind="step", run_id=t.run_id,
                                                          trajectory_id=t.id, step_index=0)))
    d = diagnose_run(store, ts[0].run_id, save=False)
    assert d.decisive is not None and d.decisive.trajectories == 2 and d.decisive.by_step == {0: 2}
    stages = [textworld.stage(t.steps[0].action) or "none" for t in marked if t.steps[0].action]
    assert sum(d.decisive.by_stage.values()) == 2 and set(d.decisive.by_stage) == set(stages)
