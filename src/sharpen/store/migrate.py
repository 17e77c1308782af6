"""Alembic glue: the store's schema is created and upgraded by migrations, from the first table.

The Alembic environment ships inside the package (``sharpen/store/migrations``: ``env.py``,
``script.py.mako`` and ``versions/``), so no ``alembic.ini`` is needed at runtime and an
installed wheel migrates its own databases. :func:`upgrade` runs on every
:class:`~sharpen.store.store.Store` open; when the database is already at head it only reads
the version row. Otherwise it migrates inside one write transaction (``BEGIN IMMEDIATE`` on
SQLite, an advisory lock on PostgreSQL), so processes opening a new store at the same time
do not race to create the same tables.

To add a revision after changing :mod:`sharpen.store.schema`::

    from alembic import command
    command.revision(make_config("sqlite:///scratch.db"), autogenerate=True, message="...")

(upgrade the scratch database to head first), then review the generated file.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Engine, text

from sharpen.core.errors import UserError
from sharpen.store.engine import write_begin

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
"""The packaged Alembic script directory."""

VERSION_TABLE = "sharpen_alembic_version"
"""Alembic's version table; prefixed so a database shared with another Alembic-managed
application does not mix up revisions."""

_PG_LOCK_KEY = 0x5A4A_7E11
"""Advisory-lock key that serialises concurrent migrations on PostgreSQL."""


def make_config(url: str | None = None) -> Config:
    """An Alembic Config built in code: ``script_location`` points into the package and
    ``sqlalchemy.url`` (optional) is used only when no connection is passed in."""
    cfg = Config()
    cfg.set_main_option("path_separator", "os")
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("version_locations", str(MIGRATIONS_DIR / "versions"))
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


@lru_cache(maxsize=1)
def head_revision() -> str | None:
    """The newest revision shipped with this sharpen."""
    return ScriptDirectory.from_config(make_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at (``None`` for an empty database)."""
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
        return ctx.get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the database to ``revision`` (default: head). A database written by a newer
    sharpen (unknown revision) raises :class:`UserError`."""
    if revision == "head" and current_revision(engine) == head_revision():
        return
    with write_begin(engine) as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})
        cfg = make_config()
        cfg.attributes["connection"] = conn
        try:
            command.upgrade(cfg, revision)
        except CommandError as exc:
            raise UserError(
                f"the store's schema is not one this sharpen knows ({exc})",
                "upgrade sharpen, or point --store at another database",
            ) from None


def downgrade(engine: Engine, revision: str = "base") -> None:
    """Migrate the database down to ``revision`` (default: ``base``, dropping every table)."""
    with write_begin(engine) as conn:
        cfg = make_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)
