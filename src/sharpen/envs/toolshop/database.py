"""The toolshop database: its tables, loading a generated shop into SQLite, and comparing
states.

A **state** (:data:`Snapshot`) is every row of every table keyed by ``(table, primary
key)``. Its :func:`state_hash` is the SHA-256 of the rows in key order, so two databases
with the same rows have the same hash whatever order the writes came in (``returns`` is
keyed by ``(order_id, item_id)``, not by an insertion counter, for that reason).
:func:`diff` lists the rows that differ between two states.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sharpen.envs.toolshop.world import Row

COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "customers": (("customer_id", "TEXT"), ("first_name", "TEXT"), ("last_name", "TEXT"),
                  ("email", "TEXT"), ("street", "TEXT"), ("city", "TEXT"), ("zip", "TEXT")),
    "payment_methods": (("payment_method_id", "TEXT"), ("customer_id", "TEXT"), ("kind", "TEXT"),
                        ("label", "TEXT"), ("balance_cents", "INTEGER")),
    "products": (("product_id", "TEXT"), ("name", "TEXT")),
    "items": (("item_id", "TEXT"), ("product_id", "TEXT"), ("options", "TEXT"),
              ("price_cents", "INTEGER"), ("available", "INTEGER")),
    "orders": (("order_id", "TEXT"), ("customer_id", "TEXT"), ("status", "TEXT"),
               ("payment_method_id", "TEXT"), ("cancel_reason", "TEXT")),
    "order_items": (("order_id", "TEXT"), ("item_id", "TEXT"), ("price_cents", "INTEGER")),
    "returns": (("order_id", "TEXT"), ("item_id", "TEXT"), ("kind", "TEXT"),
                ("new_item_id", "TEXT"), ("payment_method_id", "TEXT")),
}
"""Tables and their columns, in order."""

KEYS: dict[str, tuple[str, ...]] = {
    "customers": ("customer_id",), "payment_methods": ("payment_method_id",),
    "products": ("product_id",), "items": ("item_id",), "orders": ("order_id",),
    "order_items": ("order_id", "item_id"), "returns": ("order_id", "item_id"),
}
"""Primary key of each table."""

Key = tuple[str, tuple[Any, ...]]
"""``(table, primary key values)``; every key column is non-null TEXT, so keys sort."""
Snapshot = dict[Key, tuple[Any, ...]]


def schema_sql() -> str:
    """The CREATE TABLE statements."""
    out = []
    for table, cols in COLUMNS.items():
        body = ",\n  ".join(f"{c} {t}" for c, t in cols)
        out.append(f"CREATE TABLE {table} (\n  {body},\n  PRIMARY KEY ({', '.join(KEYS[table])})\n);")
    return "\n".join(out)


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """All statements inside run in one transaction, rolled back on an exception (the
    connection itself is in autocommit mode)."""
    conn.execute("BEGIN")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def load(conn: sqlite3.Connection, tables: dict[str, list[Row]]) -> None:
    """Create the tables in ``conn`` and insert ``tables``' rows, in one transaction."""
    with transaction(conn):
        for statement in schema_sql().split(";\n"):
            conn.execute(statement)
        for table, cols in COLUMNS.items():
            names = [c for c, _ in cols]
            conn.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(names))})",
                             [tuple(row[n] for n in names) for row in tables[table]])


def connect(path: Path | str, tables: dict[str, list[Row]] | None = None) -> sqlite3.Connection:
    """A connection to the SQLite file at ``path`` (``":memory:"`` for none), loaded with
    ``tables`` when given. Rows come back as :class:`sqlite3.Row`."""
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    if tables is not None:
        conn.execute("PRAGMA journal_mode=MEMORY")
        load(conn, tables)
    return conn


def snapshot(conn: sqlite3.Connection) -> Snapshot:
    """Every row of every table, keyed by ``(table, primary key)``."""
    out: Snapshot = {}
    for table, cols in COLUMNS.items():
        names = [c for c, _ in cols]
        index = [names.index(k) for k in KEYS[table]]
        for row in conn.execute(f"SELECT {', '.join(names)} FROM {table}"):
            values = tuple(row)
            out[(table, tuple(values[i] for i in index))] = values
    return out


def state_hash(state: Snapshot) -> str:
    """SHA-256 (hex, 16 characters) of ``state``'s rows in key order."""
    rows = [[table, list(key), list(state[(table, key)])] for table, key in sorted(state)]
    text = json.dumps(rows, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class RowChange:
    """One row that differs between two states (``None``: the row does not exist)."""

    table: str
    key: tuple[Any, ...]
    before: tuple[Any, ...] | None
    after: tuple[Any, ...] | None

    def describe(self) -> str:
        """E.g. ``orders #W1234567: status 'pending' -> 'cancelled'``."""
        name = f"{self.table} {', '.join(map(str, self.key))}"
        cols = [c for c, _ in COLUMNS[self.table]]
        if self.before is None or self.after is None:
            values = self.after if self.before is None else self.before
            assert values is not None
            shown = ", ".join(f"{c}={v!r}" for c, v in zip(cols, values, strict=True)
                              if c not in KEYS[self.table])
            return f"{name}: {'added' if self.before is None else 'removed'} ({shown})"
        changes = [f"{c} {a!r} -> {b!r}" for c, a, b in zip(cols, self.before, self.after, strict=True)
                   if a != b]
        return f"{name}: {', '.join(changes)}"


    def describe_against_expected(self) -> str:
        """For a change from the expected row (``before``) to the actual one (``after``):
        e.g. ``orders #W1234567: status is 'pending', expected 'cancelled'``."""
        name = f"{self.table} {', '.join(map(str, self.key))}"
        if self.after is None:
            return f"{name}: missing (the reference creates it)"
        if self.before is None:
            return f"{name}: exists (the reference does not create it)"
        cols = [c for c, _ in COLUMNS[self.table]]
        wrong = [f"{c} is {b!r}, expected {a!r}"
                 for c, a, b in zip(cols, self.before, self.after, strict=True) if a != b]
        return f"{name}: {', '.join(wrong)}"


def diff(old: Snapshot, new: Snapshot) -> list[RowChange]:
    """The rows that differ between ``old`` and ``new``, in key order."""
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    return [RowChange(k[0], k[1], old.get(k), new.get(k)) for k in keys]
