"""Judges on stored runs, with the real embedded model as the judge: feedback per criterion,
the judge's calls kept, resume after SIGKILL, judge errors kept apart from the agent's, the
pairwise judge in both orders, the reference and checklist judges, and rubric errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from conftest import SHARPEN, sharpen

from sharpen.core.errors import UserError
from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.core.messages import Message
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action, Step, Trajectory
from sharpen.judges.rubric import Rubric
from sharpen.judges.transcript import cited_steps, render
from sharpen.store import Store

RUBRIC = {
    "name": "code-quality",
    "criteria": [
        {"name": "solved", "description": "The final answer does what the task asks.",
         "scale": "bool"},
        {"name": "clarity", "description": "The answer is easy to follow.", "scale": "1-5"},
    ],
}
FAST = ["--judge-arg", "token_budget=300"]


def _store(path: Path) -> Store:
    return Store(f"sqlite:///{path / '.sharpen' / 'sharpen.db'}")


def _run(tmp: Path, *args: str) -> str:
    res = sharpen("run", *args, "--no-progress", "--json", cwd=tmp)
    assert res.returncode == 0, res.stderr
    return str(json.loads(res.stdout)["run"]["id"])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A store with the embedded model's code run (3 tasks), and the reference and null
    agents on sql (4 tasks each; no model)."""
    tmp = tmp_path_factory.mktemp("judges")
    spec = tmp / "agent.yaml"
    spec.write_text(yaml.safe_dump({"name": "small", "model": {"name": "local"},
                                    "params": {"temperature": 0.0, "max_tokens": 160},
                                    "limits": {"max_steps": 2}}))
    (tmp / "rubric.yaml").write_text(yaml.safe_dump(RUBRIC))
    ids = {
        "code": _run(tmp, "code", "--tasks", "3", "--agent", str(spec)),
        "ref": _run(tmp, "sql", "--tasks", "4", "--agent-name", "reference"),
        "null": _run(tmp, "sql", "--tasks", "4", "--agent-name", "null"),
    }
    return tmp, ids


# -- without a model ------------------------------------------------------------------------


@pytest.mark.parametrize(("rubric", "says"), [
    ({"name": "x", "criteria": []}, "has no criteria"),
    ({"name": "x", "criteria": [{"name": "a", "description": "d", "scale": "1to5"}]},
     "unknown scale '1to5'"),
    ({"name": "x", "criteria": [{"name": "a", "description": "d", "scale": ["only"]}]},
     "two or more distinct labels"),
    ({"name": "x", "criteria": [{"name": "a", "description": "d"}] * 2}, "repeated: a"),
    ({"criteria": [{"name": "a", "description": "d"}]}, "name: Field required"),
])
def test_a_bad_rubric_is_one_message_naming_the_fix(rubric: dict, says: str) -> None:
    with pytest.raises(UserError) as err:
        Rubric.parse(rubric)
    assert says in str(err.value)
    assert "docs/judges.md" in str(err.value)


def test_scales_fix_the_values_and_their_numbers() -> None:
    r = Rubric.parse({"name": "r", "criteria": [
        {"name": "ok", "description": "d", "scale": "bool"},
        {"name": "grade", "description": "d", "scale": "1-5"},
        {"name": "tone", "description": "d", "scale": ["rude", "neutral", "kind"]}]})
    ok, grade, tone = r.criteria
    assert ok.value_schema() == {"type": "boolean"}
    assert grade.value_schema() == {"type": "integer", "enum": [1, 2, 3, 4, 5]}
    assert tone.as_number("kind") == 2.0 and tone.as_number("shouty") is None
    assert grade.as_number(6) is None and grade.as_number(True) is None
    assert r.hash() != Rubric.parse({**r.model_dump(), "description": "other"}).hash()


