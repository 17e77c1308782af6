"""Plug-ins from outside sharpen's source tree, end to end through the real CLI.

``tests/plugin_pkg`` is a real package (``sharpen-example-plugin``) that declares an
environment, a verifier, an agent, a model and a proposer in the ``sharpen`` entry-point group.
The session fixture installs it with pip into a temporary folder; each CLI call sees it through
``PYTHONPATH``, so the dev venv is never changed. Every run writes a real SQLite store.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from conftest import sharpen

from sharpen.core.errors import UserError
from sharpen.core.registry import Registry
from sharpen.envs.base import ENV
from sharpen.store import Store

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "tests" / "plugin_pkg"
OURS = {"env": "arith", "verifier": "arith", "agent": "ask_once", "model": "arith_bot",
        "proposer": "fixed_hint"}
"""What the example package declares, per kind."""


def pip_install(source: Path, target: Path) -> None:
    """``pip install --no-deps --target TARGET`` of a copy of ``source`` (setuptools writes
    ``build/`` and ``*.egg-info`` next to the sources; the copy keeps them out of the tree).

    Without build isolation when setuptools is importable here: that build is offline and takes
    about 2 s, against about 4.5 s for an isolated one, which also fetches setuptools from PyPI
    on every session. A venv without setuptools (Python >= 3.12 seeds none) gets the isolated
    build."""
    copy = target.parent / f"{source.name}-src"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    isolation = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-input",
         *isolation, "--target", str(target), str(copy)],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="session")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the example package is installed in (put it on ``PYTHONPATH``)."""
    target = tmp_path_factory.mktemp("plugins") / "site"
    pip_install(PACKAGE, target)
    return target


def with_plugins(*paths: Path) -> dict[str, str]:
    """The environment of a CLI call that sees the packages installed in ``paths``."""
    return {"PYTHONPATH": ":".join(str(p) for p in paths)}


def store_of(tmp_path: Path) -> list[str]:
    return ["--store", f"sqlite:///{tmp_path}/s.db"]


def one_error(done: subprocess.CompletedProcess[str]) -> str:
    """The stderr of a CLI call that failed as a user error: exit 2, one ``error:`` line and
    its ``fix:``, no traceback. Returned with the lines joined (rich wraps long ones)."""
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert done.stderr.count("error:") == 1 and "fix:" in done.stderr, done.stderr
    return " ".join(done.stderr.split())


def test_the_installed_package_declares_its_entry_points(plugin_path: Path):
    script = ("import importlib.metadata as m, json; "
              "print(json.dumps(sorted(e.name for e in m.entry_points(group='sharpen') "
              "if e.dist is not None and e.dist.name == 'sharpen-example-plugin')))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", **with_plugins(plugin_path)}, check=True)
    assert json.loads(done.stdout) == sorted(f"{k}.{n}" for k, n in OURS.items())


def test_plugins_and_envs_list_the_outside_plugins(plugin_path: Path, tmp_path: Path):
    done = sharpen("plugins", cwd=tmp_path, env=with_plugins(plugin_path))
    assert done.returncode == 0, done.stderr
    # One line per kind: "env: arith, code, ..." (COLUMNS=200, so no line wraps).
    listed = {kind: [n.strip() for n in names.split(",")] for kind, names in
              re.findall(r"^(\w+): (.*)$", done.stdout, re.MULTILINE)}
    for kind, name in OURS.items():
        assert name in listed[kind], (kind, listed)
    assert "code" in listed["env"]  # the built-ins are listed next to them
    # Without the package installed, sharpen knows nothing of them.
    bare = sharpen("plugins", "env", cwd=tmp_path)
    assert bare.returncode == 0 and "arith" not in bare.stdout
    envs = sharpen("envs", cwd=tmp_path, env=with_plugins(plugin_path))
    assert envs.returncode == 0, envs.stderr
    assert re.search(r"^arith ", envs.stdout, re.MULTILINE), envs.stdout
    # An outside env's knobs are listed, and taken as -E arguments, like a built-in's.
    one = sharpen("envs", "arith", "-E", "max_operand=5", cwd=tmp_path,
                  env=with_plugins(plugin_path))
    assert one.returncode == 0, one.stderr
    assert "max_operand" in one.stdout


