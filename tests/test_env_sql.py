"""The ``sql`` environment: generated databases, gold queries, execution feedback, the
baseline agents and offline re-scoring. Real in-memory SQLite throughout; no model."""

from __future__ import annotations

from pathlib import Path

import pytest

from sharpen.agents.baselines import NullAgent, ReferenceAgent
from sharpen.core import AgentSpec, PluginRef
from sharpen.core.errors import UserError
from sharpen.core.registry import REGISTRY as registry
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action, Step, Trajectory
from sharpen.envs.base import Environment, Generator
from sharpen.envs.sql import (
    SqlEnv,
    SqlTaskGenerator,
    SqlVerifier,
    compare,
    connect,
    problem_of,
    run_query,
)
from sharpen.envs.sql.database import QueryResult
from sharpen.envs.sql.generator import FAMILIES, build, resolve_knobs
from sharpen.runner import RunConfig, Runner
from sharpen.store import Store

DIFFICULTIES = ("easy", "medium", "hard")


def _submit(query: str) -> Action:
    return Action(tool="submit_sql", arguments={"query": query})


def _task(difficulty: str = "easy", family: str = "filter", index: int = 0,
          split: str = "test", **knobs) -> TaskSpec:
    full = resolve_knobs({"family": family, **knobs}, difficulty)
    return SqlTaskGenerator().sample(full, index, split)


def test_protocols_and_registration() -> None:
    assert isinstance(SqlEnv(), Environment)
    assert isinstance(SqlTaskGenerator(), Generator)
    assert registry.get("env", "sql") is SqlEnv
    assert registry.get("verifier", "sql") is SqlVerifier
    info = SqlEnv().describe()
    assert info.tools == ["submit_sql"] and info.difficulties == list(DIFFICULTIES)
    assert {k.name for k in info.knobs} == {"n_tables", "rows", "family", "conditions"}


def test_bad_knobs_name_the_fix() -> None:
    with pytest.raises(UserError, match="n_tables"):
        resolve_knobs({"n_tables": 9})
    with pytest.raises(UserError, match="join"):
        resolve_knobs({"family": "join", "n_tables": 1})
    with pytest.raises(UserError, match="difficulty"):
        SqlEnv(difficulty="extreme")


def test_same_seed_same_task_whatever_runs_in_between() -> None:
    knobs = resolve_knobs(None, "hard")
    first = build(gen_seed := 2_000_000_017, knobs)
    for i in range(5):  # other tasks in between must not change it
        build(1_000_000_000 + i, resolve_knobs(None, "medium"))
    again = build(gen_seed, knobs)
    assert first == again
    assert first.schema == again.schema and first.gold == again.gold
    assert first.tables == again.tables and first.expected == again.expected
    a = SqlEnv(difficulty="medium").list_tasks("val", limit=10, seed=3)
    b = SqlEnv(difficulty="medium").list_tasks("val", limit=20, seed=3)
    assert a == b[:10]


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_fifty_solvable_tasks_per_split(difficulty: str) -> None:
    env, gen = SqlEnv(difficulty=difficulty), SqlTaskGenerator()
    seeds: dict[str, set[int]] = {}
    for split in ("train", "val", "test"):
        tasks = env.list_tasks(split, limit=50)
        assert len({t.id for t in tasks}) == 50
        assert all(t.split == split and gen.is_solvable(t) for t in tasks)
        seeds[split] = {t.seed for t in tasks}
    assert not (seeds["train"] & seeds["val"]) and not (seeds["val"] & seeds["test"])


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_generates(family: str) -> None:
    task = _task("medium", family=family, index=4)
    p = problem_of(task)
    assert p.family == family and p.expected.rows
    assert (" ORDER BY " in p.gold) == p.ordered == (family == "order_limit")


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
async def test_reference_succeeds_and_null_fails(difficulty: str) -> None:
    tasks = SqlEnv(difficulty=difficulty).list_tasks("test", limit=50)
    wins = {"reference": 0, "null": 0}
    for task in tasks:
        for name, agent in (("reference", ReferenceAgent()), ("null", NullAgent())):
            env = SqlEnv(difficulty=difficulty)
            traj = Trajectory(task=task, agent_hash="x")
            await agent.run(env, None, AgentSpec(), traj)  # type: ignore[arg-type]
            outcome = await env.outcome()
            wins[name] += outcome.success
            assert outcome.success == (await SqlVerifier().score(traj)).success
    assert wins["reference"] >= 48 and wins["null"] <= 1


