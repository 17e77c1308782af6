"""The SQL environment's databases: building one in memory, running an agent's query safely,
and comparing result sets.

Safety. A task's database lives in ``sqlite3`` ``:memory:``, built afresh from the task's
rows. Before any submitted query runs, the connection is locked down:

- ``PRAGMA query_only=ON`` — no statement may write;
- an authorizer that allows only reading (``SELECT``, column reads, functions, recursive
  CTEs) — ``ATTACH``, ``PRAGMA`` and every write are denied;
- a progress handler that interrupts a query after ``time_limit`` seconds;
- at most :data:`MAX_ROWS` result rows are fetched.

Comparison (:func:`compare`): floats are rounded to 6 decimals; with ``ordered`` the rows
must come in the same order, otherwise they are compared as multisets.
"""

from __future__ import annotations

import sqlite3
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

MAX_ROWS = 10_000
"""Rows fetched from one submitted query; more is reported as an error."""

Row = tuple[Any, ...]


@dataclass(frozen=True)
class Table:
    """One generated table: its name, ``(column, SQL type)`` pairs and rows."""

    name: str
    columns: tuple[tuple[str, str], ...]
    rows: tuple[Row, ...]

    def create_sql(self) -> str:
        cols = ",\n  ".join(
            f"{c} {t}" + (" PRIMARY KEY" if c == "id" else "") for c, t in self.columns)
        return f"CREATE TABLE {self.name} (\n  {cols}\n);"


@dataclass(frozen=True)
class QueryResult:
    """What one query gave: its rows and column count, or an error message."""

    rows: tuple[Row, ...] = ()
    n_columns: int = 0
    error: str | None = None
    timed_out: bool = False


def connect(tables: tuple[Table, ...]) -> sqlite3.Connection:
    """A fresh in-memory database holding ``tables``, locked down for reading only."""
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    for table in tables:
        conn.execute(table.create_sql())
        marks = ", ".join("?" * len(table.columns))
        conn.executemany(f"INSERT INTO {table.name} VALUES ({marks})", table.rows)
    conn.execute("PRAGMA query_only=ON")
    conn.set_authorizer(_authorize)
    return conn


_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
            getattr(sqlite3, "SQLITE_RECURSIVE", 33)}


def _authorize(action: int, *_: Any) -> int:
    return sqlite3.SQLITE_OK if action in _ALLOWED else sqlite3.SQLITE_DENY


def run_query(conn: sqlite3.Connection, query: str, time_limit: float = 2.0) -> QueryResult:
    """Run ``query`` on ``conn`` within ``time_limit`` seconds (see the module doc)."""
    deadline = time.monotonic() + time_limit
    stopped = False

    def check() -> int:
        nonlocal stopped
        stopped = time.monotonic() > deadline
        return 1 if stopped else 0

    conn.set_progress_handler(check, 1000)
    try:
        cursor = conn.execute(query)
        rows = cursor.fetchmany(MAX_ROWS + 1)
        n_columns = len(cursor.description or ())
    except sqlite3.Warning as exc:  # e.g. "You can only execute one statement at a time."
        return QueryResult(error=str(exc))
    except sqlite3.Error as exc:
        if stopped:
            return QueryResult(error=f"the query ran longer than {time_limit:g} s and was stopped",
                               timed_out=True)
        return QueryResult(error=str(exc))
    finally:
        conn.set_progress_handler(None, 0)
    if len(rows) > MAX_ROWS:
        return QueryResult(error=f"the query returned more than {MAX_ROWS} rows")
    return QueryResult(rows=tuple(tuple(r) for r in rows), n_columns=n_columns)


def _norm(row: Row) -> Row:
    return tuple(round(v, 6) if isinstance(v, float) else v for v in row)


def compare(got: QueryResult, expected: QueryResult, ordered: bool) -> str | None:
    """``None`` when ``got`` equals ``expected``, else why not, in words for the agent."""
    if got.error is not None:
        return f"SQL error: {got.error}"
    if got.n_columns != expected.n_columns:
        return (f"Your result has {got.n_columns} column{'s' * (got.n_columns != 1)}, "
                f"expected {expected.n_columns}.")
    if len(got.rows) != len(expected.rows):
        return (f"Your result has {len(got.rows)} row{'s' * (len(got.rows) != 1)}, "
                f"expected {len(expected.rows)}.")
    mine = [_norm(r) for r in got.rows]
    gold = [_norm(r) for r in expected.rows]
    if ordered:
        if mine == gold:
            return None
        if Counter(mine) == Counter(gold):
            return "Your result has the right rows but in the wrong order."
    elif Counter(mine) == Counter(gold):
        return None
    return (f"Your result has the right shape ({len(mine)} rows x {got.n_columns} columns) "
            "but different values.")


def preview(result: QueryResult, limit: int = 5) -> str:
    """The first ``limit`` rows of ``result``, one per line."""
    lines = [" | ".join(repr(v) for v in row) for row in result.rows[:limit]]
    if len(result.rows) > limit:
        lines.append(f"... ({len(result.rows) - limit} more)")
    return "\n".join(lines) if lines else "(no rows)"
