"""Facts about the host that the sandbox binds or hides: the interpreter and its packages."""

from __future__ import annotations

import glob
import os
import sys

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
"""The only PATH sandboxed commands get (and where helper binaries are looked up)."""


def host_python() -> tuple[str, str]:
    """(real interpreter path, prefix to bind) of the Python running sharpen, venv resolved."""
    exe = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    prefix = os.path.realpath(sys.base_prefix)
    if not exe.startswith(prefix + os.sep):
        prefix = os.path.dirname(os.path.dirname(exe))
    return exe, prefix


def site_dirs(python: str) -> list[str]:
    """site-packages / dist-packages directories an interpreter would put on sys.path."""
    prefix = os.path.dirname(os.path.dirname(os.path.realpath(python)))
    patterns = [f"{prefix}/lib/python3*/site-packages", f"{prefix}/lib/python3*/dist-packages",
                f"{prefix}/lib/python3/dist-packages", f"{prefix}/local/lib/python3*/dist-packages",
                "/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages"]
    return sorted({p for pat in patterns for p in glob.glob(pat) if os.path.isdir(p)})
