"""Turning a store URL into a configured SQLAlchemy Engine.

* ``None`` means the default: the SQLite file ``.sharpen/sharpen.db`` under the current
  working directory (made absolute, so a later ``chdir`` does not move the store).
* Any SQLAlchemy URL is accepted; a malformed URL, an unknown backend or a missing driver
  is a :class:`~sharpen.core.errors.UserError` naming the fix.
* SQLite files get their parent directory created, WAL journaling, ``foreign_keys=ON`` and a
  ``busy_timeout``, because several processes may write one file (a killed run and its
  resume, a viewer adding feedback). SQLAlchemy, not the ``sqlite3`` module, emits
  ``BEGIN``: reads use a plain (deferred) ``BEGIN``; writes go through :func:`write_begin`,
  which emits ``BEGIN IMMEDIATE`` so a writer waits for the lock up front instead of failing
  with "database is locked" when it upgrades a read lock mid-transaction.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.pool import StaticPool

from sharpen.core.errors import UserError

DEFAULT_PATH = Path(".sharpen") / "sharpen.db"
"""Default store file, relative to the current working directory."""

BUSY_TIMEOUT_MS = 30_000
"""How long a SQLite connection waits for another process's write lock."""

URL_FIX = "check --store; example: sqlite:///path/to.db or postgresql+psycopg://user@host/db"
"""The remedy printed with every bad-URL error."""

_IMMEDIATE = "sharpen_begin_immediate"


def default_url() -> str:
    """The default store URL: an absolute ``sqlite:///…/.sharpen/sharpen.db`` under the cwd."""
    return f"sqlite:///{(Path.cwd() / DEFAULT_PATH).resolve()}"


def parse_url(url: str | None) -> URL:
    """Parse ``url`` (``None`` → :func:`default_url`); a malformed one raises UserError."""
    text = default_url() if url is None else url.strip()
    if not text:
        raise UserError("the store URL is empty", URL_FIX)
    try:
        parsed = make_url(text)
    except (ArgumentError, ValueError) as exc:
        raise UserError(f"cannot parse store URL {text!r}: {exc}", URL_FIX) from None
    if is_sqlite(parsed) and not is_memory(parsed):
        path = Path(parsed.database or "").expanduser()
        parsed = parsed.set(database=str(path.resolve()))
    return parsed


def is_sqlite(url: URL) -> bool:
    """Whether the URL names a SQLite database."""
    return url.get_backend_name() == "sqlite"


def is_memory(url: URL) -> bool:
    """Whether the URL names an in-memory SQLite database (one process, one connection)."""
    db = url.database or ""
    return is_sqlite(url) and (db in ("", ":memory:") or "mode=memory" in db)


def build_engine(url: URL) -> Engine:
    """An Engine for ``url``, with SQLite tuned for several writers. Raises UserError when the
    backend or its driver is not available or the SQLite file cannot be created."""
    kwargs: dict[str, Any] = {}
    if is_sqlite(url):
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": BUSY_TIMEOUT_MS / 1000}
        if is_memory(url):
            kwargs["poolclass"] = StaticPool
        else:
            parent = Path(url.database or "").parent
            try:
                parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UserError(
                    f"cannot create the store directory {parent}: {exc.strerror}", URL_FIX
                ) from None
    else:
        kwargs["pool_pre_ping"] = True
    try:
        engine = create_engine(url, **kwargs)
    except NoSuchModuleError:
        raise UserError(
            f"unknown database backend {url.drivername!r} in the store URL", URL_FIX
        ) from None
    except ImportError as exc:
        raise UserError(
            f"the driver for {url.drivername!r} is not installed ({exc.name or exc})",
            f"pip install the driver, or {URL_FIX}",
        ) from None
    except ArgumentError as exc:
        raise UserError(f"bad store URL: {exc}", URL_FIX) from None
    if is_sqlite(url):
        _tune_sqlite(engine, memory=is_memory(url))
    return engine


def _tune_sqlite(engine: Engine, *, memory: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy emit BEGIN (see module docstring); pragmas then run outside any
        # transaction, which journal_mode requires.
        dbapi_connection.isolation_level = None
        cur = dbapi_connection.cursor()
        try:
            cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            cur.execute("PRAGMA foreign_keys = ON")
            if not memory:
                cur.execute("PRAGMA journal_mode = WAL")
                # In WAL mode NORMAL never corrupts the database and survives a killed
                # process; only an OS crash or power cut can drop the newest commits. FULL
                # would fsync every commit (1.5 ms each here, most of a step's overhead).
                cur.execute("PRAGMA synchronous = NORMAL")
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get(_IMMEDIATE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


@contextmanager
def write_begin(engine: Engine) -> Iterator[Connection]:
    """A connection inside a write transaction (``BEGIN IMMEDIATE`` on SQLite), committed on
    normal exit and rolled back on an exception."""
    with engine.connect() as conn:
        conn = conn.execution_options(**{_IMMEDIATE: True})
        with conn.begin():
            yield conn


@contextmanager
def read_begin(engine: Engine) -> Iterator[Connection]:
    """A connection inside a short read transaction (one consistent snapshot)."""
    with engine.connect() as conn, conn.begin():
        yield conn
