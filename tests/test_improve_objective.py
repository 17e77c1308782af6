"""``sharpen improve --objective judge:...``: the engine selects, accepts and reports by a
judge's score instead of success, and reports success beside it.

The parts written for the test are plug-ins in a test Registry: ``brevity``, a model-free
judge that scores an episode by a deterministic rule (an answer of at most 10 characters is
``brief``; it fails on the tasks named in ``fail_on``, error kind ``judge``), so the objective
disagrees with success; ``downgrade``, a proposer that swaps the reference solver for the
null agent (worse on success, better on brevity); ``mute``, the judge's model, which the
judge never calls; ``grader``, a scripted judge model that answers the shipped ``rubric``
judge's prompt by a rule on the transcript (an empty submission is clear and warm), so that a
rubric with a range and a label scale runs through the real rubric judge, its prompt and its
reply parsing. Rollouts are real: the code environment runs every submission in the sandbox,
the runner stores every episode, and judge_run stores every judgement.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import sharpen
from fastapi.testclient import TestClient
from rich.console import Console

import sharpen as sharpen_api
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import UserError
from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.core.hashing import content_hash
from sharpen.core.messages import Message, Usage
from sharpen.core.registry import PluginRef, Registry
from sharpen.core.trajectory import Trajectory
from sharpen.improvement.budget import Budget
from sharpen.improvement.candidate import Archive, Candidate
from sharpen.improvement.engine import EngineConfig
from sharpen.improvement.evaluate import EvalRecord
from sharpen.improvement.experiment import Experiment, ExperimentConfig, split_tasks
from sharpen.improvement.folder import experiments_base
from sharpen.improvement.models import SharedModels
from sharpen.improvement.objective import ObjectiveSpec, parse_objective, scaled
from sharpen.improvement.proposal import BaseProposer, NothingToPropose, Proposal, ProposalContext
from sharpen.improvement.report import render, verdict_line
from sharpen.judges.base import BaseJudge, JudgeError
from sharpen.judges.rubric import Criterion
from sharpen.judges.runner import JudgeSetup
from sharpen.models.base import ChatModel, Completion
from sharpen.store import Store
from sharpen.viewer import create_app

ENV = PluginRef(name="code", args={"source": "generated", "max_submissions": 1})
REFERENCE = AgentSpec(name="reference", agent=PluginRef(name="reference"),
                      model=PluginRef(name="mute"), params={}, components={})


class Brevity(BaseJudge):
    """``brief``: true when the agent's submitted arguments total at most 10 characters."""

    prompt = "brevity: at most 10 characters of arguments"

    def __init__(self, fail_on: list[str] | None = None) -> None:
        self.fail_on = set(fail_on or [])

    async def judge(self, trajectory: Trajectory, model: ChatModel) -> list[Feedback]:
        if trajectory.task.id in self.fail_on:
            raise JudgeError(f"no verdict on {trajectory.task.id}")
        chars = sum(len(str(v)) for s in trajectory.steps if s.action
                    for v in s.action.arguments.values())
        return [Feedback(source="judge", name="brief", value=chars <= 10,
                         target=FeedbackTarget(kind="trajectory", run_id=trajectory.run_id,
                                               trajectory_id=trajectory.id))]


