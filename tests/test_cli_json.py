"""The CLI for scripts and logs: lazy command loading (a fast ``--help``), ``--version``,
``--json`` on the commands that print data, ``--wide`` and tables off a terminal."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import sharpen

import sharpen as sharpen_pkg
from sharpen.cli.lazy import load_command, one_line
from sharpen.cli.main import COMMANDS

GENERATED = ["-E", "source=generated"]


def test_help_lists_every_command_without_importing_any() -> None:
    # The table's one-line help is the command's own docstring (or sub-app help), so they
    # cannot drift apart; and --help imports no command module.
    for spec in COMMANDS:
        command = load_command(spec)
        assert command.name == spec.name
        assert one_line(command.help) == spec.help, spec.name
    probe = ("import sys; from sharpen.cli.main import app; import typer\n"
             "try:\n    typer.main.get_command(app).main(['--help'], prog_name='sharpen')\n"
             "except SystemExit: pass\n"
             "print(sorted(m for m in sys.modules if m.startswith('sharpen.cli.') or "
             "m in ('sqlalchemy', 'numpy', 'sharpen.runner')), file=sys.stderr)")
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env={"COLUMNS": "200", "PATH": ""}, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stderr.strip() == "['sharpen.cli.lazy', 'sharpen.cli.main']"
    for spec in COMMANDS:
        assert spec.name in res.stdout


def test_version_and_a_typo(tmp_path: Path) -> None:
    res = sharpen("--version", cwd=tmp_path)
    assert res.returncode == 0 and res.stdout == f"sharpen {sharpen_pkg.__version__}\n"
    typo = sharpen("rns", cwd=tmp_path)
    assert typo.returncode == 2 and "Did you mean 'runs'" in typo.stderr
