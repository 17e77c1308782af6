"""The harness package as one file for the sandbox: ``harness.pyz``, a zip application.

The zip holds the modules of :mod:`sharpen.envs.code.harness` under ``harness/`` and a
``__main__`` that calls :func:`harness.checker.main`, each both as source and as bytecode
compiled here, once per process. Starting the checker then compiles nothing (compiling the
harness took ~5 ms per test run when it was shipped as source). The bytecode is an unchecked
hash-based ``.pyc``: ``zipimport`` uses it without comparing timestamps, and an interpreter of
another version (a fallback sandbox may run the system's ``python3``) rejects its magic number
and compiles the source next to it instead. Entries are stored uncompressed with a fixed date,
so the same sources give the same bytes.
"""

from __future__ import annotations

import importlib.util
import io
import marshal
import zipfile
from functools import cache
from pathlib import Path

PACKAGE = "harness"
"""The harness package's name inside the zip (and so inside the sandbox)."""
MAIN = "from harness.checker import main\n\nmain()\n"
_EPOCH = (1980, 1, 1, 0, 0, 0)


def _pyc(source: bytes, name: str) -> bytes:
    """An unchecked hash-based ``.pyc`` of ``source`` for this interpreter."""
    code = compile(source, name, "exec", dont_inherit=True, optimize=0)  # the sandbox runs no -O
    flags = (0b01).to_bytes(4, "little")  # hash-based, check_source off
    return importlib.util.MAGIC_NUMBER + flags + importlib.util.source_hash(source) + \
        marshal.dumps(code)


@cache
def harness_bundle() -> bytes:
    """The bytes of ``harness.pyz`` (built once per process)."""
    here = Path(__file__).with_name(PACKAGE)
    files = {f"{PACKAGE}/{p.name}": p.read_bytes() for p in sorted(here.glob("*.py"))}
    files["__main__.py"] = MAIN.encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for name, source in files.items():
            for entry, data in ((name, source), (name + "c", _pyc(source, name))):
                zf.writestr(zipfile.ZipInfo(entry, _EPOCH), data)
    return buf.getvalue()
