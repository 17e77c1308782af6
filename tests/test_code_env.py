"""CodeEnv and CodeVerifier with real sandboxes: HumanEval and generated tasks."""

from __future__ import annotations

import pytest

from sharpen.core.errors import UserError
from sharpen.core.registry import REGISTRY
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action, Step, Trajectory
from sharpen.envs.base import Environment, Verifier
from sharpen.envs.code import CodeEnv, CodeVerifier, materialize
from sharpen.envs.code.humaneval import humaneval_problem, humaneval_problems, humaneval_tasks
from sharpen.envs.code.program import assemble_program, extract_code

WRONG_0 = "def has_close_elements(numbers, threshold):\n    return False\n"


def _task(task_id: str) -> TaskSpec:
    return next(t for t in humaneval_tasks() if t.id == task_id)


def _submit(code: object) -> Action:
    return Action(tool="submit", arguments={"code": code})


# -- tasks ------------------------------------------------------------------------------


def test_humaneval_loads_all_164_with_fixed_splits() -> None:
    problems = humaneval_problems()
    assert len(problems) == 164
    p = humaneval_problem("HumanEval/32")
    assert p.entry_point == "find_zero" and p.context == p.prompt
    assert p.reference is not None and p.reference.startswith(p.prompt)
    every = humaneval_tasks()
    assert [t.id for t in every] == [f"HumanEval/{i}" for i in range(164)]
    counts = {s: len(humaneval_tasks(s)) for s in ("train", "val", "test")}
    assert counts == {"train": 64, "val": 36, "test": 64}
    by_split = {s: {t.id for t in humaneval_tasks(s)} for s in counts}
    assert not by_split["train"] & by_split["test"] and not by_split["val"] & by_split["test"]
    assert all(materialize(t).task_id == t.id for t in every[:5])
    with pytest.raises(UserError):
        humaneval_problem("HumanEval/999")


def test_list_tasks_and_describe() -> None:
    env = CodeEnv()
    assert isinstance(env, Environment)
    assert [t.id for t in env.list_tasks(limit=20)] == [f"HumanEval/{i}" for i in range(20)]
    assert len(env.list_tasks("test")) == 64
    info = env.describe()
    assert info.name == "code" and info.tools == ["submit"]
    assert {k.name for k in info.knobs} == {"family", "n_ops", "n_tests", "edge_cases"}
    assert info.difficulties == ["easy", "medium", "hard"]
    assert info.task_counts == {"train": 64, "val": 36, "test": 64}

    gen = CodeEnv(source="generated", difficulty="hard", knobs={"n_tests": 6})
    tasks = gen.list_tasks("val", limit=12, seed=3)
    assert len(tasks) == 12 and all(t.split == "val" for t in tasks)
    assert all(t.knobs["n_ops"] == 5 and t.knobs["n_tests"] == 6 for t in tasks)
    assert [t.id for t in gen.list_tasks("val", limit=5, seed=3)] == [t.id for t in tasks[:5]]
    assert gen.list_tasks("val", limit=5, seed=4) != tasks[:5]
    assert len(gen.list_tasks("train")) == 50
    mixed = gen.list_tasks(limit=6)
    assert [t.split for t in mixed] == ["train", "val", "test"] * 2
    assert gen.describe().task_counts == {"train": 50, "val": 50, "test": 50}
    with pytest.raises(UserError):
        env.list_tasks("dev")


def test_bad_constructor_args_are_user_errors() -> None:
    for kwargs in ({"source": "mbpp"}, {"feedback": "verbose"}, {"max_submissions": 0},
                   {"difficulty": "extreme"}, {"knobs": {"n_ops": 99}}):
        with pytest.raises(UserError):
            CodeEnv(**kwargs)
    with pytest.raises(UserError, match="bad arguments"):
        REGISTRY.create("env", {"name": "code", "args": {"sauce": "humaneval"}})


# -- program assembly ---------------------------------------------------------------------


def test_program_assembly() -> None:
    p = humaneval_problem("HumanEval/2")  # truncate_number
    whole = "def truncate_number(number: float) -> float:\n    return number % 1.0\n"
    assert assemble_program(whole, p) == p.prompt + "\n\n" + whole
    fenced = f"Here it is:\n```python\n{whole}```\nDone."
    assert assemble_program(fenced, p) == p.prompt + "\n\n" + whole
    assert extract_code("```python\n" + whole, "truncate_number") == whole  # unclosed fence
    assert assemble_program("    return number % 1.0\n", p) == p.prompt + "    return number % 1.0\n"
    assert assemble_program("return number % 1.0", p) == p.prompt + "    return number % 1.0\n"
    indented = "    def truncate_number(number):\n        return number % 1.0\n"
    assert assemble_program(indented, p).endswith("\n\ndef truncate_number(number):\n"
                                                  "    return number % 1.0\n")


# -- episodes in the real sandbox ---------------------------------------------------------


@pytest.mark.parametrize("task_id", ["HumanEval/0", "HumanEval/32", "HumanEval/38"])
async def test_canonical_solution_succeeds(task_id: str) -> None:
    env = REGISTRY.create("env", {"name": "code", "args": {}})
    problem = humaneval_problem(task_id)
    prompt, info = await env.reset(_task(task_id))
    assert problem.prompt.strip() in prompt and "```python" in prompt
    assert info["entry_point"] == problem.entry_point and info["submissions_left"] == 3
    result = await env.step(_submit(problem.reference))
    assert result.terminated and result.reward == 1.0, result.observation
    assert result.info["tests_passed"] == result.info["tests_total"] > 0
    assert result.feedback[0].source == "execution" and result.feedback[0].value == 1.0
    assert result.feedback[0].target.kind == "step" and result.feedback[0].target.step_index == 0
    outcome = await env.outcome()
    assert outcome.success and outcome.reward == 1.0
    assert outcome.components["submissions"] == 1
    await env.close()


