"""One truth for an environment's arguments: every argument and knob that ``sharpen envs NAME
--json`` lists is accepted as ``-E name=value`` (knobs too, folded into ``knobs``), by the CLI,
YAML configs and the Python API alike; a misspelt one gets "did you mean" and the list."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import sharpen
from typer.testing import CliRunner

import sharpen as sharpen_api
from sharpen.cli.main import app
from sharpen.core.errors import UserError
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.envs.arguments import fold_knobs
from sharpen.envs.base import ENV
from sharpen.envs.code.env import CodeEnv

ENV_NAMES = REGISTRY.names(ENV)


def cli_json(*args: str) -> Any:
    """``sharpen ARGS --json`` run in-process (the CLI's own code), parsed."""
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.mark.parametrize("name", ENV_NAMES)
def test_every_listed_argument_and_knob_is_accepted(name: str) -> None:
    schema = cli_json("envs", name)
    assert schema["name"] == name
    assert schema["arguments"], "an env lists its constructor arguments"
    listed = [(a["name"], a["default"]) for a in schema["arguments"] if not a["required"]]
    if schema["knobs_argument"] is not None:
        listed += [(k["name"], k["default"]) for k in schema["knobs"]]
    for arg, default in listed:
        env = REGISTRY.create(ENV, PluginRef(name=name, args={arg: default}))
        assert env.describe().tools == schema["tools"], (name, arg)


def test_knob_names_fold_into_knobs_and_the_constructor_wins() -> None:
    folded = fold_knobs(CodeEnv, "code", {"source": "generated", "n_ops": 2,
                                          "knobs": {"n_ops": 5, "n_tests": 4}}, {})
    # a top-level knob overrides the same knob inside knobs={...}
    assert folded == {"source": "generated", "knobs": {"n_ops": 2, "n_tests": 4}}
    env = REGISTRY.create(ENV, PluginRef(name="code", args={"source": "generated", "n_ops": 3}))
    assert isinstance(env, CodeEnv) and env.knob_values["n_ops"] == 3
    task = env.list_tasks(limit=1)[0]
    assert task.knobs["n_ops"] == 3
    # reasoning_gym: 'dataset' is an argument and a knob (the argument's); its config fields
    # depend on the dataset and fold into config
    rg = cli_json("envs", "reasoning_gym", "-E", "dataset=chain_sum")
    field = next(k for k in rg["knobs"] if k["name"] != "dataset")
    env = REGISTRY.create(ENV, PluginRef(name="reasoning_gym", args={
        "dataset": "chain_sum", field["name"]: field["default"]}))
    assert env.describe().knobs == REGISTRY.create(
        ENV, PluginRef(name="reasoning_gym", args={"dataset": "chain_sum"})).describe().knobs
    with pytest.raises(UserError, match="chain_sum"):  # a bad knob value reaches the dataset
        REGISTRY.create(ENV, PluginRef(name="reasoning_gym", args={
            "dataset": "chain_sum", field["name"]: "not a number"}))


def test_a_misspelt_name_gets_did_you_mean_and_the_list() -> None:
    with pytest.raises(UserError) as err:
        REGISTRY.create(ENV, PluginRef(name="code", args={"source": "generated", "n_opz": 2}))
    assert "'n_opz' (did you mean 'n_ops'?)" in str(err.value)
    for name in ("source", "max_submissions", "knobs: family, n_ops, n_tests, edge_cases"):
        assert name in err.value.fix
    with pytest.raises(UserError, match="did you mean 'max_submissions'"):
        REGISTRY.create(ENV, PluginRef(name="code", args={"max_submission": 1}))


def test_the_cli_and_the_api_take_knobs_as_arguments(tmp_path: Path) -> None:
    ok = sharpen("run", "code", "-E", "source=generated", "-E", "n_ops=2", "--agent-name", "null",
                 "--tasks", "1", "--no-progress", cwd=tmp_path, timeout=120)
    assert ok.returncode == 0, ok.stderr
    bad = sharpen("run", "code", "-E", "source=generated", "-E", "n_opz=2", "--agent-name",
                  "null", "--tasks", "1", cwd=tmp_path, timeout=120)
    assert bad.returncode == 2
    assert "did you mean 'n_ops'" in bad.stderr and "knobs: family, n_ops" in bad.stderr
    run = sharpen_api.run("code", agent="null", tasks=1, store=f"sqlite:///{tmp_path / 'api.db'}",
                          env_args={"source": "generated", "n_tests": 4})
    trajectories = list(run.trajectories(with_steps=False))
    assert trajectories and all(t.task.knobs["n_tests"] == 4 for t in trajectories)


def test_envs_lists_one_line_per_env_at_80_columns() -> None:
    res = CliRunner().invoke(app, ["envs"], env={"COLUMNS": "80"}, terminal_width=80)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    for name in ENV_NAMES:
        assert sum(line.split()[0] == name for line in lines if line.strip()) == 1, name
    listed = cli_json("envs")
    assert [e["name"] for e in listed] == ENV_NAMES
    assert all({"arguments", "knobs", "task_counts", "tools"} <= set(e) for e in listed)


def test_envs_name_prints_types_and_hints_as_written() -> None:
    # Rich markup would eat "[str, Any]" (and "[gym]" of an install hint); every cell is text.
    res = CliRunner().invoke(app, ["envs", "code"], env={"COLUMNS": "120"}, terminal_width=120)
    assert res.exit_code == 0, res.output
    assert "dict[str, Any] | None" in res.stdout
    for name in ("source", "max_submissions", "n_ops", "1..6", "easy, medium, hard", "submit"):
        assert name in res.stdout, name