def _traj(n_steps: int, obs_chars: int) -> Trajectory:
    task = TaskSpec(env="sql", id="t")
    steps = [Step(index=i, messages=[Message(role="assistant", content=f"reply {i}")],
                  action=Action(tool="query", arguments={"sql": f"select {i}"}),
                  observation="x" * obs_chars) for i in range(n_steps)]
    return Trajectory(task=task, agent_hash="h", steps=steps,
                      messages=[Message(role="user", content="Count the rows.")])


def test_the_transcript_numbers_steps_and_says_what_it_cut() -> None:
    text, cut = render(_traj(3, 20), 1200)
    assert not cut and "[S0]" in text and "[S2]" in text and "Count the rows." in text
    text, cut = render(_traj(40, 2000), 300)
    assert cut
    assert "[S0]" in text and "[S39]" in text  # the start and the end are kept
    assert "left out to fit the budget" in text
    assert len(text) < 300 * 4 * 1.5
    assert cited_steps("as [S2] shows, then [S9] and [S2] again, [S50]", 10) == [2, 9]


# -- with the embedded model as judge --------------------------------------------------------


@pytest.mark.slow
def test_sharpen_judge_writes_one_record_per_criterion_and_keeps_the_calls(runs) -> None:
    tmp, ids = runs
    res = sharpen("judge", ids["code"], "--judge", "rubric.yaml", *FAST, "--no-progress", cwd=tmp)
    assert res.returncode == 0, res.stderr
    assert "judged" in res.stdout and "clarity" in res.stdout
    store = _store(tmp)
    trajs = list(store.iter_trajectories(ids["code"]))
    [jhash] = {j.judge_hash for j in store.judgements(ids["code"])}
    judgements = {j.id: j for j in store.judgements(ids["code"], jhash, calls=True)}
    assert len(judgements) == len(trajs) == 3
    for t in trajs:
        mine = [f for f in t.feedback if f.source == "judge"]
        assert sorted(f.name for f in mine) == ["clarity", "solved"]
        for f in mine:
            assert f.call_id in judgements and f.author.startswith(f"rubric:code-quality@{jhash[:8]}")
            assert f.target.run_id == ids["code"] and f.target.trajectory_id == t.id
        j = judgements[mine[0].call_id]
        assert j.status == "ok" and j.usage.calls >= 1 and j.trajectory_id == t.id
        prompt = j.calls[0].messages[-1].content or ""
        assert "[S0]" in prompt and "clarity" in prompt
        assert "SUCCESS" not in prompt and "passed" not in prompt.lower().split("transcript")[0]
    # a second call without --resume names the fix; with it, nothing is judged twice
    again = sharpen("judge", ids["code"], "--judge", "rubric.yaml", *FAST, cwd=tmp)
    assert again.returncode == 2 and "--resume" in again.stderr
    resumed = sharpen("judge", ids["code"], "--judge", "rubric.yaml", *FAST, "--resume",
                      "--json", cwd=tmp)
    assert resumed.returncode == 0, resumed.stderr
    out = json.loads(resumed.stdout)
    assert out["summary"]["judged"] == 0 and out["summary"]["already"] == 3
    # the report shows the scores per criterion
    rep = json.loads(sharpen("report", ids["code"], "--json", cwd=tmp).stdout)
    assert {s["name"] for s in rep["judges"]} == {"clarity", "solved"}
    assert all(s["n"] == 3 for s in rep["judges"])


def _judgements(tmp: Path, run_id: str) -> int:
    store = _store(tmp)
    try:
        return len(store.judgements(run_id))
    finally:
        store.close()