class Mute:
    """A judge model that must not be called (the brevity judge reads no model)."""

    name = "mute"
    supports_tools = False

    async def complete(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the brevity judge called its model")

    async def aclose(self) -> None:
        return None


class Grader:
    """Answers a rubric judge's prompt: clarity 5 and tone warm for an empty submission, else
    clarity 2 and tone curt (it reads only the transcript the judge shows it)."""

    name = "grader"
    supports_tools = False

    async def complete(self, messages: list[Message], tools: Any = None, params: Any = None,
                       **_: Any) -> Completion:
        brief = 'submit({"code": ""})' in (messages[1].content or "")
        reply = {"clarity": {"explanation": "[S0] the submission.", "value": 5 if brief else 2},
                 "tone": {"explanation": "[S0] the submission.",
                          "value": "warm" if brief else "curt"}}
        return Completion(message=Message(role="assistant", content=json.dumps(reply)))

    async def aclose(self) -> None:
        return None


class Downgrade(BaseProposer):
    """Proposes the null agent, once per parent."""

    async def propose(self, ctx: ProposalContext) -> Proposal:
        child = ctx.parent.spec.model_copy(update={"agent": PluginRef(name="null"), "parents": []})
        if ctx.parent.spec.agent.name == "null" or child.model_copy(
                update={"parents": [ctx.parent.hash]}).hash() in ctx.tried:
            raise NothingToPropose("nothing left to downgrade")
        return Proposal(spec=child, change="use the null agent")


def _registry() -> Registry:
    reg = Registry()
    reg.register("proposer", "downgrade")(Downgrade)
    reg.register("judge", "brevity")(Brevity)
    reg.register("model", "mute")(Mute)
    reg.register("model", "grader")(Grader)
    return reg


def _config(objective: ObjectiveSpec) -> ExperimentConfig:
    return ExperimentConfig(env=ENV, seed_spec=REFERENCE, proposer=PluginRef(name="downgrade"),
                            train=6, val=4, test=12, objective=objective,
                            engine=EngineConfig(budget=Budget(rollouts=20), minibatch=3,
                                                max_iterations=10))


async def test_a_judge_objective_selects_what_it_scores_and_reports_success_beside_it(tmp_path: Path):
    reg = _registry()
    probe = split_tasks(ENV, _config(ObjectiveSpec()), reg)
    failing = [probe["val"][0].id, probe["test"][0].id]  # one judge error on val, one on test
    assert parse_objective("judge:brevity", seed_model=REFERENCE.model, registry=reg) == \
        ObjectiveSpec(judge=JudgeSetup(judge=PluginRef(name="brevity"), model=REFERENCE.model))
    config = _config(ObjectiveSpec(judge=JudgeSetup(
        judge=PluginRef(name="brevity", args={"fail_on": failing}), model=REFERENCE.model)))
    store = Store(f"sqlite:///{tmp_path}/s.db")
    folder = experiments_base(store.url) / config.experiment_id()  # where the viewer looks
    result = await Experiment(config, store, folder, models=SharedModels(reg), registry=reg).run()
    r = result.results[0]
    # The null child scores higher on brevity and wins, though it solves nothing.
    assert [e.proposer for e in r.lineage] == ["seed", "downgrade"]
    assert r.winner.agent.name == "null" and r.objective == "judge:brevity"
    assert result.baseline_test_score == 0.0 and r.test_score == 1.0
    assert result.baseline_test_success == 1.0 and r.test_success == 0.0
    # Held-out: the objective's gain on the 11 tasks both were scored on, and success's loss.
    oc = r.objective_comparison
    assert oc is not None and oc.matched_tasks == 11 and oc.difference == 1.0
    assert oc.method == "mcnemar-exact" and oc.p_value < 0.01
    assert r.comparison.significant and r.comparison.direction == "worse"
    assert r.test_judge_errors == 1 and result.baseline_judge_errors == 1
    assert r.account.judge_errors == 2  # the failing val task, by the seed and by the child
    line = verdict_line(r)
    assert line.startswith("held-out gain on judge:brevity: downgrade is better by 100.0 points")
    assert "(11 tasks scored in both)" in line and "; success: held-out loss: downgrade is worse" in line
    console = Console(record=True, width=240)
    render(result, console)
    text = console.export_text()
    assert "on the objective judge:brevity, success beside it" in text and "test success" in text
    assert "(excluded from every comparison): train/val downgrade 2; test seed 1, downgrade " \
        "winner 1" in text
    # Stored as `sharpen judge` stores: a judgement per judged trajectory, the failed one
    # with status error, and the judge's feedback on the trajectories.
    judgements = store.judgements(r.test_run)
    assert len(judgements) == 12 and sum(j.status == "error" for j in judgements) == 1
    failed = next(j for j in judgements if j.status == "error")
    assert failed.error == f"no verdict on {failing[1]}"
    briefs = [fb for t in store.iter_trajectories(r.test_run, with_steps=False)
              for fb in t.feedback if fb.source == "judge"]
    assert len(briefs) == 11 and all(fb.name == "brief" and fb.value is True for fb in briefs)
    assert all(fb.call_id for fb in briefs)
    # The viewer's experiment page: the objective's difference in the table, success beside it.
    page = TestClient(create_app(store)).get(f"/improve/{result.experiment_id}").text
    shown = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))
    assert "Objective judge:brevity : val, test and the difference above are the judge's score" in shown
    assert "+100.0 [+100.0, +100.0]" in shown
    assert "seed 100.0%, downgrade winner 0.0% (difference -100.0 [-100.0, -65.7]" in shown
    assert "test seed 1, downgrade winner 1, downgrade train/val 2." in shown
    assert verdict_line(r) in shown

    # On success the same experiment keeps the seed: it solves every minibatch, so there is
    # nothing for a child to beat and no proposal is asked for.
    plain = await Experiment(_config(ObjectiveSpec()), Store(f"sqlite:///{tmp_path}/p.db"),
                             tmp_path / "p", models=SharedModels(reg), registry=reg).run()
    p = plain.results[0]
    assert [e.proposer for e in p.lineage] == ["seed"]
    assert p.account.proposals == 0 and p.account.skipped >= 1 and p.account.judge_errors == 0
    assert p.objective_comparison is None and p.test_score == p.test_success == 1.0
    assert verdict_line(p).startswith("no detectable gain on held-out tasks")


