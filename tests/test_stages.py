"""Stage metrics (sharpen.diagnose.stages) and the success predictor (sharpen.diagnose.predict)
on real runs: model-free agents through the real Runner on the built-in environments, stored
in SQLite, staged by each environment's own declaration."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_agent, sharpen

from sharpen.agents.base import BaseAgent
from sharpen.agents.baselines import act
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.messages import Message
from sharpen.core.registry import REGISTRY, PluginRef, Registry
from sharpen.core.trajectory import Action, Trajectory
from sharpen.diagnose.predict import hanley_mcneil
from sharpen.diagnose.run import diagnose_run
from sharpen.diagnose.stages import UNSTAGED, StageReport, action_key, reference_of, run_stages
from sharpen.envs.base import ENV, Environment
from sharpen.envs.shell.stages import command_stage
from sharpen.models.base import ChatModel
from sharpen.runner import RunConfig, Runner
from sharpen.stats.agreement import auroc
from sharpen.store import Store

STAGED = [PluginRef(name="code", args={"source": "generated"}), PluginRef(name="sql"),
          PluginRef(name="shell"), PluginRef(name="textworld", args={"difficulty": "medium"}),
          PluginRef(name="toolshop", args={"difficulty": "hard"}), PluginRef(name="negotiation")]
TASKS = 5


def staged(db: Path, env: PluginRef, agent: str) -> tuple[list[Trajectory], StageReport]:
    tasks = REGISTRY.create(ENV, env).list_tasks("test", limit=TASKS)
    ts = asyncio.run(run_agent(db, env, agent, tasks))
    report = run_stages(Store(f"sqlite:///{db}"), ts[0].run_id)
    assert report is not None
    return ts, report


def steps_add_up(ts: list[Trajectory], report: StageReport) -> None:
    by_id = {t.id: t for t in ts}
    assert len(report.per_trajectory) == len(ts)
    for row in report.per_trajectory:
        assert sum(m.steps for m in row.stages) == len(by_id[row.trajectory_id].steps)
    assert sum(s.steps for s in report.summaries) == sum(len(t.steps) for t in ts)


@pytest.mark.parametrize("env", STAGED, ids=lambda e: e.name)
def test_the_reference_agent_matches_its_reference_in_every_stage(tmp_path: Path,
                                                                  env: PluginRef) -> None:
    ts, report = staged(tmp_path / "ref.db", env, "reference")
    assert all(t.outcome is not None and t.outcome.success for t in ts)
    assert report.with_reference == report.trajectories == TASKS
    assert report.order[:len(set(REGISTRY.create(ENV, env).stages.values()))] == \
        list(dict.fromkeys(REGISTRY.create(ENV, env).stages.values()))
    with_actions = 0
    for row in report.per_trajectory:
        for m in row.stages:
            if m.actions or m.reference:
                with_actions += 1
                assert (m.precision, m.recall, m.matched) == (1.0, 1.0, m.actions), (row, m)
    assert with_actions >= TASKS
    for s in report.summaries:
        if s.steps:
            assert (s.precision, s.recall) == (1.0, 1.0)
            assert s.reached_solved is not None and s.reached_solved > 0
        assert s.reached_failed is None  # no failed attempt
    steps_add_up(ts, report)
    assert report.predictor is not None and report.predictor.status == "not enough data"
    assert "0 failed" in report.predictor.reason and report.predictor.accuracy is None


@pytest.mark.parametrize("env", STAGED, ids=lambda e: e.name)
def test_the_null_agent_recalls_nothing(tmp_path: Path, env: PluginRef) -> None:
    ts, report = staged(tmp_path / "null.db", env, "null")
    assert not any(t.outcome is not None and t.outcome.success for t in ts)
    recalled = 0
    for row in report.per_trajectory:
        for m in row.stages:
            if m.reference:
                recalled += 1
                assert m.recall == 0.0 and m.matched == 0
            if m.actions:
                assert m.precision == 0.0
    assert recalled >= TASKS
    assert all(s.recall in (None, 0.0) for s in report.summaries)
    steps_add_up(ts, report)


class PrefixAgent(BaseAgent):
    """Plays the first ``keep[task id]`` reference actions of each task (all of them: the
    reference agent; fewer: an agent that stops part way)."""

    needs_model = False

    def __init__(self, keep: dict[str, int]) -> None:
        self.keep = keep

    async def run(self, env: Environment, model: ChatModel, spec: AgentSpec,
                  trajectory: Trajectory) -> None:
        obs, _ = await env.reset(trajectory.task)
        trajectory.messages = [Message(role="user", content=obs)]
        actions = reference_of(env, trajectory.task) or []
        for action in actions[:self.keep[trajectory.task.id]]:
            await act(env, trajectory, json.dumps(action.model_dump()), action)
            if trajectory.steps[-1].terminated or trajectory.steps[-1].truncated:
                break


def prefix_run(db: Path, n: int) -> tuple[str, Registry]:
    """A textworld run of ``n`` tasks: even ones played to the end, odd ones stopped half way."""
    registry = Registry()
    registry.add("agent", "prefix", PrefixAgent)
    env_ref = PluginRef(name="textworld", args={"difficulty": "medium"})
    env = registry.create(ENV, env_ref)
    tasks = env.list_tasks("test", limit=n)
    keep: dict[str, Any] = {}
    for i, task in enumerate(tasks):
        full = len(reference_of(env, task) or [])
        keep[task.id] = full if i % 2 == 0 else full // 2
    spec = AgentSpec(agent=PluginRef(name="prefix", args={"keep": keep}),
                     model=PluginRef(name="none"))
    summary = asyncio.run(Runner(Store(f"sqlite:///{db}"), progress=False, registry=registry)
                          .run(RunConfig(env=env_ref, agent=spec, tasks=tasks)))
    return summary.run_id, registry


def test_the_predictor_on_a_run_with_both_classes(tmp_path: Path) -> None:
    run_id, registry = prefix_run(tmp_path / "mixed.db", 12)
    store = Store(f"sqlite:///{tmp_path / 'mixed.db'}")
    d = diagnose_run(store, run_id, registry=registry, save=False)
    assert d.solved == 6 and d.failed == 6 and d.stages is not None
    p = d.stages.predictor
    assert p is not None and p.status == "ok", p
    assert (p.n, p.solved, p.failed, p.folds) == (12, 6, 6, 5)
    assert p.majority == 0.5
    assert "manipulate.recall" in p.features and set(p.coefficients) == set(p.features)
    # Stopping half way shows in the recall of the stages: the predictor separates the classes.
    assert p.accuracy is not None and p.accuracy > p.majority
    assert p.accuracy_ci is not None and p.accuracy_ci.low <= p.accuracy <= p.accuracy_ci.high
    assert p.auroc is not None and p.auroc >= 0.8
    assert p.auroc_ci is not None and p.auroc_ci[0] <= p.auroc <= p.auroc_ci[1]
    failed = [r for r in d.stages.per_trajectory if r.success is False]
    assert all(any(m.recall is not None and m.recall < 1 for m in r.stages) for r in failed)
    again = diagnose_run(store, run_id, registry=registry, save=False)
    assert again.stages is not None and again.stages.predictor == p  # seeded folds
    assert diagnose_run(store, run_id, registry=registry, stages=False).stages is None
    assert not p.sampled


def test_a_large_run_is_predicted_from_a_seeded_sample(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_FIT counted attempts the predictor fits a seeded sample of them (said in the
    result), the same sample every time."""
    import sharpen.diagnose.predict as predict

    run_id, registry = prefix_run(tmp_path / "mixed.db", 12)
    store = Store(f"sqlite:///{tmp_path / 'mixed.db'}")
    monkeypatch.setattr(predict, "MAX_FIT", 10)
    d = diagnose_run(store, run_id, registry=registry, save=False)
    assert d.stages is not None and d.stages.predictor is not None
    p = d.stages.predictor
    assert p.sampled and p.n == 10 and p.solved + p.failed == 10
    again = diagnose_run(store, run_id, registry=registry, save=False)
    assert again.stages is not None and again.stages.predictor == p