async def test_baselines_through_the_runner(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    env_ref = PluginRef(name="sql", args={"difficulty": "medium"})
    tasks = SqlEnv(difficulty="medium").list_tasks("val", limit=12)
    rates = {}
    for name in ("reference", "null"):
        spec = AgentSpec(agent=PluginRef(name=name), model=PluginRef(name="none"))
        summary = await Runner(store, progress=False).run(
            RunConfig(env=env_ref, agent=spec, tasks=tasks))
        rates[name] = summary.success_rate
    assert rates == {"reference": 1.0, "null": 0.0}


async def test_non_select_is_rejected_without_using_a_submission() -> None:
    env = SqlEnv(max_submissions=1)
    await env.reset(_task())
    for bad in ("DELETE FROM customers", "DROP TABLE products", "-- hi\nPRAGMA query_only=OFF",
                "", "   ", "```sql\nUPDATE employees SET salary = 0\n```"):
        r = await env.step(_submit(bad))
        assert r.info["invalid"] and not r.terminated and r.info["submissions_left"] == 1
    r = await env.step(_submit("DELETE FROM customers"))
    assert "Only SELECT" in r.observation and "'DELETE'" in r.observation
    r = await env.step(Action(tool="run", arguments={"query": "SELECT 1"}))
    assert "Unknown tool 'run'" in r.observation
    assert env.submissions_left == 1


async def test_writes_hidden_in_a_with_are_refused_by_the_database() -> None:
    task = _task()
    problem = problem_of(task)
    table = problem.tables[0].name
    env = SqlEnv()
    await env.reset(task)
    r = await env.step(_submit(f"WITH x AS (SELECT 1) DELETE FROM {table}"))
    assert not r.info["correct"] and r.observation.startswith("SQL error:")
    r = await env.step(_submit(problem.gold))  # the data is intact
    assert r.info["correct"] and r.terminated and r.reward == 1.0


async def test_sql_error_and_count_feedback() -> None:
    task = _task("easy", family="filter", index=1)
    problem = problem_of(task)
    table = problem.tables[0].name
    env = SqlEnv(max_submissions=3)
    await env.reset(task)
    r = await env.step(_submit(f"SELECT nosuchcol FROM {table}"))
    assert r.observation.startswith("SQL error: no such column: nosuchcol")
    assert r.feedback[0].source == "execution" and r.feedback[0].value == 0.0
    assert "2 submissions left" in r.observation
    n_cols = problem.expected.n_columns
    r = await env.step(_submit(f"SELECT id, name, 1, 2 FROM {table}"))
    assert r.observation.startswith(f"Your result has 4 columns, expected {n_cols}.")
    cols = ", ".join(["name"] + ["id"] * (n_cols - 1))
    r = await env.step(_submit(f"SELECT {cols} FROM {table}"))
    n, want = len(problem.tables[0].rows), len(problem.expected.rows)
    assert r.observation.startswith(f"Your result has {n} rows, expected {want}.")
    assert r.terminated and "No submissions left" in r.observation
    assert not (await env.outcome()).success
    r = await env.step(_submit(problem.gold))
    assert r.info["invalid"] and r.terminated


async def test_fenced_sql_and_timeouts() -> None:
    task = _task()
    problem = problem_of(task)
    env = SqlEnv(time_limit=0.2)
    await env.reset(task)
    slow = ("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
            "SELECT count(*) FROM n")
    r = await env.step(_submit(slow))
    assert r.info["timed_out"] and "was stopped" in r.observation
    r = await env.step(_submit(f"Here it is:\n```sql\n{problem.gold};\n```"))
    assert r.info["correct"] and (await env.outcome()).success


def test_order_by_semantics() -> None:
    gold = QueryResult(rows=((1, "a"), (2, "b"), (2, "b")), n_columns=2)
    shuffled = QueryResult(rows=((2, "b"), (1, "a"), (2, "b")), n_columns=2)
    deduped = QueryResult(rows=((1, "a"), (2, "b"), (3, "c")), n_columns=2)
    assert compare(shuffled, gold, ordered=False) is None
    assert compare(shuffled, gold, ordered=True) == "Your result has the right rows but in the wrong order."
    assert compare(deduped, gold, ordered=False).startswith("Your result has the right shape")
    assert compare(QueryResult(rows=((1.0000000001,),), n_columns=1),
                   QueryResult(rows=((1,),), n_columns=1), ordered=False) is None


async def test_order_limit_task_needs_the_order() -> None:
    task = _task("medium", family="order_limit", index=2)
    problem = problem_of(task)
    assert problem.ordered and len(problem.expected.rows) >= 2
    flip = "ASC" if " DESC, id ASC" in problem.gold else "DESC"
    reordered = f"SELECT * FROM ({problem.gold}) ORDER BY 2 {flip}, 1 DESC"
    conn = connect(problem.tables)
    got = run_query(conn, reordered)
    conn.close()
    assert sorted(map(repr, got.rows)) == sorted(map(repr, problem.expected.rows))
    assert got.rows != problem.expected.rows
    env = SqlEnv()
    await env.reset(task)
    r = await env.step(_submit(reordered))
    assert r.observation.startswith("Your result has the right rows but in the wrong order.")
    assert not r.info["correct"]
    # the same rows in any order are fine when the gold query has no ORDER BY
    unordered = _task("medium", family="filter", index=2)
    gold = problem_of(unordered).gold
    await env.reset(unordered)
    r = await env.step(_submit(f"SELECT * FROM ({gold}) ORDER BY 1 DESC"))
    assert r.info["correct"]


async def test_verifier_rescore_equals_env_outcome() -> None:
    task = _task("hard", family="join", index=7)
    problem = problem_of(task)
    env = SqlEnv(difficulty="hard", max_submissions=3)
    await env.reset(task)
    actions = [_submit("SELECT 1"), _submit("DROP TABLE orders"), _submit(problem.gold)]
    steps = []
    for i, a in enumerate(actions):
        await env.step(a)
        steps.append(Step(index=i, messages=[], action=a))
    live = await env.outcome()
    stored = Trajectory(task=TaskSpec.model_validate_json(task.model_dump_json()),
                        agent_hash="x", steps=steps)
    offline = await SqlVerifier(difficulty="hard", max_submissions=3).score(stored)
    assert live.success and live.reward == 1.0 and live.components["submissions"] == 2.0
    assert offline.model_dump() == live.model_dump()
    empty = await SqlVerifier().score(Trajectory(task=task, agent_hash="x"))
    assert not empty.success and empty.evidence == "no submission"


async def test_a_fenced_sql_reply_maps_to_submit_sql() -> None:
    from sharpen.agents.text_protocol import parse_text_action

    task = _task("easy", family="aggregate", index=3)
    gold = problem_of(task).gold
    env = SqlEnv()
    action = parse_text_action(f"The answer:\n```sql\n{gold}\n```", env.tools)
    assert action == _submit(f"{gold}\n") or action.arguments["query"].strip() == gold
    await env.reset(task)
    assert (await env.step(action)).info["correct"]


@pytest.mark.parametrize("family", FAMILIES)
def test_tiny_tables_still_give_solvable_tasks(family: str) -> None:
    gen = SqlTaskGenerator()
    knobs = {"n_tables": 2, "rows": 5, "family": family, "conditions": 3}
    tasks = [gen.sample(knobs, i, "train") for i in range(5)]
    assert all(gen.is_solvable(t) for t in tasks)