def test_scores_are_scaled_to_the_unit_interval():
    assert scaled(4, Criterion(name="c", description="d", scale="1-5")) == 0.75
    assert scaled("ok", Criterion(name="c", description="d", scale=["bad", "ok", "good"])) == 0.5
    assert scaled(True, Criterion(name="c", description="d", scale="bool")) == 1.0
    assert scaled(7, Criterion(name="c", description="d", scale="1-5")) is None  # off the scale
    assert scaled(0.25, None) == 0.25 and scaled(False, None) == 0.0
    assert scaled(3, None) is None and scaled("good", None) is None  # no declared scale


def test_objectives_parse_and_fail_before_any_rollout():
    model = PluginRef(name="local")
    assert parse_objective("success", seed_model=model).is_success
    solved = parse_objective("judge:rubric:solved:solved", seed_model=model)
    assert solved.criterion == "solved" and solved.label() == "judge:rubric:solved:solved"
    assert solved.judge is not None and solved.judge.model == model
    with pytest.raises(UserError, match="no criterion 'nope'"):
        parse_objective("judge:rubric:solved:nope", seed_model=model)
    with pytest.raises(UserError, match="pairwise"):
        parse_objective("judge:pairwise", seed_model=model)
    with pytest.raises(UserError, match="unknown objective"):
        parse_objective("reward", seed_model=model)
    # The default objective leaves the experiment id as it was; a judge changes it.
    plain = _config(ObjectiveSpec())
    before = content_hash(plain.model_dump(mode="json", exclude={"objective"}))[:12]
    assert plain.experiment_id() == before != _config(solved).experiment_id()


def test_the_cli_refuses_an_unknown_objective(tmp_path: Path):
    out = sharpen("improve", "code", "--objective", "reward", "--store",
                  f"sqlite:///{tmp_path}/s.db", cwd=tmp_path)
    assert out.returncode != 0 and "unknown objective 'reward'" in out.stderr


