"""Submissions and scoring for the ``sql`` env: the ``submit_sql`` tool, validation, the
Outcome of a checked query, and the offline :class:`SqlVerifier`.

Validation (:func:`submit_error`) — an invalid action is explained and costs no submission:
the tool must be ``submit_sql`` with a non-empty string ``query``; a fenced block inside it
is unwrapped; the statement must start with ``SELECT`` or ``WITH`` (after comments).

Scoring (:func:`check` + :func:`outcome_from_check`), used by the env (live) and the verifier
(offline) alike: the query runs on a fresh copy of the task's database; ``success`` means its
result equals the gold query's (as multisets of rows; in order when the gold query has
``ORDER BY``); ``reward`` is 1.0 on success and 0.0 otherwise.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from sharpen.core.markdown import code_blocks
from sharpen.core.messages import ToolSpec
from sharpen.core.outcome import Outcome
from sharpen.core.registry import register
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action, Trajectory
from sharpen.envs.base import BaseVerifier
from sharpen.envs.perturbation import perturbed_of, rng_of, unknown
from sharpen.envs.sql.database import QueryResult, compare, connect, run_query
from sharpen.envs.sql.generator import SqlProblem, SqlTaskGenerator
from sharpen.envs.sql.perturb import PERTURBATIONS, perturb_problem

SUBMIT_SQL = ToolSpec(
    name="submit_sql",
    description=(
        "Submit one SQLite SELECT (or WITH ... SELECT) query that answers the question. It is "
        "run on the database and its result compared with the expected one; you see SQL errors "
        "and row/column count mismatches."
    ),
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string", "description": "One SQLite SELECT statement."}},
        "required": ["query"],
    },
    text_argument="query",
    text_hint="To answer, reply with one SQLite SELECT query in a ```sql code block",
    final=True,
)
"""The one tool of the sql environment."""

NO_SUBMISSION = "no submission"
_COMMENTS = re.compile(r"(--[^\n]*(\n|$))|(/\*.*?\*/)", re.DOTALL)


def extract_query(text: str) -> str:
    """The query inside ``text``: the first fenced block if there is one (``sql`` blocks
    first), else the whole text; stripped of whitespace."""
    if "```" in text:
        blocks = code_blocks(text)
        sql = [b for b in blocks if b.lang == "sql"] or blocks
        text = sql[0].body if sql else text.replace("```", "")
    return text.strip()


def submit_error(action: Action) -> str | None:
    """Why ``action`` is not a valid submission, or ``None`` if it is."""
    if action.tool != SUBMIT_SQL.name:
        return (f"Unknown tool {action.tool!r}. The only tool is `submit_sql`, with one "
                "argument `query`: one SQLite SELECT statement.")
    if "query" not in action.arguments:
        got = ", ".join(sorted(action.arguments)) or "none"
        return f"`submit_sql` needs the argument `query`; arguments given: {got}."
    query = action.arguments["query"]
    if not isinstance(query, str):
        return f"`query` must be a string of SQL, not {type(query).__name__}."
    body = _COMMENTS.sub(" ", extract_query(query)).strip()
    if not body:
        return "`query` is empty. Submit one SQLite SELECT statement."
    first = body.split(None, 1)[0].upper().rstrip(";(")
    if first not in ("SELECT", "WITH"):
        return (f"Only SELECT (or WITH ... SELECT) queries are allowed; your statement starts "
                f"with {first!r}. The database is read-only. This did not use a submission.")
    return None


@dataclass(frozen=True)
class Check:
    """One submitted query, run and compared."""

    result: QueryResult
    mismatch: str | None

    @property
    def correct(self) -> bool:
        return self.mismatch is None


@functools.lru_cache(maxsize=1024)
def problem_of(task: TaskSpec) -> SqlProblem:
    """The task's problem (cached: epochs and re-scoring ask for the same task again); a
    perturbed variant's is its original's, changed by :mod:`sharpen.envs.sql.perturb`."""
    variant = perturbed_of(task)
    if variant is not None:
        if variant.name not in PERTURBATIONS:
            raise unknown("sql", variant, PERTURBATIONS)
        return perturb_problem(problem_of(variant.base), variant.name, rng_of(variant), task.id)
    return SqlTaskGenerator().materialize(task)


def check(query: str, problem: SqlProblem, time_limit: float = 2.0) -> Check:
    """Run ``query`` on a fresh copy of ``problem``'s database and compare with the gold."""
    conn = connect(problem.tables)
    try:
        result = run_query(conn, extract_query(query), time_limit)
    finally:
        conn.close()
    return Check(result, compare(result, problem.expected, problem.ordered))


def outcome_from_check(last: Check | None, submissions: int, problem: SqlProblem) -> Outcome:
    """The verdict after ``submissions`` valid submissions, the last of which gave ``last``."""
    expected = float(len(problem.expected.rows))
    if last is None:
        return Outcome(success=False, reward=0.0, evidence=NO_SUBMISSION,
                       components={"correct": 0.0, "rows": 0.0, "rows_expected": expected,
                                   "submissions": float(submissions)})
    return Outcome(
        success=last.correct, reward=1.0 if last.correct else 0.0,
        components={"correct": float(last.correct), "rows": float(len(last.result.rows)),
                    "rows_expected": expected, "submissions": float(submissions)},
        evidence="The result matches the expected result." if last.correct else str(last.mismatch),
    )


@register("verifier", "sql")
class SqlVerifier(BaseVerifier):
    """Re-scores a stored sql trajectory offline. Takes the env's arguments (only
    ``max_submissions`` and ``time_limit`` matter): the valid ``submit_sql`` actions of the
    trajectory, in order and at most ``max_submissions``, and the last one is run again on a
    fresh database rebuilt from ``trajectory.task``."""

    def __init__(self, difficulty: str = "easy", knobs: dict | None = None,
                 max_submissions: int = 3, time_limit: float = 2.0) -> None:
        self.max_submissions = max_submissions
        self.time_limit = time_limit

    async def score(self, trajectory: Trajectory) -> Outcome:
        """The Outcome of the trajectory's last valid submission (see the class doc)."""
        problem = problem_of(trajectory.task)
        queries = [s.action.arguments["query"] for s in trajectory.steps
                   if s.action is not None and submit_error(s.action) is None][: self.max_submissions]
        if not queries:
            return outcome_from_check(None, 0, problem)
        return outcome_from_check(check(queries[-1], problem, self.time_limit), len(queries),
                                  problem)
