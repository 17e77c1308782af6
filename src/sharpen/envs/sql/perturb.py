"""The sql environment's declared perturbations, applied where a problem is materialised.

- ``paraphrase`` — the question is introduced by a different lead-in and asked as a request
  ("Write a query that answers this: ..."); what it asks is unchanged.
- ``table_order`` — the CREATE TABLE statements are shown in another order.
- ``column_order`` — each table's columns (all but ``id``, which stays first) are stored and
  shown in another order, the rows permuted to match.

The gold query names its tables and columns, so it answers the variant as it answered the
original; the expected result is recomputed on the variant's database all the same, so the
verifier compares against exactly what the gold query gives there.
"""

from __future__ import annotations

import random
from dataclasses import replace

from sharpen.envs.sql.database import Table, connect, run_query
from sharpen.envs.sql.generator import SqlProblem

PERTURBATIONS: dict[str, str] = {
    "paraphrase": "the question is worded as a request with another lead-in",
    "table_order": "the CREATE TABLE statements are shown in another order",
    "column_order": "each table's columns (id first) are stored and shown in another order",
}
"""Name -> what it changes (``SqlEnv.perturbations``)."""

_LEADS = (
    "A colleague from the analytics team needs an answer. {q}",
    "Write a query that answers this: {q}",
    "Using the tables above, answer the following. {q}",
    "The manager asks: {q}",
)


def perturb_problem(problem: SqlProblem, name: str, rng: random.Random,
                    task_id: str) -> SqlProblem:
    """``problem`` under perturbation ``name`` (one of :data:`PERTURBATIONS`), as task
    ``task_id``."""
    if name == "paraphrase":
        question = rng.choice(_LEADS).format(q=problem.question)
        return replace(problem, task_id=task_id, question=question)
    if name == "table_order":
        tables = list(problem.tables)
        while len(tables) > 1 and tuple(tables) == problem.tables:
            rng.shuffle(tables)
        return replace(problem, task_id=task_id, tables=tuple(tables))
    if name == "column_order":
        shuffled = tuple(_shuffled_columns(t, rng) for t in problem.tables)
        conn = connect(shuffled)
        try:
            expected = run_query(conn, problem.gold, time_limit=30.0)
        finally:
            conn.close()
        return replace(problem, task_id=task_id, tables=shuffled, expected=expected)
    raise ValueError(f"unknown sql perturbation {name!r}")


def _shuffled_columns(table: Table, rng: random.Random) -> Table:
    """``table`` with its non-``id`` columns in a new order (a different one when there are
    two or more) and each row permuted alike."""
    order = [i for i, (c, _) in enumerate(table.columns) if c != "id"]
    first = [i for i, (c, _) in enumerate(table.columns) if c == "id"]
    new = list(order)
    while len(new) > 1 and new == order:
        rng.shuffle(new)
    index = first + new
    return Table(name=table.name, columns=tuple(table.columns[i] for i in index),
                 rows=tuple(tuple(r[i] for i in index) for r in table.rows))