def test_the_python_api_takes_an_objective(tmp_path: Path):
    result = sharpen_api.improve(
        "code", env_args=ENV.args, agent=REFERENCE, proposer="downgrade", train=6, val=4, test=4,
        budget_rollouts=20, minibatch=3, objective="judge:brevity",
        store=f"sqlite:///{tmp_path}/s.db", folder=tmp_path / "improve", registry=_registry())
    r = result.results[0]
    assert r.objective == "judge:brevity" and r.winner.agent.name == "null"
    assert r.objective_comparison is not None and r.objective_comparison.difference == 1.0
    assert r.test_success == 0.0 and result.baseline_test_success == 1.0


def test_unscored_tasks_are_left_out_and_old_records_read_their_success():
    old = EvalRecord.model_validate({"run_id": "r", "trajectory_id": "t", "success": True,
                                     "usage": {}})
    assert old.score == 1.0  # a checkpoint from before objectives resumes as success
    assert EvalRecord(run_id="r", trajectory_id="t", success=True, usage=Usage(),
                      score=None).score is None
    # b's judge failed on t1: b is compared on t2 alone. Read as a 0, that judge error would
    # have tied b with a on t1 (a lead for b) and made b dominate a: front {b: 2}.
    a = Candidate(spec=REFERENCE, hash="a", proposer="seed", val={"t1": 0.0, "t2": 0.0})
    b = Candidate(spec=REFERENCE, hash="b", proposer="p", iteration=1, val={"t2": 0.5})
    assert b.val_score == 0.5
    assert Archive(candidates=[a, b]).front() == {"a": 1, "b": 1}


RUBRIC = """name: style
criteria:
  - name: clarity
    description: The answer is easy to follow.
    scale: 1-5
  - name: tone
    description: How the agent speaks.
    scale: [curt, neutral, warm]
"""


async def test_a_rubric_objective_scales_each_criterion_and_stores_its_judgements(tmp_path: Path):
    reg = _registry()
    rubric = tmp_path / "style.yaml"
    rubric.write_text(RUBRIC)
    objective = parse_objective(f"judge:{rubric}", seed_model=REFERENCE.model,
                                judge_model=PluginRef(name="grader"), registry=reg)
    assert objective.label() == "judge:rubric:style"
    config = _config(objective).model_copy(update={"test": 6})
    store = Store(f"sqlite:///{tmp_path}/s.db")
    result = await Experiment(config, store, tmp_path / "x", models=SharedModels(reg),
                              registry=reg).run()
    r = result.results[0]
    # The seed: clarity 2 of 1-5 (0.25) and tone curt (0), mean 0.125; the null child: 1.
    assert result.baseline_test_score == 0.125 and r.test_score == 1.0
    assert r.winner.agent.name == "null" and r.lineage[1].val_score == 1.0
    oc = r.objective_comparison
    assert oc is not None and oc.difference == 0.875 and oc.method == "wilcoxon-pratt"
    assert oc.p_value < 0.05 and r.comparison.direction == "worse"
    judged = store.judgements(result.baseline_run, calls=True)
    assert len(judged) == 6 and all(j.status == "ok" and j.judge == "rubric:style" for j in judged)
    assert "clarity: The answer is easy to follow." in judged[0].calls[0].messages[1].content
    values = {(fb.name, fb.value) for t in store.iter_trajectories(result.baseline_run,
                                                                    with_steps=False)
              for fb in t.feedback if fb.source == "judge"}
    assert values == {("clarity", 2), ("tone", "curt")}
    # One criterion alone: clarity, 0.25 for the seed.
    one = parse_objective(f"judge:{rubric}:clarity", seed_model=REFERENCE.model,
                          judge_model=PluginRef(name="grader"), registry=reg)
    again = await Experiment(_config(one).model_copy(update={"test": 6}), store, tmp_path / "y",
                             models=SharedModels(reg), registry=reg).run()
    assert again.baseline_test_score == 0.25 and again.results[0].test_score == 1.0