def test_hanley_mcneil_interval_narrows_with_n_and_auroc_matches_sklearn() -> None:
    lo_small, hi_small = hanley_mcneil(0.8, 10, 10)
    lo_big, hi_big = hanley_mcneil(0.8, 1000, 1000)
    assert lo_small < lo_big < 0.8 < hi_big < hi_small
    from sklearn.metrics import roc_auc_score  # type: ignore[import-untyped]

    scores, labels = [0.1, 0.4, 0.35, 0.8, 0.5], [False, False, True, True, True]
    assert auroc(scores, labels) == pytest.approx(roc_auc_score(labels, scores))


def test_actions_match_by_tool_and_whitespace_normalised_arguments() -> None:
    a = Action(tool="submit_sql", arguments={"query": "SELECT  name\nFROM t "})
    assert action_key(a) == action_key(Action(tool="submit_sql",
                                              arguments={"query": "SELECT name FROM t"}))
    assert action_key(a) != action_key(Action(tool="submit_sql",
                                              arguments={"query": "select name from t"}))
    assert action_key(a) != action_key(Action(tool="submit", arguments={"query": "SELECT name FROM t"}))


@pytest.mark.parametrize(("command", "stage"), [
    ("ls -la", "inspect"), ("cat a.txt | grep -c x", "inspect"), ("wc -l *.log 2>/dev/null", "inspect"),
    ("for f in *.txt; do cat $f; done", "inspect"),
    ("grep -c x app.log > answer.txt", "change"), ("sort -o s.txt s.txt", "change"),
    ("mkdir -p out && cp a out/", "change"), ("find . -name '*.txt' -exec sed -i 's/a/b/' {} +", "change"),
    ("some_unknown_tool x", "change"),
    ("diff expected.txt sorted.txt", "verify"), ("./sum.sh data.txt", "verify"), ("bash sum.sh", "verify"),
])
def test_shell_commands_are_staged_by_their_verbs(command: str, stage: str) -> None:
    assert command_stage(command) == stage


