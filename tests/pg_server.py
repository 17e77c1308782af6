"""A real PostgreSQL server for the store's tests: started once per session from the
installed binaries (Debian's ``postgresql`` package; ``make test`` installs it as root), on a
Unix socket in a temporary folder, no TCP. Each test gets a database of its own.

Where PostgreSQL or the ``psycopg`` driver is missing the PostgreSQL cases are skipped, except
under CI (``CI`` set), where that is a failure: CI must test both backends."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


def _bindir() -> str | None:
    found = shutil.which("pg_ctl")
    if found:
        return os.path.dirname(os.path.realpath(found))
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
    return dirs[-1] if dirs else None


def _missing(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL tests cannot run under CI: {why}")
    pytest.skip(why)


class PostgresServer:
    """A throwaway cluster: ``url(db)`` is the SQLAlchemy URL of database ``db``."""

    def __init__(self, root: Path) -> None:
        bindir = _bindir()
        if bindir is None:
            _missing("PostgreSQL is not installed (apt-get install postgresql)")
        try:
            import psycopg  # noqa: F401
        except ImportError:
            _missing("the psycopg driver is not installed (pip install 'sharpen[postgres]')")
        self.bindir = str(bindir)
        self.root = root
        # PostgreSQL refuses to run as root: as root, the cluster belongs to its own account.
        self.user = None
        if os.geteuid() == 0:
            self.user = "postgres" if _has_user("postgres") else "nobody"
            shutil.chown(root, self.user)
        self.data = root / "data"
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "sharpen", "--no-sync",
                  "-E", "UTF8", "--locale", "C")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(root / "server.log"), "-w", "-o",
                  f"-k {root} -c listen_addresses='' -F", "start")

    def _run(self, tool: str, *args: str) -> None:
        r = subprocess.run([os.path.join(self.bindir, tool), *args], user=self.user,
                           capture_output=True, text=True, timeout=120, cwd=self.root,
                           check=False)
        if r.returncode != 0:
            raise RuntimeError(f"{tool} failed: {r.stderr.strip()[-500:]}")

    def url(self, db: str = "postgres") -> str:
        return f"postgresql+psycopg://sharpen@/{db}?host={self.root}"

    def new_database(self) -> str:
        """A fresh, empty database; its URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(f"host={self.root} user=sharpen dbname=postgres",
                             autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop")


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """The session's PostgreSQL server (see the module doc)."""
    # Short and world-traversable: a socket path has ~100 characters, and as root the server
    # runs as another user (pytest's own temporary folders are private to root).
    root = Path(tempfile.mkdtemp(prefix="sharpen-pg-"))
    os.chmod(root, 0o755)
    try:
        server = PostgresServer(root)
        try:
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty database on each backend: a SQLite file, and a database of the
    session's PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'db' / 'sharpen.db'}"
    return request.getfixturevalue("postgres").new_database()
