"""``sharpen compare``'s judge scores: two stored runs in a real SQLite store, judged by
storing judgements with their feedback (``Store.save_judgement``) — no model needed."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import numpy as np
import pytest
from conftest import sharpen
from scipy.stats import wilcoxon

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.core.judgement import Judgement
from sharpen.core.manifest import RunManifest
from sharpen.core.outcome import Outcome
from sharpen.core.registry import PluginRef
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Trajectory
from sharpen.judges.runner import judge_author
from sharpen.stats.compare import compare_stored
from sharpen.stats.judge_compare import compare_scores
from sharpen.stats.mcnemar import mcnemar
from sharpen.store import Store

ENV = PluginRef(name="code", args={"source": "generated"})
TASKS = [TaskSpec(env="code", id=f"gen/t/{i}", seed=i) for i in range(8)]
QUALITY_A = [2, 3, 3, 2, 4, 1, 3, 2]
QUALITY_B = [3, 4, 3, 4, 5, 2, 3, 4]  # two tasks unchanged, the rest up
SOLVED_A = [True, True, False, False, False, False, False, False]
SOLVED_B = [True, True, True, True, True, True, True, False]  # 5 discordant, all to B


def _run(store: Store, run_id: str, tasks: list[TaskSpec]) -> list[Trajectory]:
    spec = AgentSpec(name=run_id)
    store.create_run(RunManifest(run_id=run_id, env=ENV, agent_hash=spec.hash(),
                                 task_ids=[t.id for t in tasks], epochs=1, seed=0,
                                 config_hash=run_id), spec, tasks)
    out = []
    for task in tasks:
        t = Trajectory(id=uuid.uuid4().hex, run_id=run_id, task=task, agent_hash=spec.hash(),
                       epoch=0, outcome=Outcome(success=task.seed % 2 == 0, reward=0.0))
        assert store.save_trajectory(t)
        out.append(t)
    return out


def _judge(store: Store, t: Trajectory, values: dict[str, float | bool], *,
           judge_hash: str = "f" * 64, versus: str = "") -> None:
    """Store one judgement of ``t`` and its records, as :func:`judge_run` does."""
    j = Judgement(run_id=t.run_id, trajectory_id=t.id, versus=versus, judge="rubric:quality",
                  judge_hash=judge_hash, model="SmolLM2", status="ok")
    target = FeedbackTarget(kind="trajectory", run_id=t.run_id, trajectory_id=t.id)
    records = [Feedback(source="judge", target=target, name=name, value=v, author=judge_author(j),
                        call_id=j.id, versus=versus or None) for name, v in values.items()]
    assert store.save_judgement(j, records)


@pytest.fixture
def judged(tmp_path: Path) -> tuple[Store, list[Trajectory], list[Trajectory]]:
    """Runs A and B on the same 8 tasks, judged on a graded and a yes/no criterion; A alone
    has a third criterion, B a second judge version, and both a pairwise verdict."""
    store = Store(f"sqlite:///{tmp_path / 'sharpen.db'}")
    a, b = _run(store, "run-a", TASKS), _run(store, "run-b", TASKS)
    for i in range(8):
        _judge(store, a[i], {"quality": QUALITY_A[i], "solved": SOLVED_A[i], "only_a": 1.0})
        _judge(store, b[i], {"quality": QUALITY_B[i], "solved": SOLVED_B[i]})
        _judge(store, b[i], {"quality": 1}, judge_hash="e" * 64)  # another judge version
    # Pairwise verdicts are preferences against the other run, not scores: left out.
    _judge(store, a[0], {"quality": 0.0}, judge_hash="d" * 64, versus=b[0].id)
    _judge(store, b[0], {"quality": 1.0}, judge_hash="d" * 64, versus=a[0].id)
    return store, a, b


def test_compare_pairs_each_judges_criterion_on_tasks(judged) -> None:
    store, _, _ = judged
    rep = compare_stored([(store, "run-a"), (store, "run-b")], seed=3)
    by_name = {c.name: c for c in rep.judge_scores}
    assert sorted(by_name) == ["quality", "solved"] and len(rep.judge_scores) == 2
    q, s = by_name["quality"], by_name["solved"]
    assert q.author == "rubric:quality@ffffffff (SmolLM2)" == s.author
    d = np.array(QUALITY_B, float) - np.array(QUALITY_A, float)
    assert q.matched_tasks == 8 and not q.boolean and q.label_b == "B"
    assert q.mean_a == pytest.approx(np.mean(QUALITY_A))
    assert q.difference == pytest.approx(d.mean()) == pytest.approx(1.0)
    assert q.method == "wilcoxon-pratt" and q.zero_differences == 2
    assert q.p_value == pytest.approx(wilcoxon(d, zero_method="pratt").pvalue)
    assert q.ci is not None and 0 < q.ci.low < q.difference < q.ci.high <= 2
    assert s.boolean and s.difference == pytest.approx(5 / 8)
    assert s.method == "mcnemar-exact" and s.discordant == (0, 5)
    assert s.p_value == pytest.approx(mcnemar(0, 5).p_value) == pytest.approx(2 * 0.5 ** 5)
    again = compare_stored([(store, "run-a"), (store, "run-b")], seed=3)
    assert again.judge_scores == rep.judge_scores  # seeded
    # The success comparison is the one it was before judge scores were added.
    assert rep.comparisons[0].difference == 0.0


def test_graded_and_multi_epoch_yes_no_edge_cases() -> None:
    rng = np.random.default_rng(0)
    a = {("j", "q"): {f"t{i}": [3.0] for i in range(5)},
         ("j", "ok"): {f"t{i}": [False, True] for i in range(6)}}
    b = {("j", "q"): {f"t{i}": [3.0] for i in range(1, 6)},  # t0 only in A, t5 only in B
         ("j", "ok"): {f"t{i}": [True, True] for i in range(6)}}
    same, ok = sorted(compare_scores(a, b, rng, run_a="a", run_b="b"), key=lambda c: c.name)[::-1]
    # Every graded difference zero: nothing to rank, p = 1 (scipy would warn and give nan).
    assert same.name == "q" and same.matched_tasks == 4 and (same.only_a, same.only_b) == (1, 1)
    assert same.difference == 0 and same.p_value == 1.0 and same.zero_differences == 4
    # Two epochs per task: the scores are rates, McNemar does not apply; the bootstrap
    # p-value inverts its interval (every task up: no replicate crosses 0, p is a bound).
    assert ok.boolean and ok.method == "paired-bootstrap" and ok.discordant is None
    assert ok.difference == pytest.approx(0.5) and ok.ci is not None
    assert ok.ci.low == ok.ci.high == pytest.approx(0.5) and ok.p_upper_bound
    one = compare_scores({("j", "q"): {"t0": [1.0]}}, {("j", "q"): {"t0": [4.0]}}, rng,
                         run_a="a", run_b="b")[0]
    assert one.difference == 3.0 and one.ci is None and one.method == "none"


def test_cli_compare_shows_and_emits_judge_scores(judged, tmp_path: Path) -> None:
    store, _, _ = judged
    env = {"SHARPEN_STORE": store.url}
    res = sharpen("compare", "run-a", "run-b", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    assert "Judge scores on common tasks" in res.stdout
    row = next(line for line in res.stdout.splitlines() if "quality" in line)
    assert "B vs A" in row and "2.50" in row and "3.50" in row and "+1.00" in row
    assert "wilcoxon-pratt (2 unchanged)" in row
    solved = next(line for line in res.stdout.splitlines() if "solved" in line)
    assert "25.0%" in solved and "87.5%" in solved and "+62.5" in solved
    assert "discordant 0/5" in solved
    out = json.loads(sharpen("compare", "run-a", "run-b", "--json", cwd=tmp_path, env=env).stdout)
    assert {c["name"]: c["method"] for c in out["judge_scores"]} == {
        "quality": "wilcoxon-pratt", "solved": "mcnemar-exact"}