@pytest.mark.slow
def test_sigkill_mid_judging_then_resume_gives_exactly_one_judgement_each(runs) -> None:
    tmp, ids = runs
    args = ["judge", ids["ref"], "--judge", "rubric.yaml", *FAST, "--no-progress"]
    proc = subprocess.Popen([*SHARPEN, *args], cwd=tmp, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while _judgements(tmp, ids["ref"]) < 1 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, "judging finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = _judgements(tmp, ids["ref"])
    assert 1 <= before < 4
    res = sharpen(*args, "--resume", cwd=tmp)
    assert res.returncode == 0, res.stderr
    store = _store(tmp)
    judged = store.judgements(ids["ref"])
    assert len(judged) == 4 and len({j.trajectory_id for j in judged}) == 4
    per = Counter((f.target.trajectory_id, f.name) for t in store.iter_trajectories(ids["ref"])
                  for f in t.feedback if f.source == "judge")
    assert len(per) == 4 * 2 and set(per.values()) == {1}


@pytest.mark.slow
def test_a_judge_that_cannot_answer_is_a_judge_error_not_the_agents(runs) -> None:
    tmp, ids = runs
    store = _store(tmp)
    before = json.loads(sharpen("report", ids["null"], "--json", cwd=tmp).stdout)
    res = sharpen("judge", ids["null"], "--judge", "rubric.yaml", "--judge-arg",
                  "params={max_tokens: 3}", "--json", cwd=tmp)
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)["summary"]
    assert summary["errors"] == 4 and summary["judged"] == 0
    assert "cut at max_tokens" in summary["first_errors"][0]
    judged = store.judgements(ids["null"])
    assert {j.status for j in judged} == {"error"}
    assert not any(f.source == "judge" for t in store.iter_trajectories(ids["null"])
                   for f in t.feedback)
    after = json.loads(sharpen("report", ids["null"], "--json", cwd=tmp).stdout)
    assert after["accuracy"] == before["accuracy"]  # the agent's numbers do not move
    assert after["judge_errors"] == {"rubric:code-quality": 4}
    # resume tries the failed judgements again, and still stores one per trajectory
    again = sharpen("judge", ids["null"], "--judge", "rubric.yaml", "--judge-arg",
                    "params={max_tokens: 3}", "--resume", "--json", cwd=tmp)
    assert json.loads(again.stdout)["summary"]["errors"] == 4
    assert len(store.judgements(ids["null"])) == 4


@pytest.mark.slow
def test_pairwise_judges_both_orders_and_a_flip_is_a_tie(runs) -> None:
    tmp, ids = runs
    res = sharpen("judge", ids["ref"], "--judge", "pairwise", "--versus", ids["null"],
                  "--limit", "2", *FAST, "--json", cwd=tmp)
    assert res.returncode == 0, res.stderr
    store = _store(tmp)
    nulls = {t.task.hash(): t.id for t in store.iter_trajectories(ids["null"])}
    pair = [j for j in store.judgements(ids["ref"], calls=True) if j.versus]
    assert len(pair) == 2
    for t in store.iter_trajectories(ids["ref"]):
        for f in t.feedback:
            if f.versus:
                assert f.versus == nulls[t.task.hash()] and f.value in (0.0, 0.5, 1.0)
                j = next(j for j in pair if j.id == f.call_id)
                assert set(j.detail) == {"ab", "ba", "flipped"} and len(j.calls) >= 2
                assert j.detail["flipped"] == (j.detail["ab"] != {"A": "B", "B": "A"}.get(
                    j.detail["ba"], "tie"))
                if j.detail["flipped"]:
                    assert f.value == 0.5
    # a pointwise judge refuses --versus, a pairwise one needs it
    bad = sharpen("judge", ids["ref"], "--judge", "pairwise", cwd=tmp)
    assert bad.returncode == 2 and "--versus" in bad.stderr


