"""SqlTaskGenerator: generated SQLite databases with a question in words and a gold query.

Determinism. Everything random is drawn from one ``random.Random(seed)`` — the rows of every
table first, then the question — so :func:`build` returns an identical :class:`SqlProblem`
for the same ``(seed, knobs)`` in any process and any order. No global RNG is touched.

Splits own disjoint seed ranges: split ``s`` has ``[i * SPLIT_SPAN, (i + 1) * SPLIT_SPAN)``
with ``i`` = 0, 1, 2 for train, val, test (as in the ``code`` generator).

Non-triviality. Every WHERE predicate is drawn so that one "anchor" row satisfies all of
them (the result is never empty), and a question is redrawn until its gold result is
non-empty, has no all-NULL row and — for row-listing families — is a proper subset of the
table, so ``SELECT * FROM t`` or an empty query never passes. When tiny tables (``rows``
near 5) admit no such question with ``conditions`` predicates, one fewer is asked for after
every 100 failed draws.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from sharpen.core.errors import UserError
from sharpen.core.task import TaskSpec
from sharpen.envs import generation
from sharpen.envs.base import Knob
from sharpen.envs.generation import seed_for
from sharpen.envs.sql.database import QueryResult, Row, Table, connect, run_query

FAMILIES = ("filter", "aggregate", "group_by", "join", "order_limit", "nested")
"""Query families: which SQL the gold query needs."""

KNOBS: tuple[Knob, ...] = (
    Knob(name="n_tables", type="int", default=1, low=1, high=4,
         help="tables in the database (joins need 2 or more)"),
    Knob(name="rows", type="int", default=12, low=5, high=200,
         help="rows per table (orders get twice as many)"),
    Knob(name="family", type="choice", default="any", choices=["any", *FAMILIES],
         help="query family, or any (drawn per task among those the tables allow)"),
    Knob(name="conditions", type="int", default=1, low=1, high=3,
         help="WHERE predicates the question states"),
)

PRESETS: dict[str, dict[str, Any]] = {
    "easy": {"n_tables": 1, "rows": 12, "family": "any", "conditions": 1},
    "medium": {"n_tables": 2, "rows": 30, "family": "any", "conditions": 2},
    "hard": {"n_tables": 4, "rows": 80, "family": "any", "conditions": 3},
}
"""Named difficulty presets (full knob dicts)."""

_MAX_ATTEMPTS = 300

CITIES = ("Paris", "Lima", "Oslo", "Cairo", "Hanoi", "Quito")
CATEGORIES = ("books", "garden", "toys", "music", "tools")
DEPARTMENTS = ("sales", "legal", "research", "support", "finance")
FIRST = ("Ana", "Ben", "Chen", "Dara", "Eli", "Femi", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lea",
         "Milo", "Nia", "Omar", "Pia", "Raj", "Sara", "Tom", "Uma", "Vera", "Wes", "Yara", "Zed")
LAST = ("Abe", "Bauer", "Cruz", "Dube", "Eng", "Frey", "Gomez", "Holm", "Ito", "Jones", "Kim",
        "Lund", "Mora", "Ngo", "Ortiz", "Park")
ADJ = ("red", "tiny", "smart", "quiet", "solid", "rapid", "vivid", "plain", "lucky", "grand")
NOUN = ("lamp", "kite", "drum", "saw", "atlas", "vase", "piano", "rake", "novel", "robot",
        "hammer", "globe")


@dataclass(frozen=True)
class Column:
    name: str
    sql_type: str
    kind: str  # "id", "name", "cat", "num", "fk"
    words: str = ""


SCHEMAS: dict[str, tuple[Column, ...]] = {
    "customers": (Column("id", "INTEGER", "id"), Column("name", "TEXT", "name"),
                  Column("city", "TEXT", "cat", "city"), Column("age", "INTEGER", "num", "age")),
    "products": (Column("id", "INTEGER", "id"), Column("name", "TEXT", "name"),
                 Column("category", "TEXT", "cat", "category"),
                 Column("price", "INTEGER", "num", "price")),
    "employees": (Column("id", "INTEGER", "id"), Column("name", "TEXT", "name"),
                  Column("department", "TEXT", "cat", "department"),
                  Column("salary", "INTEGER", "num", "salary"),
                  Column("hire_year", "INTEGER", "num", "hire year")),
    "orders": (Column("id", "INTEGER", "id"), Column("customer_id", "INTEGER", "fk"),
               Column("product_id", "INTEGER", "fk"),
               Column("quantity", "INTEGER", "num", "quantity"),
               Column("amount", "INTEGER", "num", "amount")),
}
SINGULAR = {"customers": "customer", "products": "product", "employees": "employee",
            "orders": "order"}
FK = {"customers": "customer_id", "products": "product_id"}


@dataclass(frozen=True)
class SqlProblem:
    """One task, fully built: tables, question, gold query and its result."""

    task_id: str
    family: str
    tables: tuple[Table, ...]
    question: str
    gold: str
    ordered: bool
    expected: QueryResult

    @property
    def schema(self) -> str:
        """The CREATE TABLE statements shown to the agent."""
        return "\n\n".join(t.create_sql() for t in self.tables)




def resolve_knobs(knobs: dict[str, Any] | None = None, difficulty: str | None = None) -> dict:
    """Full, validated knobs: knob defaults, then the ``difficulty`` preset, then ``knobs``.
    Unknown names or bad values raise a :class:`UserError` naming the fix."""
    out = generation.resolve_knobs(KNOBS, PRESETS, knobs, difficulty, what="sql tasks")
    if out["family"] in ("join",) and out["n_tables"] < 2:
        raise UserError("family 'join' needs at least 2 tables", "set n_tables to 2 or more")
    return out


def difficulty_of(knobs: dict[str, Any]) -> str:
    """The preset whose knobs equal ``knobs`` exactly, else ``"custom"``."""
    return generation.difficulty_of(PRESETS, knobs)


# --- data -------------------------------------------------------------------------------


def _names(rng: random.Random, n: int, a: tuple[str, ...], b: tuple[str, ...], sep: str) -> list[str]:
    pool = [f"{x}{sep}{y}" for x in a for y in b]
    picked = rng.sample(pool, min(n, len(pool)))
    return picked + [f"{pool[i % len(pool)]}{sep}{i}" for i in range(len(picked), n)]


def _table_names(n_tables: int, rng: random.Random) -> list[str]:
    if n_tables == 1:
        return [rng.choice(["customers", "products", "employees"])]
    if n_tables == 2:
        return [rng.choice(["customers", "products"]), "orders"]
    if n_tables == 3:
        return ["customers", "products", "orders"]
    return ["customers", "products", "orders", "employees"]


def _rows(name: str, n: int, sizes: dict[str, int], rng: random.Random) -> list[Row]:
    if name == "customers":
        names = _names(rng, n, FIRST, LAST, " ")
        return [(i + 1, names[i], rng.choice(CITIES), rng.randint(18, 80)) for i in range(n)]
    if name == "products":
        names = _names(rng, n, ADJ, NOUN, " ")
        return [(i + 1, names[i], rng.choice(CATEGORIES), rng.randint(1, 500)) for i in range(n)]
    if name == "employees":
        names = _names(rng, n, FIRST, LAST, " ")
        return [(i + 1, names[i], rng.choice(DEPARTMENTS), rng.randint(30, 150) * 1000,
                 rng.randint(2000, 2024)) for i in range(n)]
    return [(i + 1, rng.randint(1, sizes.get("customers", n)),
             rng.randint(1, sizes.get("products", n)), rng.randint(1, 10),
             rng.randint(10, 1000)) for i in range(n)]


def _tables(knobs: dict[str, Any], rng: random.Random) -> tuple[Table, ...]:
    names = _table_names(knobs["n_tables"], rng)
    sizes = {n: knobs["rows"] * (2 if n == "orders" else 1) for n in names}
    out = []
    for name in names:
        cols = tuple((c.name, c.sql_type) for c in SCHEMAS[name])
        out.append(Table(name, cols, tuple(_rows(name, sizes[name], sizes, rng))))
    return tuple(out)


# --- questions --------------------------------------------------------------------------


@dataclass
class _Q:
    family: str
    words: str
    sql: str
    ordered: bool = False
    subset_of: str | None = None  # table whose row count the result must stay below
    min_rows: int = 1


def _col(table: str, name: str) -> Column:
    return next(c for c in SCHEMAS[table] if c.name == name)


def _preds(table: str, alias: str, anchor: Row, n: int, rng: random.Random,
           kinds: tuple[str, ...] = ("cat", "num"), exclude: tuple[str, ...] = ()
           ) -> tuple[list[str], list[str]]:
    """Up to ``n`` predicates on ``table`` that ``anchor`` satisfies: (SQL, words)."""
    cols = [c for c in SCHEMAS[table] if c.kind in kinds and c.name not in exclude]
    picked = rng.sample(cols, min(n, len(cols)))
    sql, words = [], []
    index = {c.name: i for i, c in enumerate(SCHEMAS[table])}
    prefix = f"{alias}." if alias else ""
    for c in picked:
        v = anchor[index[c.name]]
        if c.kind == "cat":
            sql.append(f"{prefix}{c.name} = '{v}'")
            words.append(f"the {c.words} is '{v}'")
            continue
        op = rng.choice(["ge", "le", "between"])
        if op == "ge":
            sql.append(f"{prefix}{c.name} >= {v}")
            words.append(f"the {c.words} is at least {v}")
        elif op == "le":
            sql.append(f"{prefix}{c.name} <= {v}")
            words.append(f"the {c.words} is at most {v}")
        else:
            step = 1000 if c.name == "salary" else 1
            lo = v - rng.randint(0, 10) * step
            hi = v + rng.randint(1, 10) * step
            sql.append(f"{prefix}{c.name} BETWEEN {lo} AND {hi}")
            words.append(f"the {c.words} is between {lo} and {hi} (inclusive)")
    return sql, words


def _cols_words(table: str, names: list[str]) -> str:
    ws = [f"{SINGULAR[table]} {n}" if n in ("id", "name") else (_col(table, n).words or n)
          for n in names]
    return ws[0] if len(ws) == 1 else ", ".join(ws[:-1]) + " and " + ws[-1]


def _listing_cols(table: str, rng: random.Random) -> list[str]:
    cols = [c.name for c in SCHEMAS[table] if c.kind in ("name", "cat", "num")]
    if table == "orders":
        cols = ["id", *cols]
    first = "name" if "name" in cols else "id"
    rest = [c for c in cols if c != first]
    return [first, *rng.sample(rest, rng.randint(0, 1))]


def _q_filter(tables: dict[str, Table], k: int, rng: random.Random) -> _Q:
    t = rng.choice(list(tables))
    anchor = rng.choice(tables[t].rows)
    sel = _listing_cols(t, rng)
    sql, words = _preds(t, "", anchor, k, rng)
    q = (f"List the {_cols_words(t, sel)} of every {SINGULAR[t]} where "
         f"{' and '.join(words)}. Return one row per {SINGULAR[t]}, with the columns in this "
         "order, in any row order.")
    return _Q("filter", q, f"SELECT {', '.join(sel)} FROM {t} WHERE {' AND '.join(sql)}",
              subset_of=t)


_AGG = {"COUNT": "the number of {ent}", "SUM": "the total {col} of {ent}",
        "MAX": "the largest {col} among {ent}", "MIN": "the smallest {col} among {ent}",
        "AVG": "the average {col} of {ent}"}


def _agg(t: str, rng: random.Random, exclude: tuple[str, ...] = ()) -> tuple[str, str]:
    fn = rng.choice(list(_AGG))
    nums = [c for c in SCHEMAS[t] if c.kind == "num" and c.name not in exclude] or [
        c for c in SCHEMAS[t] if c.kind == "num"]
    col = rng.choice(nums)
    if col.name == "hire_year" and fn in ("SUM", "AVG"):
        fn = "MAX"
    expr = "COUNT(*)" if fn == "COUNT" else f"{fn}({col.name})"
    return expr, _AGG[fn].format(ent=t, col=col.words)


def _q_aggregate(tables: dict[str, Table], k: int, rng: random.Random) -> _Q:
    t = rng.choice(list(tables))
    anchor = rng.choice(tables[t].rows)
    expr, what = _agg(t, rng)
    sql, words = _preds(t, "", anchor, k, rng)
    q = (f"What is {what} where {' and '.join(words)}? Return one row with one column.")
    return _Q("aggregate", q, f"SELECT {expr} FROM {t} WHERE {' AND '.join(sql)}")


def _q_group_by(tables: dict[str, Table], k: int, rng: random.Random) -> _Q:
    t = rng.choice([n for n in tables if n != "orders"])
    g = next(c for c in SCHEMAS[t] if c.kind == "cat")
    anchor = rng.choice(tables[t].rows)
    expr, what = _agg(t, rng)
    sql, words = _preds(t, "", anchor, k, rng, kinds=("num",))
    q = (f"For each {g.words}, give the {g.words} and {what} in that {g.words} where "
         f"{' and '.join(words)}. Return one row per {g.words} that has at least one such "
         f"{SINGULAR[t]} (two columns: {g.words}, then the value), in any order.")
    return _Q("group_by", q, f"SELECT {g.name}, {expr} FROM {t} WHERE {' AND '.join(sql)} "
              f"GROUP BY {g.name}", min_rows=2)


def _q_join(tables: dict[str, Table], k: int, rng: random.Random) -> _Q:
    dims = [d for d in ("customers", "products") if d in tables]
    use = dims if len(dims) == 2 and rng.random() < 0.5 else [rng.choice(dims)]
    order = rng.choice(tables["orders"].rows)
    alias = {"customers": "c", "products": "p"}
    fk_index = {"customers": 1, "products": 2}
    sel = ["o.id"] + [f"{alias[d]}.name" for d in use]
    sel_words = ["the order id"] + [f"the name of the {SINGULAR[d]}" for d in use]
    joins = " ".join(f"JOIN {d} {alias[d]} ON o.{FK[d]} = {alias[d]}.id" for d in use)
    n_order = rng.randint(0 if k > 1 else 1, min(k, 2)) if k > 1 else 1
    sql, words = _preds("orders", "o", order, n_order, rng)
    where_words = [f"the order's {w[4:]}" for w in words]
    left = k - len(sql)
    for d in use:
        if left <= 0:
            break
        anchor = tables[d].rows[order[fk_index[d]] - 1]
        s, w = _preds(d, alias[d], anchor, 1, rng)
        sql += s
        where_words += [f"the {SINGULAR[d]}'s {x[4:]}" for x in w]
        left -= 1
    q = (f"List {', '.join(sel_words[:-1])} and {sel_words[-1]} for every order where "
         f"{' and '.join(where_words)}. (Orders refer to customers through customer_id and "
         "to products through product_id.) Return one row per order, with the columns in "
         "this order, in any row order.")
    return _Q("join", q, f"SELECT {', '.join(sel)} FROM orders o {joins} "
              f"WHERE {' AND '.join(sql)}", subset_of="orders")


def _q_order_limit(tables: dict[str, Table], k: int, rng: random.Random) -> _Q:
    t = rng.choice(list(tables))
    nums = [c for c in SCHEMAS[t] if c.kind == "num"]
    col = rng.choice(nums)
    anchor = rng.choice(tables[t].rows)
    sql, words = _preds(t, "", anchor, k - 1, rng, exclude=(col.name,))
    desc = rng.random() < 0.5
    n = rng.randint(2, 5)
    first = "name" if t != "orders" else "id"
    where = f" WHERE {' AND '.join(sql)}" if sql else ""
    cond = f" where {' and '.join(words)}" if words else ""
    q = (f"Among the {t}{cond}, list the {SINGULAR[t]} {first} and {col.words} of the {n} with "
         f"the {'highest' if desc else 'lowest'} {col.words}, "
         f"{'highest' if desc else 'lowest'} first; break ties by {SINGULAR[t]} id, lowest "
         "first. Two columns, in that order.")
    gold = (f"SELECT {first}, {col.name} FROM {t}{where} ORDER BY {col.name} "
            f"{'DESC' if desc else 'ASC'}, id ASC LIMIT {n}")
    return _Q("order_limit", q, gold, ordered=True, min_rows=n)


def _q_nested(tables: dict[str, Table], k: int, rng: random.Random) -> _Q:
    dims = [d for d in ("customers", "products") if d in tables]
    if "orders" in tables and dims and rng.random() < 0.6:
        d = rng.choice(dims)
        order = rng.choice(tables["orders"].rows)
        sql, words = _preds("orders", "", order, k, rng)
        q = (f"List the names of the {d} that appear in at least one order where "
             f"{' and '.join(words)} (orders refer to {d} through {FK[d]}). Return one row "
             f"per {SINGULAR[d]}, in any order.")
        return _Q("nested", q, f"SELECT name FROM {d} WHERE id IN (SELECT {FK[d]} FROM orders "
                  f"WHERE {' AND '.join(sql)})", subset_of=d)
    t = rng.choice([n for n in tables if n != "orders"])
    col = rng.choice([c for c in SCHEMAS[t] if c.kind == "num"])
    cat = next(c for c in SCHEMAS[t] if c.kind == "cat")
    anchor = rng.choice(tables[t].rows)
    sql, words = _preds(t, "", anchor, 1, rng, kinds=("cat",))
    outer, outer_words = _preds(t, "", anchor, k - 1, rng, kinds=("num",), exclude=(col.name,))
    extra = f" and whose {' and '.join(w[4:] for w in outer_words)}" if outer_words else ""
    q = (f"List the names of the {t} whose {col.words} is greater than the average "
         f"{col.words} of the {t} where {words[0]}{extra}. The average is over those {t} "
         f"only, the list is over all {t}. One row per {SINGULAR[t]}, in any order.")
    where = " AND ".join([f"{col.name} > (SELECT AVG({col.name}) FROM {t} WHERE {sql[0]})",
                          *outer])
    del cat
    return _Q("nested", q, f"SELECT name FROM {t} WHERE {where}", subset_of=t)


BUILDERS = {"filter": _q_filter, "aggregate": _q_aggregate, "group_by": _q_group_by,
            "join": _q_join, "order_limit": _q_order_limit, "nested": _q_nested}


def allowed_families(n_tables: int) -> list[str]:
    """Families the tables of ``n_tables`` allow (a join needs orders and another table)."""
    return [f for f in FAMILIES if f != "join" or n_tables >= 2]


def nontrivial(expected: QueryResult, q: _Q, tables: dict[str, Table]) -> bool:
    """The gold result is usable: enough rows, no all-NULL row, a proper subset."""
    if expected.error is not None or len(expected.rows) < q.min_rows:
        return False
    if any(all(v is None for v in row) for row in expected.rows):
        return False
    if q.subset_of is not None and len(expected.rows) >= len(tables[q.subset_of].rows):
        return False
    if q.family == "order_limit":  # the LIMIT must cut something: more rows match than asked
        full = q.sql.rsplit(" LIMIT ", 1)[0]
        conn = connect(tuple(tables.values()))
        try:
            return len(run_query(conn, full).rows) > len(expected.rows)
        finally:
            conn.close()
    return True


def build(seed: int, knobs: dict[str, Any]) -> SqlProblem:
    """The problem for ``(seed, knobs)`` (knobs already resolved); deterministic."""
    rng = random.Random(seed)
    tables = _tables(knobs, rng)
    by_name = {t.name: t for t in tables}
    conn = connect(tables)
    try:
        for attempt in range(_MAX_ATTEMPTS):
            family = (rng.choice(allowed_families(knobs["n_tables"]))
                      if knobs["family"] == "any" else knobs["family"])
            # Tiny tables may admit no selective question with many conditions: relax slowly.
            k = max(1, knobs["conditions"] - attempt // 100)
            q = BUILDERS[family](by_name, k, rng)
            expected = run_query(conn, q.sql, time_limit=30.0)
            if not nontrivial(expected, q, by_name):
                continue
            return SqlProblem(task_id=f"sql/{family}-{knobs['n_tables']}/{seed}", family=family,
                              tables=tables, question=q.words, gold=q.sql, ordered=q.ordered,
                              expected=expected)
    finally:
        conn.close()
    raise RuntimeError(f"no usable question for seed {seed} and knobs {knobs}")  # pragma: no cover


class SqlTaskGenerator(generation.PresetKnobs):
    """Implements the :class:`~sharpen.envs.base.Generator` protocol for the ``sql`` env.
    Stateless: any two instances produce the same tasks."""

    KNOB_SCHEMA = KNOBS
    PRESET_TABLE = PRESETS

    def sample(self, knobs: dict[str, Any], seed: int, split: str = "test") -> TaskSpec:
        """The ``seed``-th task of ``split`` at ``knobs`` (missing knobs take their defaults)."""
        full = resolve_knobs(knobs)
        task_seed = seed_for(split, seed)
        problem = build(task_seed, full)
        return TaskSpec(
            env="sql", id=problem.task_id, seed=task_seed, knobs=full,
            split=generation.as_split(split),
            metadata={"difficulty": difficulty_of(full), "family": problem.family},
        )

    def materialize(self, task: TaskSpec) -> SqlProblem:
        """Rebuild the problem from ``task.seed`` and ``task.knobs`` alone."""
        return build(task.seed, resolve_knobs(task.knobs))

    def is_solvable(self, task: TaskSpec) -> bool:
        """Whether the gold query runs on a fresh copy of the database and returns the
        stored, non-trivial result."""
        problem = self.materialize(task)
        conn = connect(problem.tables)
        try:
            again = run_query(conn, problem.gold, time_limit=30.0)
        finally:
            conn.close()
        return (again.error is None and again.rows == problem.expected.rows
                and len(again.rows) > 0
                and not any(all(v is None for v in r) for r in again.rows))
