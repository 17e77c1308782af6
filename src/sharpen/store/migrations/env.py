"""Alembic environment for the sharpen store.

Normally run by :func:`sharpen.store.migrate.upgrade`, which passes an open connection in
``config.attributes["connection"]`` (already inside a write transaction). Run without one —
e.g. ``alembic.command.revision(make_config(url), autogenerate=True, message=...)`` — it
opens the URL in the ``sqlalchemy.url`` option itself.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from sharpen.store.engine import build_engine, parse_url
from sharpen.store.migrate import VERSION_TABLE
from sharpen.store.schema import metadata

config = context.config


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        render_as_batch=True,  # SQLite cannot ALTER most things; batch mode copies tables
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        render_as_batch=True,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        return
    engine = build_engine(parse_url(config.get_main_option("sqlalchemy.url")))
    try:
        with engine.connect() as conn:
            _configure(conn)
            conn.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
