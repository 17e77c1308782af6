"""Every numeric option refuses a value outside its range with one clear message (exit 2,
nothing run): counts of tasks, epochs, workers, budgets and task lists."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import sharpen as sharpen_api
from sharpen.cli.main import app
from sharpen.core.errors import UserError

CASES = [
    ("run", "code", "--tasks", "-3"),
    ("run", "code", "--tasks", "0"),
    ("run", "code", "--epochs", "0"),
    ("run", "code", "--concurrency", "0"),
    ("run", "code", "--retries", "-1"),
    ("run", "code", "--retry-delay", "-0.5"),
    ("runs", "--limit", "0"),
    ("export", "latest", "--pairs-per-prompt", "0"),
    ("check", "env", "code", "--tasks", "0"),
    ("check", "agent", "null", "--episodes", "0"),
    ("compare", "a", "b", "--bootstrap", "10"),
    ("improve", "code", "--budget-rollouts", "0"),
    ("improve", "code", "--budget-tokens", "-5"),
    ("improve", "code", "--budget-usd", "0"),
    ("improve", "code", "--train", "0"),
    ("improve", "code", "--val", "-1"),
    ("improve", "code", "--test", "0"),
    ("improve", "code", "--minibatch", "0"),
    ("improve", "code", "--concurrency", "0"),
    ("demo", "--budget-rollouts", "0"),
    ("demo", "--train", "0"),
    ("demo", "--val", "0"),
    ("demo", "--test", "-2"),
    ("demo", "--minibatch", "0"),
    ("view", "--port", "-1"),
]


@pytest.mark.parametrize("argv", CASES, ids=[" ".join(c) for c in CASES])
def test_an_out_of_range_number_is_refused_before_anything_runs(argv: tuple[str, ...],
                                                                tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'unused.db'}"
    res = CliRunner().invoke(app, list(argv), env={"COLUMNS": "200", "SHARPEN_STORE": store})
    assert res.exit_code == 2, res.output
    option = next(a for a in argv if a.startswith("--"))
    assert f"Invalid value for '{option}'" in res.output, res.output
    assert "greater than" in res.output or "less than" in res.output, res.output
    assert not (tmp_path / "unused.db").exists()  # refused before the store was opened
    assert "no tasks for split" not in res.output


def test_the_api_refuses_counts_below_one(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/x.db"
    for bad in (-3, 0):
        with pytest.raises(UserError, match=f"number of tasks must be 1 or more, got {bad}"):
            sharpen_api.run("code", agent="null", tasks=bad, store=store)
    with pytest.raises(UserError, match="epochs must be at least 1, not 0"):
        sharpen_api.run("code", agent="null", tasks=1, epochs=0, store=store)
    with pytest.raises(UserError, match="concurrency must be at least 1, not 0"):
        sharpen_api.run("code", agent="null", tasks=1, concurrency=0, store=store)
