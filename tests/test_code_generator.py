"""FunctionTaskGenerator: determinism, solvability, split disjointness, real-sandbox checks."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

from sharpen.core.errors import UserError
from sharpen.envs.base import Generator
from sharpen.envs.code.generator import PRESETS, FunctionTaskGenerator, resolve_knobs
from sharpen.envs.code.program import assemble_program
from sharpen.envs.code.verifier import run_tests
from sharpen.envs.generation import SPLIT_SPAN, SPLITS, split_of_seed

GEN = FunctionTaskGenerator()
PER_SPLIT = 50


def _behaviour(prompt: str) -> str:
    """The docstring's words without the examples: what the function must do."""
    return prompt.split(">>>")[0]


@pytest.fixture(scope="module")
def tasks_by_preset() -> dict[str, dict[str, list]]:
    return {
        name: {split: [GEN.sample(knobs, i, split) for i in range(PER_SPLIT)] for split in SPLITS}
        for name, knobs in PRESETS.items()
    }


def test_implements_generator_protocol() -> None:
    assert isinstance(GEN, Generator)
    names = [k.name for k in GEN.knobs()]
    assert names == ["family", "n_ops", "n_tests", "edge_cases"]
    assert set(GEN.presets()) == {"easy", "medium", "hard"}


def test_same_seed_and_knobs_give_identical_problem_in_any_order() -> None:
    knobs = PRESETS["medium"]
    first = [GEN.materialize(GEN.sample(knobs, s, "train")).model_dump() for s in range(8)]
    # interleave other seeds, other knobs and other splits, in reverse order
    again = {}
    for s in reversed(range(8)):
        GEN.sample(PRESETS["hard"], s + 100, "test")
        GEN.materialize(GEN.sample(knobs, s, "val"))
        again[s] = GEN.materialize(GEN.sample(knobs, s, "train")).model_dump()
    assert [again[s] for s in range(8)] == first
    a = GEN.sample({"family": "list", "n_ops": 4}, 3, "val")
    b = GEN.sample({"family": "list", "n_ops": 4}, 3, "val")
    assert a == b and a.hash() == b.hash()
    assert GEN.materialize(a).model_dump() == GEN.materialize(b).model_dump()


def test_materialize_is_identical_in_another_process() -> None:
    task = GEN.sample(PRESETS["hard"], 42, "test")
    here = GEN.materialize(task).model_dump_json()
    code = (
        "import sys\n"
        "from sharpen.core.task import TaskSpec\n"
        "from sharpen.envs.code.generator import FunctionTaskGenerator\n"
        "t = TaskSpec.model_validate_json(sys.argv[1])\n"
        "print(FunctionTaskGenerator().materialize(t).model_dump_json())\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code, task.model_dump_json()], env=env,
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == json.loads(here)


def test_task_spec_shape() -> None:
    task = GEN.sample(PRESETS["easy"], 7, "val")
    assert task.env == "code"
    assert task.split == "val" and split_of_seed(task.seed) == "val"
    assert task.seed == SPLIT_SPAN + 7
    assert task.id == f"gen/{task.metadata['family']}-1/{task.seed}"
    assert task.metadata["source"] == "generated"
    assert task.metadata["difficulty"] == "easy"
    assert task.knobs == PRESETS["easy"]
    custom = GEN.sample({"n_tests": 9}, 7, "val")
    assert custom.metadata["difficulty"] == "custom"
    problem = GEN.materialize(task)
    assert problem.task_id == task.id
    assert problem.prompt.startswith(f"def {problem.entry_point}(")
    assert ">>> " in problem.prompt
    assert problem.test.startswith("def check(candidate):\n")
    assert problem.test.count("    assert candidate(") == 5
    assert problem.reference is not None and problem.reference.startswith(problem.prompt)


def test_knobs_shape_the_task() -> None:
    for family in ("arith", "list", "string"):
        for n_ops in (1, 6):
            t = GEN.sample({"family": family, "n_ops": n_ops, "n_tests": 20,
                            "edge_cases": True}, 1, "train")
            assert t.metadata["family"] == family
            p = GEN.materialize(t)
            assert p.test.count("assert ") == 20
            assert GEN.is_solvable(t)


def test_bad_knobs_are_user_errors() -> None:
    with pytest.raises(UserError, match="n_opz"):
        resolve_knobs({"n_opz": 2})
    with pytest.raises(UserError, match="n_ops"):
        resolve_knobs({"n_ops": 9})
    with pytest.raises(UserError, match="family"):
        resolve_knobs({"family": "graphs"})
    with pytest.raises(UserError, match="edge_cases"):
        resolve_knobs({"edge_cases": "yes"})
    with pytest.raises(UserError, match="difficulty"):
        resolve_knobs(None, "extreme")
    with pytest.raises(UserError, match="split"):
        GEN.sample({}, 0, "dev")


def test_fifty_solvable_tasks_per_split_at_each_difficulty(tasks_by_preset) -> None:
    for name, by_split in tasks_by_preset.items():
        for split, tasks in by_split.items():
            assert len({t.id for t in tasks}) == PER_SPLIT, (name, split)
            assert all(t.split == split for t in tasks)
            unsolvable = [t.id for t in tasks if not GEN.is_solvable(t)]
            assert unsolvable == [], (name, split)


def test_splits_are_disjoint_in_seeds_and_behaviour(tasks_by_preset) -> None:
    for by_split in tasks_by_preset.values():
        seeds = {s: {t.seed for t in ts} for s, ts in by_split.items()}
        words = {s: {_behaviour(GEN.materialize(t).prompt) for t in ts}
                 for s, ts in by_split.items()}
        for a, b in (("train", "val"), ("train", "test"), ("val", "test")):
            assert not seeds[a] & seeds[b]
            assert not words[a] & words[b], (a, b)
        assert all(split_of_seed(t.seed) == s for s, ts in by_split.items() for t in ts)


async def test_references_pass_and_stubs_fail_in_the_real_sandbox(tasks_by_preset) -> None:
    sample = [by_split[SPLITS[i % 3]][i] for by_split in tasks_by_preset.values()
              for i in range(10)]
    problems = [GEN.materialize(t) for t in sample]
    sem = asyncio.Semaphore(8)

    async def run(program: str, problem):
        async with sem:
            return await run_tests(program, problem, timeout=20.0)

    refs = await asyncio.gather(*(run(p.reference or "", p) for p in problems))
    stubs = await asyncio.gather(*(run(assemble_program("pass", p), p) for p in problems))
    for problem, ref, stub in zip(problems, refs, stubs, strict=False):
        assert ref.all_passed, (problem.task_id, ref.feedback_text())
        assert ref.total == problem.test.count("assert ")
        assert stub.passed == 0 and not stub.all_passed, problem.task_id
