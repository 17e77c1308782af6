"""Declared perturbations: every built-in that declares one builds a variant that differs from
its original, is the same in every process for (task, name, seed), and is still solved by
the reference agent and scored alike by the environment's own verifier (real envs, real
verifiers, no model); `sharpen run --perturb` then fills `sharpen report`'s robustness row."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import run_agent, sharpen

from sharpen.core.errors import UserError
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.core.task import TaskSpec
from sharpen.envs.base import ENV, VERIFIER, Environment
from sharpen.envs.code.tasks import materialize as code_problem
from sharpen.envs.perturbation import BASE_TASK, PERTURBATION, perturbed_of
from sharpen.envs.shell.tasks import materialize as shell_problem
from sharpen.envs.sql.score import problem_of as sql_problem
from sharpen.envs.textworld.generate import world_of
from sharpen.envs.toolshop.generator import shop_of

REPO = Path(__file__).resolve().parents[1]

ENVS: dict[str, dict[str, Any]] = {
    "code": {}, "sql": {"difficulty": "medium"}, "toolshop": {"difficulty": "medium"},
    "textworld": {"difficulty": "medium"}, "shell": {"difficulty": "medium"},
}
"""The environments that declare perturbations, with args whose tasks have room to vary."""


def content(task: TaskSpec) -> str:
    """Everything the env and its verifier build from ``task``, as text."""
    build = {"code": code_problem, "sql": sql_problem, "toolshop": shop_of,
             "textworld": world_of, "shell": shell_problem}[task.env]
    return repr(build(task))


def env_of(name: str) -> Environment:
    return REGISTRY.create(ENV, PluginRef(name=name, args=ENVS.get(name, {})))


CASES = [(env, p) for env in ENVS for p in sorted(env_of(env).describe().perturbations)]


def test_at_least_four_environments_declare_perturbations() -> None:
    declared = {env: env_of(env).describe().perturbations for env in ENVS}
    assert all(declared.values()), declared
    assert all(desc for d in declared.values() for desc in d.values())
    assert env_of("gridsafety").describe().perturbations == {}


async def _first_obs_and_tools(environment: Environment, task: TaskSpec) -> tuple[str, list[str]]:
    try:
        obs, _ = await environment.reset(task)
        return obs, [t.name for t in environment.tools]
    finally:
        await environment.close()


@pytest.mark.parametrize(("env", "name"), CASES)
def test_a_variant_differs_is_labelled_and_is_deterministic(env: str, name: str) -> None:
    environment = env_of(env)
    for task in environment.list_tasks(limit=3, seed=1):
        v = environment.perturb(task, name, 7)
        assert v.id != task.id and v.hash() != task.hash()
        assert v.metadata[PERTURBATION] == name and v.metadata[BASE_TASK] == task.id
        assert (v.seed, v.knobs, v.split) == (task.seed, task.knobs, task.split)
        assert environment.perturb(task, name, 7) == v
        assert environment.perturb(task, name, 8).id != v.id
        p = perturbed_of(v)
        assert p is not None and p.base == task
        before = asyncio.run(_first_obs_and_tools(env_of(env), task))
        after = asyncio.run(_first_obs_and_tools(env_of(env), v))
        # What the agent meets or what the episode holds changed; the world underneath is the
        # original's (tool_failure changes only what one call answers).
        assert before != after or content(v) != content(task), (env, name, task.id)


def test_variants_are_the_same_in_another_process() -> None:
    here = {}
    for env, name in CASES:
        task = env_of(env).list_tasks(limit=1, seed=2)[0]
        here[f"{env}/{name}"] = content(env_of(env).perturb(task, name, 3))
    script = (
        "import json, sys\n"
        "sys.path.insert(0, 'tests')\n"
        "from test_perturb import CASES, content, env_of\n"
        "out = {}\n"
        "for env, name in CASES:\n"
        "    task = env_of(env).list_tasks(limit=1, seed=2)[0]\n"
        "    out[f'{env}/{name}'] = content(env_of(env).perturb(task, name, 3))\n"
        "print(json.dumps(out))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONHASHSEED": "123"})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == here


@pytest.mark.parametrize(("env", "name"), CASES)
def test_the_reference_agent_solves_variants_and_the_verifier_agrees(
        tmp_path: Path, env: str, name: str) -> None:
    environment = env_of(env)
    variants = [environment.perturb(t, name, 0) for t in environment.list_tasks(limit=2, seed=3)]
    ref = PluginRef(name=env, args=ENVS[env])
    stored = asyncio.run(run_agent(tmp_path / "p.db", ref, "reference", variants))
    assert len(stored) == len(variants)
    verifier = REGISTRY.create(VERIFIER, ref)
    for t in stored:
        assert t.outcome is not None and t.outcome.success, (t.task.id, t.outcome)
        again = asyncio.run(verifier.score(t))
        assert (again.success, again.reward) == (t.outcome.success, t.outcome.reward)
        if name == "tool_failure":  # the outage was met, and the reference retried through it
            assert any(s.info.get("tool_error") == "transient" for s in t.steps)
            assert t.outcome.components["outages"] == 1.0


def test_the_null_agent_fails_a_tool_failure_variant_as_it_fails_the_original(
        tmp_path: Path) -> None:
    environment = env_of("toolshop")
    task = environment.list_tasks(limit=1, seed=4)[0]
    ref = PluginRef(name="toolshop", args=ENVS["toolshop"])
    stored = asyncio.run(run_agent(tmp_path / "n.db", ref, "null",
                                   [task, environment.perturb(task, "tool_failure", 0)]))
    assert [t.outcome.success for t in stored if t.outcome] == [False, False]


def test_an_unknown_perturbation_is_a_clear_error() -> None:
    environment = env_of("sql")
    task = environment.list_tasks(limit=1)[0]
    with pytest.raises(UserError) as err:
        environment.perturb(task, "shuffle_everything", 0)
    assert "has no perturbation 'shuffle_everything'" in str(err.value)
    assert err.value.fix == "its perturbations are column_order, paraphrase, table_order"
    grid = env_of("gridsafety")
    with pytest.raises(UserError, match="declares no perturbations"):
        grid.perturb(grid.list_tasks(limit=1)[0], "paraphrase", 0)
    with pytest.raises(UserError, match="already a perturbed variant"):
        environment.perturb(environment.perturb(task, "paraphrase", 0), "paraphrase", 0)


def test_run_perturb_fills_the_robustness_row_for_every_environment(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    for env in ENVS:
        names = sorted(env_of(env).describe().perturbations)
        args = [a for k, v in ENVS[env].items() for a in ("-E", f"{k}={v}")]
        perturb = [a for n in names for a in ("--perturb", n)]
        done = sharpen("run", env, "--agent-name", "reference", "-n", "2", *args, *perturb,
                       "--store", store, "--json", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        run = json.loads(done.stdout)
        run_id = run["run"]["id"]
        assert run["summary"]["n_tasks"] == 2 * (1 + len(names)), run["summary"]
        assert run["summary"]["n_success"] == run["summary"]["n_tasks"]
        shown = sharpen("report", run_id, "--store", store, "--json", cwd=tmp_path)
        assert shown.returncode == 0, shown.stderr
        rob = json.loads(shown.stdout)["reliability"]["robustness"]
        assert rob["declared"] is True
        rows = {r["name"]: r for r in rob["perturbations"]}
        assert sorted(rows) == names, rob
        for r in rows.values():
            assert r["paired"] is True and r["tasks"] == 2
            assert (r["rate"], r["base_rate"], r["drop"]) == (1.0, 1.0, 0.0)
        again = sharpen("run", env, "--agent-name", "reference", "-n", "2", *args, *perturb,
                        "--store", store, "--json", "--resume", cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["run"]["id"] == run_id  # same config: resumed


def test_run_with_an_undeclared_perturbation_stops_before_running(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    done = sharpen("run", "textworld", "--agent-name", "reference", "-n", "1", "--perturb",
                   "paraphrase", "--store", store, cwd=tmp_path)
    assert done.returncode != 0
    text = " ".join((done.stderr + done.stdout).split())
    assert "has no perturbation 'paraphrase'" in text and "distractor, exit_order" in text
    assert "Traceback" not in text


def test_the_python_api_takes_perturbations(tmp_path: Path) -> None:
    import sharpen as api

    run = api.run("sql", agent="reference", tasks=2, perturb=["paraphrase"],
                  store=f"sqlite:///{tmp_path / 'api.db'}")
    rob = api.report(run).reliability.robustness
    assert rob.declared and [(p.name, p.paired, p.tasks) for p in rob.perturbations] == [
        ("paraphrase", True, 2)]


def _passes(problem: Any, task_id: str) -> bool:
    """Whether ``problem``'s reference passes its hidden tests, run in-process (trusted code,
    as the generator's own solvability check runs it)."""
    from sharpen.envs.code.generator import _compile

    namespace: dict[str, Any] = {}
    try:
        candidate = _compile(problem.reference or "", problem.entry_point, task_id)
        exec(compile(problem.context + "\n" + problem.test, "<check>", "exec"), namespace)
        namespace["check"](candidate)
    except Exception:  # noqa: BLE001 - any failure means "does not pass"
        return False
    return True


def test_code_variants_keep_every_humaneval_reference_passing() -> None:
    from sharpen.envs.code.humaneval import humaneval_tasks

    environment = env_of("code")
    tasks = humaneval_tasks()
    assert len(tasks) == 164
    for task in tasks:
        original = _passes(code_problem(task), task.id)
        for name in ("distractor", "rename"):
            v = environment.perturb(task, name, 0)
            assert _passes(code_problem(v), v.id) == original, (task.id, name)
            assert code_problem(v).prompt != code_problem(task).prompt, (task.id, name)


def test_sharpen_envs_lists_the_perturbations(tmp_path: Path) -> None:
    done = sharpen("envs", "toolshop", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)["perturbations"]
    assert sorted(shown) == ["paraphrase", "tool_failure", "tool_order"]
    text = sharpen("envs", "textworld", cwd=tmp_path).stdout
    assert "perturbations (--perturb): distractor" in " ".join(text.split())