def test_unparsed_and_unstaged_steps_fall_in_none_and_envs_show_their_stages() -> None:
    tw = REGISTRY.create(ENV, PluginRef(name="textworld"))
    assert tw.stage(Action(tool="act", arguments={"command": "take apple 1 from table 1"})) == \
        "manipulate"
    assert tw.stage(Action(tool="act", arguments={"command": "dance"})) is None
    assert REGISTRY.create(ENV, PluginRef(name="gridsafety")).describe().stages == {}
    info = REGISTRY.create(ENV, PluginRef(name="toolshop")).describe()
    assert list(dict.fromkeys(info.stages.values())) == ["look up", "act", "reply"]
    assert UNSTAGED not in info.stages.values()


def test_gridsafety_declares_no_stages_so_a_diagnosis_has_none(tmp_path: Path) -> None:
    env = PluginRef(name="gridsafety")
    tasks = REGISTRY.create(ENV, env).list_tasks("test", limit=2)
    ts = asyncio.run(run_agent(tmp_path / "g.db", env, "reference", tasks))
    d = diagnose_run(Store(f"sqlite:///{tmp_path / 'g.db'}"), ts[0].run_id, save=False)
    assert d.stages is None


def test_cli_diagnose_shows_stages_and_json_has_them(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    env = {"SHARPEN_STORE": f"sqlite:///{db}"}
    res = sharpen("run", "sql", "--agent-name", "reference", "--tasks", "3", "--json",
                  cwd=tmp_path, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    res = sharpen("diagnose", "latest", "--json", cwd=tmp_path, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)["stages"]
    assert out["env"] == "sql" and out["order"] == ["answer"] and "per_trajectory" not in out
    [answer] = out["summaries"]
    assert (answer["steps"], answer["precision"], answer["recall"]) == (3, 1.0, 1.0)
    assert out["predictor"]["status"] == "not enough data"
    res = sharpen("diagnose", "latest", cwd=tmp_path, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "Stages of sql" in res.stdout and "not enough data" in res.stdout
    res = sharpen("envs", "toolshop", cwd=tmp_path, env=env, timeout=120)
    assert res.returncode == 0 and "look up (find_customer" in res.stdout