def test_run_the_outside_env_agent_and_model_then_report(plugin_path: Path, tmp_path: Path):
    env = with_plugins(plugin_path)
    done = sharpen("run", "arith", "--agent-name", "ask_once", "--model", "arith_bot",
                   "--tasks", "6", *store_of(tmp_path), "--no-progress", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    report = sharpen("report", "latest", "--json", *store_of(tmp_path), cwd=tmp_path, env=env)
    assert report.returncode == 0, report.stderr
    data = json.loads(report.stdout)
    assert data["run"]["env"]["name"] == "arith"
    assert (data["run"]["agent"], data["run"]["model"]) == ("ask_once", "arith_bot")

    # arith_bot multiplies carelessly unless told to check: exactly the products fail.
    store = Store(f"sqlite:///{tmp_path}/s.db")
    trajectories = list(store.iter_trajectories(store.resolve_run("latest")))
    assert len(trajectories) == 6
    products = 0
    for t in trajectories:
        question = t.messages[1].content or ""
        product = "*" in question
        products += product
        assert t.outcome is not None and t.outcome.success is not product, (question, t.outcome)
        assert [fb.source for fb in t.feedback] == ["verifier"]  # the env's step feedback, kept
        assert len(t.steps) == 1 and t.usage.calls == 1
    assert 0 < products < 6  # both kinds of task are in this sample
    assert data["accuracy"]["success"]["value"] == pytest.approx((6 - products) / 6)

    # The outside model also drives the built-in tool agent (its text protocol reads the block).
    tool = sharpen("run", "arith", "-E", "ops=+-", "--model", "arith_bot", "--tasks", "3",
                   *store_of(tmp_path), "--no-progress", cwd=tmp_path, env=env)
    assert tool.returncode == 0, tool.stderr
    assert "3/3 = 100.0%" in tool.stdout


def test_improve_with_the_outside_proposer_from_an_agent_spec_yaml(plugin_path: Path, tmp_path: Path):
    env = with_plugins(plugin_path)
    seed = tmp_path / "seed.yaml"
    seed.write_text("model: {name: arith_bot}\nagent: {name: ask_once}\n")
    winner = tmp_path / "winner.yaml"
    # Products only: the seed fails every task, the hint ("Check ...") fixes every one.
    flags = ["-E", "ops=*", "--proposer", "fixed_hint", "--agent", str(seed), "--train", "4",
             "--val", "3", "--test", "6", "--minibatch", "2", "--budget-rollouts", "20"]
    done = sharpen("improve", "arith", *flags, *store_of(tmp_path), "--out", str(winner),
                   cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "seed: val 0.0%" in out
    assert "#1: appended the hint to 'instructions' — accepted, val 100.0%" in out
    assert re.search(r"fixed_hint winner \w+ │ 100\.0% │ 100\.0%", out), out
    spec = yaml.safe_load(winner.read_text())
    assert spec["agent"]["name"] == "ask_once" and spec["model"]["name"] == "arith_bot"
    assert spec["components"]["instructions"].endswith(
        "Check the arithmetic once more before you answer, and give the number only.")
    # The winning spec runs like any other.
    again = sharpen("run", "arith", "-E", "ops=*", "--agent", str(winner), "--tasks", "3",
                    *store_of(tmp_path), "--no-progress", cwd=tmp_path, env=env)
    assert again.returncode == 0, again.stderr
    assert "3/3 = 100.0%" in again.stdout


def test_a_plugin_named_by_its_file(plugin_path: Path, tmp_path: Path):
    ref = "tests/plugin_pkg/loose_env.py:LooseEnv"  # relative to the current folder
    # The file needs no install: the model-free reference agent solves it.
    ref_run = sharpen("run", ref, "-E", "terms=4", "--agent-name", "reference", "--tasks", "3",
                      *store_of(tmp_path), "--no-progress", cwd=REPO)
    assert ref_run.returncode == 0, ref_run.stderr
    assert "3/3 = 100.0%" in ref_run.stdout
    # With the package installed, its agent and model play the loose file's tasks.
    env = with_plugins(plugin_path)
    done = sharpen("run", ref, "-E", "terms=4", "--agent-name", "ask_once", "--model", "arith_bot",
                   "--tasks", "3", *store_of(tmp_path), "--no-progress", cwd=REPO, env=env)
    assert done.returncode == 0, done.stderr
    assert "3/3 = 100.0%" in done.stdout
    report = json.loads(sharpen("report", "latest", "--json", *store_of(tmp_path), cwd=REPO,
                                env=env).stdout)
    assert report["run"]["env"] == {"name": ref, "args": {"terms": 4}}


def test_an_agent_named_by_its_file_gets_its_required_args(tmp_path: Path):
    # --agent-arg reaches the agent when --agent-name is built (before: built without them,
    # an agent with a required argument was refused for lacking it).
    marks = tmp_path / "marks"
    marks.mkdir()
    done = sharpen("run", "code", "-E", "source=generated", "--agent-name",
                   "tests/paced_agent.py:PacedReference", "--agent-arg", f"marks={marks}",
                   "--agent-arg", "hold_s=0", "--tasks", "2", *store_of(tmp_path), "--no-progress",
                   "--json", cwd=REPO)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["summary"]["n_success"] == 2
    assert out["run"]["agent"]["agent"]["args"] == {"marks": str(marks), "hold_s": 0}


@pytest.mark.parametrize(("args", "says"), [
    (["run", "sharpen_example_plugn.arith:ArithEnv"],
     ["cannot import module 'sharpen_example_plugn.arith'", "did you mean sharpen_example_plugin.arith?"]),
    (["run", "sharpen_example_plugin.arth:ArithEnv"],
     ["cannot import module 'sharpen_example_plugin.arth'",
      "did you mean sharpen_example_plugin.arith?"]),
    (["run", "sharpen_example_plugin.arith:ArithEnvv"],
     ["sharpen_example_plugin.arith has no 'ArithEnvv'",
      "did you mean sharpen_example_plugin.arith:ArithEnv?"]),
    (["run", "tests/plugin_pkg/lose_env.py:LooseEnv"],
     ["no file 'tests/plugin_pkg/lose_env.py'", "relative to the current folder"]),
    (["run", "arith", "--agent-name", "sharpen_example_plugin.agent:AskOnce"],
     ["has no 'AskOnce'", "did you mean sharpen_example_plugin.agent:AskOnceAgent?"]),
    (["run", "arith", "--agent-name", "ask_once", "--model", "arith_bott"],
     ["unknown model 'arith_bott'", "did you mean 'arith_bot'?"]),
    (["improve", "arith", "--proposer", "sharpen_example_plugin.proposer:FixedHint"],
     ["has no 'FixedHint'", "did you mean sharpen_example_plugin.proposer:FixedHintProposer?"]),
])
def test_a_typo_in_a_reference_is_one_message_with_the_fix(plugin_path: Path, args: list[str],
                                                           says: list[str]):
    done = sharpen(*args, cwd=REPO, env=with_plugins(plugin_path))
    text = one_error(done)
    for part in says:
        assert part in text, text


BROKEN = textwrap.dedent('''
    """Plug-ins that miss a member of their contract (no base class to give the defaults)."""


    class HalfEnv:
        tools = []

        async def reset(self, task):
            return "", {}

        async def step(self, action):
            raise NotImplementedError


    class ModelessAgent:
        async def run(self, env, model, spec, trajectory):
            return None
''')


@pytest.mark.parametrize(("args", "says"), [
    (["run", "broken.py:HalfEnv"],
     ["does not meet the Environment contract: it lacks stages, outcome, close, describe, list_tasks",
      "subclass sharpen.envs.base.BaseEnvironment"]),
    (["run", "arith", "--agent-name", "broken.py:ModelessAgent"],
     ["does not meet the Agent contract: it lacks needs_model",
      "subclass sharpen.agents.base.BaseAgent"]),
])
def test_a_plugin_missing_a_contract_member_is_told_the_contract(plugin_path: Path, tmp_path: Path,
                                                                 args: list[str], says: list[str]):
    (tmp_path / "broken.py").write_text(BROKEN)
    text = one_error(sharpen(*args, cwd=tmp_path, env=with_plugins(plugin_path)))
    for part in says:
        assert part in text, text


API_SCRIPT = """
import json, sys
import sharpen
from sharpen.testing import check_env

store = sys.argv[1]
run = sharpen.run("arith", agent="ask_once", model="arith_bot", tasks=3, env_args={"ops": "+-"},
                  store=store)
seed = sharpen.AgentSpec(agent=sharpen.PluginRef(name="ask_once"),
                         model=sharpen.PluginRef(name="arith_bot"))
result = sharpen.improve("arith", proposer="fixed_hint", agent=seed, env_args={"ops": "*"},
                         train=4, val=3, test=6, minibatch=2, budget_rollouts=20, store=store)
(mine,) = result.results
print(json.dumps({"run": run.id, "rate": run.success_rate, "seed_test": result.baseline_test_score,
                  "winner_test": mine.test_score, "winner": mine.winner.components["instructions"],
                  "check_env": check_env("arith").ok}))
"""


def test_the_python_api_runs_the_outside_plugins(plugin_path: Path, tmp_path: Path):
    url = f"sqlite:///{tmp_path}/api.db"
    done = subprocess.run([sys.executable, "-c", API_SCRIPT, url], capture_output=True, text=True,
                          cwd=tmp_path, env={"PATH": "/usr/bin:/bin", **with_plugins(plugin_path)},
                          timeout=300)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["rate"] == 1.0 and got["check_env"] is True
    assert (got["seed_test"], got["winner_test"]) == (0.0, 1.0)
    assert got["winner"].endswith("Check the arithmetic once more before you answer, and give the "
                                  "number only.")
    store = Store(url)
    outcomes = [t.outcome for t in store.iter_trajectories(got["run"])]
    assert len(outcomes) == 3 and all(o is not None and o.success for o in outcomes)


@pytest.mark.parametrize("args", [
    ["env", "arith"],
    ["env", "tests/plugin_pkg/loose_env.py:LooseEnv", "-E", "terms=2"],
    ["agent", "ask_once", "--env", "arith", "--model", "arith_bot"],
    ["model", "arith_bot"],
    ["proposer", "fixed_hint"],
])
def test_the_checker_passes_every_outside_plugin(plugin_path: Path, args: list[str]):
    done = sharpen("check", *args, cwd=REPO, env=with_plugins(plugin_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"ok {args[0]} {args[1]}:") and " 0 failed" in done.stdout


def test_the_builtins_come_through_sharpens_own_entry_points():
    registry = Registry()
    assert {"code", "shell", "sql"} <= set(registry.names(ENV))
    assert {"tool", "null", "reference"} <= set(registry.names("agent"))
    assert "arith" not in registry.names(ENV)  # the example package is not installed here
    # Nothing is hard-coded: without entry points a registry knows no built-in at all.
    assert Registry(entry_points=False).names(ENV) == []
    with pytest.raises(UserError, match="unknown env 'code'"):
        Registry(entry_points=False).get(ENV, "code")


OTHER = {
    "pyproject.toml": textwrap.dedent("""
        [build-system]
        requires = ["setuptools>=64"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "other-arith"
        version = "0.1.0"

        [project.entry-points.sharpen]
        "env.arith" = "other_arith:OtherArith"

        [tool.setuptools]
        py-modules = ["other_arith"]
    """),
    "other_arith.py": "from sharpen_example_plugin.arith import ArithEnv as OtherArith\n",
}


def test_two_packages_declaring_one_name_get_the_clear_error(plugin_path: Path, tmp_path: Path):
    source = tmp_path / "other"
    source.mkdir()
    for name, text in OTHER.items():
        (source / name).write_text(text)
    other = tmp_path / "other-site"
    pip_install(source, other)
    env = with_plugins(plugin_path, other)
    text = one_error(sharpen("run", "arith", "--agent-name", "reference", "--tasks", "1",
                             *store_of(tmp_path), cwd=tmp_path, env=env))
    assert "env 'arith' is declared by more than one package" in text
    assert "sharpen_example_plugin.arith:ArithEnv (package sharpen-example-plugin)" in text
    assert "other_arith:OtherArith (package other-arith)" in text
    assert "uninstall one of them, or name the one you want as module:Name" in text
    # The fix works: a module:Name reference picks one.
    done = sharpen("run", "sharpen_example_plugin.arith:ArithEnv", "--agent-name", "reference",
                   "--tasks", "1", *store_of(tmp_path), "--no-progress", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    # A name only one package declares is unaffected.
    assert "arith_bot" in sharpen("plugins", "model", cwd=tmp_path, env=env).stdout


# -- docs/plugins.md ----------------------------------------------------------------------

DOC = REPO / "docs" / "plugins.md"
BLOCK = re.compile(r"(?:<!-- (?P<mark>[^\n]*?) -->\n)?```(?P<lang>\w+)\n(?P<body>.*?)\n```\n", re.S)


def doc_blocks(lang: str) -> list[tuple[str | None, str]]:
    """``(marker comment, body)`` of each ``lang`` code block of docs/plugins.md."""
    return [(m["mark"], m["body"]) for m in BLOCK.finditer(DOC.read_text()) if m["lang"] == lang]


def test_the_docs_quote_the_example_package_word_for_word():
    quoted = [(mark, body) for lang in ("python", "toml") for mark, body in doc_blocks(lang)
              if mark and mark.startswith("from ")]
    assert len(quoted) >= 6
    for mark, body in quoted:
        source = (REPO / mark.removeprefix("from ")).read_text()
        assert body in source, f"docs/plugins.md quotes {mark} out of date:\n{body[:300]}"


def test_the_docs_judge_meets_the_contract_and_judges(tmp_path: Path):
    from sharpen import Message, TaskSpec, Trajectory
    from sharpen.judges.base import JUDGE, JudgeError

    (body,) = [b for mark, b in doc_blocks("python") if mark and mark.startswith("checked")]
    module = tmp_path / "judge_doc.py"
    module.write_text(body)
    registry = Registry(entry_points=False)
    judge = registry.create(JUDGE, f"{module}:ConcisenessJudge")
    # arith_bot, by its file: it "rates" a reply holding 2 + 1 as 3, and cannot rate prose.
    model = registry.create("model", f"{PACKAGE}/src/sharpen_example_plugin/model.py:ArithBot")
    task = TaskSpec(env="arith", id="t")

    def said(text: str) -> Trajectory:
        return Trajectory(task=task, agent_hash="h", messages=[Message(role="assistant", content=text)])

    import asyncio

    (fb,) = asyncio.run(judge.judge(said("2 + 1"), model))
    assert (fb.source, fb.name, fb.value) == ("judge", "conciseness", 3)
    with pytest.raises(JudgeError, match="no rating"):
        asyncio.run(judge.judge(said("no numbers here"), model))


def test_the_docs_python_examples_run_and_print_what_they_say(plugin_path: Path, tmp_path: Path):
    blocks = [body for mark, body in doc_blocks("python") if mark is None]
    assert len(blocks) == 2  # the checker's test, and the Python API
    for body in blocks:
        calls = "".join(f"\n{name}()\n" for name in re.findall(r"^def (test_\w+)\(", body, re.M))
        done = subprocess.run(
            [sys.executable, "-c", body + calls], capture_output=True, text=True, cwd=tmp_path,
            timeout=300, env={"PATH": "/usr/bin:/bin", "SHARPEN_STORE": f"sqlite:///{tmp_path}/d.db",
                              **with_plugins(plugin_path)})
        assert done.returncode == 0, done.stderr
        said = [re.escape(c).replace("…", ".*") for c in re.findall(r"^print\(.*\)  # (.*)$", body, re.M)]
        printed = done.stdout.splitlines()
        assert len(printed) == len(said), printed
        for want, got in zip(said, printed, strict=True):
            assert re.fullmatch(want, got), (want, got)