@pytest.mark.slow
def test_reference_and_checklist_judges(runs) -> None:
    tmp, ids = runs
    res = sharpen("judge", ids["ref"], "--judge", "reference", "--limit", "1", *FAST,
                  "--json", cwd=tmp)
    assert res.returncode == 0, res.stderr
    store = _store(tmp)
    [j] = [j for j in store.judgements(ids["ref"], calls=True) if j.judge == "reference"]
    assert "Reference solution:" in (j.calls[0].messages[-1].content or "")
    assert "SELECT" in (j.calls[0].messages[-1].content or "").upper()
    res = sharpen("judge", ids["ref"], "--judge", "checklist", "--judge-arg",
                  "checkpoints=[The agent ran a query, The agent gave an answer]", "--limit", "1",
                  *FAST, "--json", cwd=tmp)
    assert res.returncode == 0, res.stderr
    [c] = [j for j in store.judgements(ids["ref"]) if j.judge == "checklist"]
    assert c.status == "ok" and len(c.detail["met"]) == 2
    [fb] = [f for t in store.iter_trajectories(ids["ref"]) for f in t.feedback
            if f.call_id == c.id]
    assert fb.name == "checklist" and fb.value == sum(c.detail["met"]) / 2


@pytest.mark.slow
def test_agreement_pairs_judge_scores_with_annotations_of_the_same_name(runs) -> None:
    tmp, ids = runs
    store = _store(tmp)
    if not store.judgements(ids["code"]):
        pytest.skip("needs the judged code run")
    trajs = list(store.iter_trajectories(ids["code"]))
    for i, t in enumerate(trajs):
        store.add_feedback(Feedback(source="human", name="solved", value=bool(i % 2),
                                    author="ann", target=FeedbackTarget(
                                        kind="trajectory", run_id=t.run_id, trajectory_id=t.id)))
    res = sharpen("agreement", ids["code"], "--json", cwd=tmp)
    assert res.returncode == 0, res.stderr
    [a] = json.loads(res.stdout)
    assert a["criterion"] == "solved" and a["stats"]["n"] == len(trajs)
    assert sum(map(sum, a["stats"]["confusion"])) == len(trajs)
    human = sharpen("agreement", ids["code"], "--criterion", "clarity", cwd=tmp)
    assert human.returncode == 1 and "Annotate" in human.stdout


def test_a_dead_judge_endpoint_is_one_message_and_keeps_the_run(tmp_path: Path) -> None:
    run = _run(tmp_path, "sql", "--tasks", "1", "--agent-name", "reference")
    res = sharpen("judge", run, "--judge", "rubric:solved", "--base-url", "http://127.0.0.1:9/v1",
                  "--no-progress", cwd=tmp_path)
    assert res.returncode == 2
    assert "the judge model failed after its retries" in res.stderr and "--resume" in res.stderr
    assert "Traceback" not in res.stderr
    assert _store(tmp_path).judgements(run) == []


@pytest.mark.slow
def test_validate_judge_measures_against_the_verifier_and_reuses_what_is_stored(
        tmp_path: Path) -> None:
    args = ["validate-judge", "sql", "--judge", "rubric:solved", "--judge-arg",
            "token_budget=300", "--tasks", "2", "--pairs", "1", "--samples", "2",
            "--consistency-items", "2", "--json"]
    res = sharpen(*args, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout)
    by = {s["source"]: s for s in r["sources"]}
    assert by["reference"]["verifier_rate"] == 1.0 and by["null"]["verifier_rate"] == 0.0
    assert r["n"] + r["judge_errors"] == 6 and r["criterion"] == "solved"
    assert r["verifier"]["accuracy"]["n"] == r["n"] and r["consistency"]["repeats"] == 2
    assert r["flip"] is None or r["flip"]["n"] <= 1
    # a second call runs nothing and judges nothing new: the same numbers, no tokens
    again = json.loads(sharpen(*args[:-1], "--samples", "0", "--no-judge", "--json",
                               cwd=tmp_path).stdout)
    assert again["verifier"] == r["verifier"] and again["tokens"] == 0
    assert again["runs"] == r["runs"]
    table = sharpen(*args[:-1], "--samples", "0", "--no-judge", cwd=tmp_path)
    assert "Cohen's κ vs verifier" in table.stdout and "null agent" in table.stdout