async def test_body_completion_succeeds() -> None:
    env = CodeEnv()
    problem = humaneval_problem("HumanEval/4")
    body = (problem.reference or "")[len(problem.prompt):]  # the canonical solution
    await env.reset(_task("HumanEval/4"))
    result = await env.step(_submit(body))
    assert result.terminated and result.reward == 1.0, result.observation


async def test_wrong_solution_gets_feedback_and_runs_out_of_submissions() -> None:
    env = CodeEnv(max_submissions=3)
    await env.reset(_task("HumanEval/0"))
    lefts = []
    for i in range(3):
        r = await env.step(_submit(WRONG_0))
        assert 0.0 < r.reward < 1.0
        assert r.info["tests_passed"] < r.info["tests_total"]
        assert r.feedback[0].target.step_index == i
        lefts.append(r.info["submissions_left"])
        # the failing assertion is named in the feedback
        assert "candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3)" in r.observation
        assert r.terminated == (i == 2)
    assert lefts == [2, 1, 0]
    assert "1 submission left" in (await _fresh_step(WRONG_0, 2))
    outcome = await env.outcome()
    assert not outcome.success and 0 < outcome.reward < 1
    assert outcome.components["submissions"] == 3 and "3.9" in outcome.evidence
    after = await env.step(_submit(WRONG_0))
    assert after.terminated and after.info["invalid"]


async def _fresh_step(code: str, max_submissions: int) -> str:
    env = CodeEnv(max_submissions=max_submissions)
    await env.reset(_task("HumanEval/0"))
    return (await env.step(_submit(code))).observation


async def test_invalid_actions_do_not_consume_submissions() -> None:
    env = CodeEnv(max_submissions=1)
    await env.reset(_task("HumanEval/2"))
    cases = [
        (Action(tool="run", arguments={"code": "x"}), "Unknown tool 'run'"),
        (Action(tool="submit", arguments={"source": "x"}), "needs the argument `code`"),
        (_submit(42), "must be a string"),
        (_submit("   "), "empty"),
    ]
    for action, message in cases:
        r = await env.step(action)
        assert message in r.observation
        assert r.info["invalid"] and r.reward == 0.0 and not r.terminated and not r.feedback
        assert r.info["submissions_left"] == 1
    no_sub = await env.outcome()
    assert not no_sub.success and no_sub.evidence == "no submission"
    r = await env.step(_submit(humaneval_problem("HumanEval/2").reference))
    assert r.terminated and r.reward == 1.0
    assert r.feedback[0].target.step_index == len(cases)


async def test_binary_feedback_hides_the_details() -> None:
    env = CodeEnv(feedback="binary")
    await env.reset(_task("HumanEval/0"))
    r = await env.step(_submit(WRONG_0))
    assert r.observation.startswith("Some hidden tests failed.")
    assert "3.9" not in r.observation and "2 submissions left" in r.observation
    assert 0 < r.reward < 1 and "3.9" in r.feedback[0].rationale


async def test_generated_task_through_the_env() -> None:
    env = CodeEnv(source="generated", difficulty="medium")
    task = env.list_tasks("test", limit=1)[0]
    problem = materialize(task)
    _, info = await env.reset(task)
    assert info["entry_point"] == problem.entry_point
    r = await env.step(_submit("pass"))
    assert r.reward == 0.0 and not r.terminated
    r = await env.step(_submit(problem.reference))
    assert r.terminated and r.reward == 1.0, r.observation


# -- offline re-scoring -------------------------------------------------------------------


async def test_verifier_agrees_with_the_env() -> None:
    task = _task("HumanEval/0")
    right = humaneval_problem("HumanEval/0").reference
    for actions in (
        [_submit(WRONG_0)],
        [_submit(WRONG_0), Action(tool="nope"), _submit(right)],
        [Action(tool="submit", arguments={})],
        [_submit(WRONG_0)] * 4,  # beyond max_submissions: the env rejects the 4th
    ):
        env = CodeEnv(max_submissions=3)
        await env.reset(task)
        steps = []
        for i, action in enumerate(actions):
            r = await env.step(action)
            steps.append(Step(index=i, messages=[], action=action, observation=r.observation,
                              reward=r.reward, terminated=r.terminated, info=r.info))
        live = await env.outcome()
        trajectory = Trajectory(task=task, agent_hash="test", steps=steps)
        verifier = REGISTRY.create("verifier", {"name": "code", "args": {"max_submissions": 3}})
        assert isinstance(verifier, CodeVerifier) and isinstance(verifier, Verifier)
        offline = await verifier.score(trajectory)
        assert offline.model_dump() == live.model_dump()


async def test_verifier_rebuilds_generated_tasks_from_the_taskspec() -> None:
    task = CodeEnv(source="generated", difficulty="hard").list_tasks("train", limit=1)[0]
    stored = TaskSpec.model_validate_json(task.model_dump_json())
    reference = materialize(stored).reference
    trajectory = Trajectory(task=stored, agent_hash="test",
                            steps=[Step(index=0, messages=[], action=_submit(reference))])
    outcome = await CodeVerifier().score(trajectory)
    assert outcome.success and outcome.components["submissions"] == 1
