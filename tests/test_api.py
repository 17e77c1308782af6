"""The Python API (sharpen.run / arun / load / report / compare / improve): docs/api.md's
examples executed as written, the same reports as the CLI's ``--json``, the event-loop rules,
and the errors a user can cause. Real runs throughout: the code environment's sandbox, real
SQLite stores; the only model is the replay of a recorded cassette."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import sharpen as sharpen_cli

import sharpen
from sharpen.core.errors import UserError
from sharpen.core.registry import REGISTRY, PluginRef, Registry
from sharpen.envs.base import ENV
from sharpen.improvement.proposal import BaseProposer, NothingToPropose, Proposal
from sharpen.store import Store

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "api.md"
CASSETTE = "tests/cassettes/improve_reflexion.jsonl"
GENERATED = {"source": "generated"}


def python_blocks(text: str) -> list[str]:
    """The ```python fenced blocks of a Markdown text, in order."""
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)


@pytest.fixture
def store_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working folder whose default store ($SHARPEN_STORE) is a fresh SQLite file."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SHARPEN_STORE", f"sqlite:///{tmp_path / 'api.db'}")
    return tmp_path


def test_the_examples_of_docs_api_md_run_as_written(store_dir: Path):
    # The replay example names the cassette by its path in a checkout of the repository.
    (store_dir / CASSETTE).parent.mkdir(parents=True)
    shutil.copy(ROOT / CASSETTE, store_dir / CASSETTE)
    blocks = python_blocks(DOC.read_text())
    assert len(blocks) >= 8, "docs/api.md lost its examples"
    namespace: dict[str, object] = {"__name__": "docs_api"}
    for i, block in enumerate(blocks, start=1):
        exec(compile(block, f"docs/api.md, python block {i}", "exec"), namespace)
    # What the page ran is in the store it named, for the CLI to read.
    runs = Store(f"sqlite:///{store_dir / 'api.db'}").list_runs(limit=None)
    assert {r.agent.name for r in runs} >= {"reference", "null", "seed"}
    assert (store_dir / "improved.yaml").is_file()


def test_report_and_compare_equal_what_the_cli_prints_as_json(store_dir: Path):
    ref = sharpen.run("code", agent="reference", tasks=4, env_args=GENERATED)
    null = sharpen.run("code", agent="null", tasks=4, env_args=GENERATED)
    printed = sharpen_cli("report", ref.id, "--json", cwd=store_dir)
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout) == json.loads(sharpen.report(ref).model_dump_json())
    printed = sharpen_cli("compare", null.id[:8], ref.id, "--json", cwd=store_dir)
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout) == json.loads(sharpen.compare(null, ref).model_dump_json())
    # The CLI sees the API's runs, and the API the CLI's.
    cli_run = sharpen_cli("run", "code", "-E", "source=generated", "--agent-name", "reference",
                          "-n", "2", "--no-progress", cwd=store_dir)
    assert cli_run.returncode == 0, cli_run.stderr
    latest = sharpen.load("latest")
    assert latest.id not in (ref.id, null.id) and latest.id in cli_run.stdout
    assert latest.spec.model_dump() == sharpen.run(
        "code", agent="reference", tasks=2, env_args=GENERATED).spec.model_dump()


async def test_arun_works_inside_a_running_loop_and_run_says_to_await_it(store_dir: Path):
    with pytest.raises(UserError, match=r"await sharpen\.arun\(\.\.\.\)"):
        sharpen.run("code", agent="reference", tasks=1, env_args=GENERATED)
    with pytest.raises(UserError, match=r"await sharpen\.aimprove\(\.\.\.\)"):
        sharpen.improve("code", agent="null", env_args=GENERATED)
    assert Store(f"sqlite:///{store_dir / 'api.db'}").list_runs() == []  # nothing started
    run = await sharpen.arun("code", agent="reference", tasks=2, epochs=2, env_args=GENERATED)
    assert isinstance(run, sharpen.Run) and run.status == "finished"
    assert run.summary.n_trajectories == 4 and run.success_rate == 1.0
    assert sorted(t.epoch for t in run.trajectories(with_steps=False)) == [0, 0, 1, 1]


def test_load_latest_prefix_and_a_store_given_as_url_or_object(store_dir: Path):
    with pytest.raises(UserError, match="no runs"):
        sharpen.load("latest")
    first = sharpen.run("code", agent="null", tasks=2, env_args=GENERATED)
    second = sharpen.run("code", agent="reference", tasks=2, env_args=GENERATED)
    assert sharpen.load().id == sharpen.load("latest").id == second.id
    assert sharpen.load(first.id[:7]).id == first.id
    assert repr(sharpen.load(first.id)) == (f"Run('{first.id}', env='code', agent='null', "
                                            "model='none', status='finished', success=0/2)")
    with pytest.raises(UserError, match="no run matches"):
        sharpen.load("zzzz")
    other = store_dir / "other.db"
    elsewhere = sharpen.run("code", agent="reference", tasks=1, env_args=GENERATED,
                            store=f"sqlite:///{other}")
    assert sharpen.load("latest").id == second.id  # the default store did not get it
    st = Store(f"sqlite:///{other}")
    assert sharpen.load("latest", store=st).id == elsewhere.id
    assert sharpen.report("latest", store=st).run.run_id == elsewhere.id


def test_mistakes_end_in_one_clear_error(store_dir: Path):
    with pytest.raises(UserError, match="unknown env 'cdoe'") as bad_env:
        sharpen.run("cdoe", agent="reference", tasks=1)
    assert "did you mean 'code'" in str(bad_env.value)
    with pytest.raises(UserError, match="unknown agent 'refrence'"):
        sharpen.run("code", agent="refrence", tasks=1, env_args=GENERATED)
    with pytest.raises(UserError, match="unknown model 'lcoal'"):
        sharpen.run("code", model="lcoal", tasks=1, env_args=GENERATED)
    with pytest.raises(UserError, match="number of tasks must be 1 or more, got 0"):
        sharpen.run("code", agent="reference", tasks=0, env_args=GENERATED)
    with pytest.raises(UserError, match="both a task list and a split"):
        sharpen.run("code", agent="reference", tasks=[], split="test", env_args=GENERATED)
    with pytest.raises(UserError, match="the same run is named twice"):
        run = sharpen.run("code", agent="null", tasks=1, env_args=GENERATED)
        sharpen.compare(run, run.id)
    with pytest.raises(TypeError, match="resume and re-scoring"):
        sharpen.run("code", model=object(), tasks=1, env_args=GENERATED)  # type: ignore[arg-type]


def test_agent_as_a_yaml_file_and_as_a_task_list(store_dir: Path):
    spec = sharpen.AgentSpec(name="from-file", agent=PluginRef(name="reference"),
                             model=PluginRef(name="none"), params={}, components={})
    spec.dump(store_dir / "ref.yaml")
    tasks = REGISTRY.create(ENV, PluginRef(name="code", args=GENERATED)).list_tasks(
        split="val", limit=3, seed=4)
    run = sharpen.run("code", agent="ref.yaml", tasks=tasks, env_args=GENERATED)
    assert run.spec.name == "from-file" and run.spec.hash() == spec.hash()
    assert run.manifest.task_ids == [t.id for t in tasks] and run.success_rate == 1.0
    assert sharpen.run("code", agent=store_dir / "ref.yaml", tasks=tasks,
                       env_args=GENERATED, resume=True).id == run.id  # same config: resumed


class _UseReference(BaseProposer):
    async def propose(self, ctx):
        child = ctx.parent.spec.model_copy(update={"agent": PluginRef(name="reference"), "parents": []})
        if child.hash() in ctx.tried:
            raise NothingToPropose("tried")
        return Proposal(spec=child, change="use the reference solver")


def test_improve_again_needs_resume_or_fresh(store_dir: Path):
    registry = Registry()
    registry.add("proposer", "use_reference", _UseReference)
    args = dict(env_args=GENERATED, agent="null", proposer="use_reference", registry=registry,
                train=2, val=2, test=3, budget_rollouts=12, minibatch=2)
    first = sharpen.improve("code", **args)
    assert first.results[0].test_score == 1.0
    with pytest.raises(UserError, match="already has a checkpoint") as again:
        sharpen.improve("code", **args)
    assert "resume=True" in str(again.value)
    resumed = sharpen.improve("code", resume=True, **args)
    assert resumed.results[0].winner.hash() == first.results[0].winner.hash()
    with pytest.raises(UserError, match="unknown proposer 'reflxion'"):
        sharpen.improve("code", proposer="reflxion", agent="null", env_args=GENERATED)


def test_import_sharpen_does_not_import_the_api():
    code = ("import sys, sharpen; assert 'sharpen.api' not in sys.modules, 'imported eagerly'; "
            "assert {'run', 'arun', 'load', 'report', 'compare', 'improve', 'aimprove', 'Run'} "
            "<= set(sharpen.__all__) & set(dir(sharpen)); "
            "from sharpen import run, Run; import sharpen.api as api; assert run is api.run; "
            "assert sharpen.improve is api.improve and Run is api.Run")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        sharpen.nope  # noqa: B018
