"""The CLI for scripts and logs: lazy command loading (a fast ``--help``), ``--version``,
``--json`` on the commands that print data, ``--wide`` and tables off a terminal."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import sharpen
from rich.console import Console
from rich.table import Table

import sharpen as sharpen_pkg
from sharpen.cli.lazy import load_command, one_line
from sharpen.cli.main import COMMANDS
from sharpen.cli.tables import fit

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


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A store with two finished runs of the model-free reference agent (a second each)."""
    cwd = tmp_path_factory.mktemp("runs")
    ids = []
    for tasks in ("2", "3"):
        res = sharpen("run", "code", *GENERATED, "--agent-name", "reference", "--tasks", tasks,
                      "--json", cwd=cwd)
        assert res.returncode == 0, res.stderr
        out = json.loads(res.stdout)  # stdout is the JSON alone; the header went to stderr
        assert set(out) == {"run", "summary"} and "sharpen run code" in res.stderr
        assert out["run"]["id"] == out["summary"]["run_id"] == out["run"]["manifest"]["run_id"]
        assert out["summary"]["n_success"] == int(tasks) and out["run"]["status"] == "finished"
        ids.append(out["run"]["id"])
    return cwd, ids


def test_runs_and_show_as_json(store: tuple[Path, list[str]]) -> None:
    cwd, ids = store
    listed = json.loads(sharpen("runs", "--json", cwd=cwd).stdout)
    assert set(listed) == {"store", "runs"} and listed["store"].startswith("sqlite:///")
    assert [r["id"] for r in listed["runs"]] == ids[::-1]  # newest first, full ids
    assert listed["runs"][0]["n_trajectories"] == 3 and listed["runs"][0]["agent"]["name"]
    shown = sharpen("show", ids[0][:5], "--json", cwd=cwd)
    assert shown.returncode == 0, shown.stderr
    out = json.loads(shown.stdout)
    assert set(out) == {"run", "tasks", "summary"} and out["run"]["id"] == ids[0]
    assert [t["task_id"] for t in out["tasks"]] == out["run"]["manifest"]["task_ids"]
    assert all(t["epochs"] == "✓" and t["reward"] == 1.0 for t in out["tasks"])
    assert out["summary"]["n_success"] == 2 and out["summary"]["success_rate"] == 1.0


def test_tables_keep_ids_and_headers_whole_at_80_columns_and_in_a_pipe(
        store: tuple[Path, list[str]]) -> None:
    cwd, ids = store
    for columns in ("80", "60"):
        res = sharpen("runs", cwd=cwd, env={"COLUMNS": columns})  # stdout is a pipe
        assert res.returncode == 0, res.stderr
        assert all(len(line) <= int(columns) for line in res.stdout.splitlines())
        assert all(i in res.stdout for i in ids) and "…" not in res.stdout
    narrow = sharpen("runs", cwd=cwd, env={"COLUMNS": "50"}).stdout
    assert f"- run: {ids[1]}" in narrow and "  status: finished" in narrow  # records, not a table
    wide = sharpen("runs", "--wide", cwd=cwd, env={"COLUMNS": "40"}).stdout
    assert any(re.search(rf"{ids[0]} .* finished .* 2/2", line) for line in wide.splitlines())
    for args in (["show", ids[1]], ["report", ids[1]], ["compare", *ids]):
        out = sharpen(*args, cwd=cwd, env={"COLUMNS": "80"}).stdout
        assert "…" not in out and ids[1] in out, out
        assert all(len(line) <= 80 for line in out.splitlines()), out


def test_fit_never_cuts_a_header() -> None:
    # The improve report's held-out table, which Rich squeezed to "diffe…" / "rollo…" at 80.
    table = Table(title="Held-out test")
    for col in ("spec", "val", "test", "val→test gap", "tokens/task", "rollouts/task",
                "rollouts to best", "difference vs seed [95% CI]", "p"):
        table.add_column(col)
    table.add_row("reflexion winner 0123abcd", "50.0%", "41.7%", "-8.3 pts", "1,234", "2.50", "40",
                  "+8.3 pts [-3.1, 19.4]", "p = 0.25")
    for width in (200, 120, 80, 60):
        console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
        console.print(fit(table, console))
        text = console.export_text()
        assert "…" not in text and "difference" in text and "rollouts/task" in text, text
        assert all(len(line) <= width for line in text.splitlines())


def test_improve_json(tmp_path: Path) -> None:
    from record_improve_cassette import config

    spec = tmp_path / "seed.yaml"
    spec.write_text(yaml.safe_dump(config("replay").seed_spec.model_dump(mode="json")))
    res = sharpen("improve", "code", "-E", "source=generated", "-E", "max_submissions=1",
                  "--proposer", "reflexion", "--proposer-arg", "max_trials=4", "--train", "10",
                  "--val", "3", "--test", "6", "--minibatch", "10", "--budget-rollouts", "80",
                  "--agent", str(spec), "--out", str(tmp_path / "w.yaml"), "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert set(out) == {"experiment", "verdict", "out", "plots"}
    exp = out["experiment"]
    assert len(exp["experiment_id"]) == 12 and exp["config"]["test"] == 6
    assert exp["results"][0]["proposer"]["name"] == "reflexion" and out["out"].endswith("w.yaml")
    assert "sharpen improve code" in res.stderr and "/improve/" in res.stderr
