"""Fine-tuning exports (``sharpen.train.export``, ``sharpen export --format
sft|completion|preference|groups``)
from a real SQLite store: what is kept, what is paired, and what the lines hold."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import sharpen

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import UserError
from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.core.manifest import RunManifest
from sharpen.core.messages import Message, ToolCall
from sharpen.core.outcome import Outcome
from sharpen.core.registry import PluginRef
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Trajectory
from sharpen.store import Store
from sharpen.train import FeedbackCondition, Where, export
from sharpen.train.checkpoint import write_checkpoint

ENV = PluginRef(name="code", args={"source": "generated"})
RUN = "export-run"
# (task, epoch) -> outcome; task 2 has an errored and an unfinished attempt; in task 3's
# second attempt the agent never replied (it timed out, say).
OUTCOMES = {
    (0, 0): Outcome(success=True, reward=1.0), (0, 1): Outcome(success=False, reward=0.5),
    (0, 2): Outcome(success=False, reward=0.0), (0, 3): Outcome(success=True, reward=1.0),
    (1, 0): Outcome(success=False, reward=0.25), (1, 1): Outcome(success=False, reward=0.25),
    (2, 0): Outcome(success=True, reward=1.0), (2, 1): Outcome(success=False, error_kind="infra"),
    (2, 2): None, (3, 0): Outcome(success=True, reward=1.0), (3, 1): Outcome(success=False),
}


def _messages(task: int, epoch: int, native: bool) -> list[Message]:
    system = Message(role="system", content="You are careful." if task != 3 else "Be brief.")
    user = Message(role="user", content=f"Write f{task}.")
    if native:
        call = ToolCall(id=f"c{epoch}", name="submit", arguments={"code": f"def f{task}(): return {epoch}"})
        return [system, user, Message(role="assistant", content="", tool_calls=[call]),
                Message(role="tool", content="2/4 tests passed", tool_call_id=f"c{epoch}")]
    turns = [system, user]
    if (task, epoch) == (3, 1):
        return turns
    if (task, epoch) == (0, 0):  # two replies: the observation between them is context
        turns += [Message(role="assistant", content="I will think first."),
                  Message(role="user", content="No action found: reply with a code block.")]
    turns += [Message(role="assistant", content=f"submit(code='def f{task}(): return {epoch}')"),
              Message(role="user", content="2/4 tests passed")]
    return turns


def _turns(t: Trajectory) -> list[dict]:
    """The conversation up to the agent's last reply, as exported for training."""
    return [m.to_openai() for m in t.messages[:-1]]


def _feedback(tid: str, name: str, value, *, source="human", minutes=0, supersedes=None) -> Feedback:
    return Feedback(source=source, name=name, value=value, supersedes=supersedes,
                    created_at=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=minutes),
                    target=FeedbackTarget(kind="trajectory", run_id=RUN, trajectory_id=tid))


@pytest.fixture
def stored(tmp_path: Path) -> tuple[Store, dict[tuple[int, int], Trajectory]]:
    """One run in a real SQLite store: tasks 0–3 (3 from the train split, the others from
    test), several epochs, task 1 with native tool calls; human verdicts on task 0 (one of
    them edited) and a judge score on task 1."""
    store = Store(f"sqlite:///{tmp_path / 'sharpen.db'}")
    spec = AgentSpec(name="t")
    tasks = [TaskSpec(env="code", id=f"gen/t/{i}", seed=i, split="train" if i == 3 else "test")
             for i in range(4)]
    store.create_run(RunManifest(run_id=RUN, env=ENV, agent_hash=spec.hash(),
                                 task_ids=[t.id for t in tasks], epochs=4, seed=0, config_hash="h"),
                     spec, tasks)
    trajs = {}
    for (i, e), outcome in OUTCOMES.items():
        t = Trajectory(id=uuid.uuid4().hex, run_id=RUN, task=tasks[i], agent_hash=spec.hash(), epoch=e,
                       outcome=outcome, messages=_messages(i, e, native=i == 1))
        assert store.save_trajectory(t)
        trajs[i, e] = t
    good = _feedback(trajs[0, 0].id, "verdict", "good")
    store.add_feedback(good)
    store.add_feedback(_feedback(trajs[0, 3].id, "verdict", "good"))
    # An edit: task 0 epoch 1 was re-labelled "bad" later; the old "good" no longer counts.
    old = _feedback(trajs[0, 1].id, "verdict", "good")
    store.add_feedback(old)
    store.add_feedback(_feedback(trajs[0, 1].id, "verdict", "bad", minutes=5, supersedes=old.id))
    store.add_feedback(_feedback(trajs[1, 0].id, "helpfulness", 4, source="judge"))
    store.add_feedback(_feedback(trajs[1, 1].id, "helpfulness", 2, source="judge"))
    store.add_feedback(_feedback(trajs[2, 0].id, "flagged", True, source="safety"))
    return store, trajs


def _lines(store: Store, fmt: str, where: Where | None = None, **kw) -> tuple[list[dict], object]:
    lines, count = export(store, [RUN], fmt, where, **kw)
    return list(lines), count


def _ids(lines: list[dict]) -> set[str]:
    return {line["meta"]["trajectory_id"] for line in lines}


def test_sft_keeps_what_the_filter_says_and_the_stored_conversation(stored) -> None:
    store, trajs = stored
    lines, count = _lines(store, "sft", Where(success=True))
    wanted = {t.id for t in trajs.values() if t.outcome and t.outcome.success}
    assert _ids(lines) == wanted and (count.read, count.kept, count.written) == (11, 4, 4)
    assert count.kept_test == 3  # every success but task 3's is on a test-split task
    train, count = _lines(store, "sft", Where(success=True, split="train"))
    assert _ids(train) == {trajs[3, 0].id} and count.kept_test == 0
    for line in lines:
        t = next(t for t in trajs.values() if t.id == line["meta"]["trajectory_id"])
        assert line["messages"] == _turns(t)  # the final verdict is not a training target
        assert "tools" not in line  # text protocol: the tools are in the prompt already
    failures, _ = _lines(store, "sft", Where(success=False))
    tool_lines = [line for line in failures if line["meta"]["task"] == trajs[1, 0].task.hash()]
    assert len(tool_lines) == 2 and all(line["tools"][0]["function"]["name"] == "submit"
                                        for line in tool_lines)
    # No filter: every finished attempt of the agent with a reply; not the infra error, the
    # unfinished attempt, nor the one without a reply.
    everything, count = _lines(store, "sft")
    assert _ids(everything) == {t.id for k, t in trajs.items()
                                if t.outcome and t.outcome.counts and k != (3, 1)}
    assert count.kept == 8
    with_errors, _ = _lines(store, "sft", Where(include_errors=True))
    assert len(with_errors) == 9  # the infra error is in; an attempt without outcome never is


def test_completion_gives_each_reply_with_the_conversation_before_it(stored) -> None:
    store, trajs = stored
    lines, count = _lines(store, "completion", Where(success=True))
    # Four successes; task 0's first attempt replied twice (a reply, an observation, a reply).
    assert (count.kept, count.written, count.unit) == (4, 5, "examples")
    first = trajs[0, 0]
    mine = [line for line in lines if line["meta"]["trajectory_id"] == first.id]
    turns = _turns(first)
    assert [line["meta"]["reply"] for line in mine] == [0, 1]
    assert mine[0]["prompt"] == turns[:2] and mine[0]["completion"] == [turns[2]]
    assert mine[1]["prompt"] == turns[:4] and mine[1]["completion"] == [turns[4]]  # no verdict after it
    assert all(line["completion"][0]["role"] == "assistant" and "tools" not in line for line in lines)
    tool_lines, _ = _lines(store, "completion", Where(success=False, min_reward=0.25))
    native = [line for line in tool_lines if line["meta"]["task"] == trajs[1, 0].task.hash()]
    assert len(native) == 2 and all(line["completion"][0]["tool_calls"] and line["tools"] for line in native)


def test_jsonl_still_dumps_every_trajectory_by_default(stored) -> None:
    store, trajs = stored
    lines, count = _lines(store, "jsonl")
    assert {line["trajectory_id"] for line in lines} == {t.id for t in trajs.values()}
    assert count.written == 11
    line = next(x for x in lines if x["trajectory_id"] == trajs[0, 1].id)
    assert [f["value"] for f in line["feedback"]] == ["good", "bad"]  # history included
    assert line["tools"][0]["function"]["name"] == "submit"
    only_good, _ = _lines(store, "jsonl", Where(feedback=[FeedbackCondition.parse("verdict=good")]))
    assert {x["trajectory_id"] for x in only_good} == {trajs[0, 0].id, trajs[0, 3].id}


@pytest.mark.parametrize(("condition", "kept"), [
    ("human:verdict=good", {(0, 0), (0, 3)}),       # the edited label counts as "bad"
    ("verdict!=good", {(0, 1)}),
    ("judge:helpfulness>=4", {(1, 0)}),
    ("helpfulness<4", {(1, 1)}),
    ("human:helpfulness>=0", set()),                # wrong source
    ("safety:flagged", {(2, 0)}),
    ("flagged=false", set()),
    ("verdict>good", set()),                        # no order between labels
])
def test_feedback_conditions(stored, condition: str, kept: set) -> None:
    store, trajs = stored
    lines, _ = _lines(store, "sft", Where(feedback=[FeedbackCondition.parse(condition)]))
    assert _ids(lines) == {trajs[k].id for k in kept}


def test_a_feedback_condition_that_cannot_be_read_names_the_syntax() -> None:
    with pytest.raises(UserError) as err:
        FeedbackCondition.parse("judge:>=4")
    assert "[source:]name[op value]" in err.value.fix
    assert str(FeedbackCondition.parse(" judge:helpfulness >= 4 ")) == "judge:helpfulness>=4"
    with pytest.raises(UserError, match="unknown feedback source 'humna'") as err:
        FeedbackCondition.parse("humna:verdict=good")  # a typo would otherwise keep nothing
    assert "simulated_user" in err.value.fix


def test_preference_pairs_share_the_prompt_and_prefer_the_better_attempt(stored) -> None:
    store, trajs = stored
    pairs, count = _lines(store, "preference")
    by_id = {t.id: t for t in trajs.values()}
    # Task 0: best (a success) against worst (reward 0); task 1: equal rewards, no pair;
    # task 2: one kept attempt; task 3: one attempt.
    assert count.written == 1 == len(pairs)
    [pair] = pairs
    chosen, rejected = (by_id[pair["meta"][k]["trajectory_id"]] for k in ("chosen", "rejected"))
    assert chosen.outcome.success and rejected.outcome.reward == 0.0 and chosen.task == rejected.task
    assert pair["prompt"] == [m.to_openai() for m in chosen.messages[:2]] == \
        [m.to_openai() for m in rejected.messages[:2]]
    assert pair["chosen"] == _turns(chosen)[2:] and pair["rejected"] == _turns(rejected)[2:]
    two, _ = _lines(store, "preference", pairs_per_prompt=2)
    # The second pair of task 0: the other success against the reward-0.5 failure.
    assert len(two) == 2
    second = two[1]["meta"]
    assert second["chosen"]["success"] and second["rejected"]["reward"] == 0.5
    assert {two[0]["meta"]["chosen"]["trajectory_id"], second["chosen"]["trajectory_id"]} == \
        {trajs[0, 0].id, trajs[0, 3].id}


def test_groups_carry_normalised_advantages(stored) -> None:
    store, trajs = stored
    groups, count = _lines(store, "groups")
    assert count.written == 2  # task 0 (four attempts) and task 1 (two); the rest are single
    g0, g1 = groups
    assert sorted(g0["rewards"]) == [0.0, 0.5, 1.0, 1.0]
    assert abs(sum(g0["advantages"])) < 1e-9
    assert abs(sum(a * a for a in g0["advantages"]) / 4 - 1.0) < 1e-9
    for completion, reward, meta in zip(g0["completions"], g0["rewards"], g0["meta"], strict=True):
        t = next(t for t in trajs.values() if t.id == meta["trajectory_id"])
        assert completion == _turns(t)[2:] and reward == t.outcome.reward
    assert g1["rewards"] == [0.25, 0.25] and g1["advantages"] == [0.0, 0.0]


def test_a_run_named_twice_is_read_once(stored) -> None:
    store, trajs = stored
    lines, count = export(store, [RUN, "latest", RUN[:6]], "jsonl")
    assert len(list(lines)) == len(trajs) and count.runs == [RUN]


def test_unknown_format_and_bad_pair_count_are_user_errors(stored) -> None:
    store, _ = stored
    with pytest.raises(UserError, match="unknown export format"):
        export(store, [RUN], "csv")
    with pytest.raises(UserError, match="at least 1"):
        export(store, [RUN], "preference", pairs_per_prompt=0)
    with pytest.raises(UserError, match="unknown split 'tset'"):
        Where(split="tset")


def test_cli_export_filters_and_says_what_it_kept(stored, tmp_path: Path) -> None:
    store, trajs = stored
    env = {"SHARPEN_STORE": store.url}
    out = tmp_path / "sft.jsonl"
    res = sharpen("export", RUN, "--format", "sft", "--success", "--feedback", "human:verdict=good",
                  "-o", str(out), cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert {x["meta"]["trajectory_id"] for x in lines} == {trajs[0, 0].id, trajs[0, 3].id}
    assert "wrote 2 examples from 2 of 11 trajectories (success, human:verdict=good)" in res.stderr
    assert "warning: 2 of the 2 kept trajectories are on test-split tasks" in res.stderr
    train = sharpen("export", RUN, "--format", "sft", "--success", "--split", "train", cwd=tmp_path, env=env)
    assert train.returncode == 0 and "(success, train split)" in train.stderr
    assert "warning" not in train.stderr and len(train.stdout.splitlines()) == 1
    assert sharpen("export", RUN, "--split", "tset", cwd=tmp_path, env=env).returncode == 2
    none = sharpen("export", RUN, "--format", "preference", "--success", cwd=tmp_path, env=env)
    assert none.returncode == 0 and none.stdout == ""
    assert "wrote 0 pairs" in none.stderr and "--epochs 2" in none.stderr
    bad = sharpen("export", RUN, "--format", "sft", "--feedback", "judge:>=4", cwd=tmp_path, env=env)
    assert bad.returncode == 2 and "[source:]name[op value]" in bad.stderr
    assert "Traceback" not in bad.stderr


@pytest.mark.slow
def test_exports_fine_tune_the_embedded_model_with_trl(stored, tmp_path: Path) -> None:
    """The documented recipe, for real: `sharpen checkpoint` writes the embedded model as a
    Hugging Face checkpoint that computes what llama.cpp computes, TRL's SFT and DPO trainers
    take the exported files as they are, and `sharpen gguf` hands the trained weights back to
    llama.cpp."""
    import numpy as np
    import torch
    from datasets import load_dataset
    from llama_cpp import Llama
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer

    from sharpen.models.local import gguf_path

    ckpt = tmp_path / "smollm2"
    res = sharpen("checkpoint", str(ckpt), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    with pytest.raises(UserError, match="not an empty folder"):
        write_checkpoint(ckpt)  # nothing is overwritten
    tokenizer = AutoTokenizer.from_pretrained(ckpt)
    model = AutoModelForCausalLM.from_pretrained(ckpt)

    # Same tokens and the same next-token scores as the embedded model under llama.cpp.
    llama = Llama(model_path=str(gguf_path()), n_ctx=512, logits_all=True, verbose=False)
    try:
        assert tokenizer.chat_template == llama.metadata["tokenizer.chat_template"]
        for question in ("Write a Python function that adds two numbers.", "List three colors."):
            text = tokenizer.apply_chat_template([{"role": "user", "content": question}],
                                                 add_generation_prompt=True, tokenize=False)
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            assert ids == llama.tokenize(text.encode(), add_bos=False, special=True)
            llama.reset()
            llama.eval(ids)
            theirs = np.array(llama.scores[len(ids) - 1])
            with torch.no_grad():
                ours = model(torch.tensor([ids])).logits[0, -1].numpy()
            assert np.corrcoef(theirs, ours)[0, 1] > 0.99
            assert int(ours.argmax()) in np.argsort(-theirs)[:3]
    finally:
        llama.close()

    store, _ = stored
    sft_file, pref_file, reply_file = (tmp_path / f"{name}.jsonl" for name in ("sft", "pref", "reply"))
    for fmt, path in (("sft", sft_file), ("preference", pref_file), ("completion", reply_file)):
        lines, _ = export(store, [RUN], fmt)
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))

    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "Write f0."}],
                                           add_generation_prompt=True, tokenize=False)
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]

    def next_token_scores(m) -> np.ndarray:
        with torch.no_grad():
            return m(torch.tensor([ids])).logits[0, -1].numpy()

    untrained = next_token_scores(model)
    common = {"max_steps": 2, "per_device_train_batch_size": 2, "report_to": [], "save_strategy": "no",
              "use_cpu": True, "bf16": False, "logging_steps": 1}  # as the docs say
    sft = SFTTrainer(model=model,
                     args=SFTConfig(output_dir=str(tmp_path / "sft"), learning_rate=1e-4, **common),
                     train_dataset=load_dataset("json", data_files=str(sft_file), split="train"),
                     processing_class=tokenizer)
    sft.train()
    losses = [h["loss"] for h in sft.state.log_history if "loss" in h]
    assert len(losses) == 2 and all(np.isfinite(losses))
    trained = next_token_scores(model)
    assert np.abs(trained - untrained).max() > 1e-2  # the weights moved

    # `completion` lines: TRL scores the reply and nothing of the prompt.
    on_replies = SFTTrainer(model=model, args=SFTConfig(output_dir=str(tmp_path / "reply"), **common),
                            train_dataset=load_dataset("json", data_files=str(reply_file), split="train"),
                            processing_class=tokenizer)
    assert on_replies.completion_only_loss
    row, first = on_replies.train_dataset[0], json.loads(reply_file.read_text().splitlines()[0])
    scored = tokenizer.decode([t for t in row["labels"] if t != -100])  # what the loss is taken on
    assert scored == first["completion"][0]["content"] + "<|im_end|>\n"  # the reply and its end, no more

    # Back to GGUF: the embedded runner computes what the trained checkpoint computes.
    sft.save_model(str(tmp_path / "trained"))
    gguf_file = tmp_path / "trained.gguf"
    res = sharpen("gguf", str(tmp_path / "trained"), str(gguf_file), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "model_path=" in res.stderr
    runner = Llama(model_path=str(gguf_file), n_ctx=512, logits_all=True, verbose=False)
    try:
        assert runner.tokenize(prompt.encode(), add_bos=False, special=True) == ids
        runner.eval(ids)
        served = np.array(runner.scores[len(ids) - 1])
    finally:
        runner.close()
    assert int(served.argmax()) == int(trained.argmax())
    assert np.abs(served - trained).max() < np.abs(trained - untrained).max() / 10

    dpo = DPOTrainer(model=AutoModelForCausalLM.from_pretrained(ckpt),
                     args=DPOConfig(output_dir=str(tmp_path / "dpo"), **{**common, "max_steps": 1}),
                     train_dataset=load_dataset("json", data_files=str(pref_file), split="train"),
                     processing_class=tokenizer)
    dpo.train()
    [logged] = [h for h in dpo.state.log_history if "loss" in h]
    # Step one: the policy is its own reference, so the DPO loss is log 2 on any pair.
    assert logged["loss"] == pytest.approx(np.log(2), abs=1e-3) and "rewards/margins" in logged


RUN_B = "export-run-b"


def _verdict(store: Store, t: Trajectory, other: Trajectory, value: float, name: str = "better") -> None:
    """A pairwise judge's verdict on ``t`` against ``other``, stored as ``judge_run`` does."""
    from sharpen.core.judgement import Judgement
    from sharpen.judges.runner import judge_author

    j = Judgement(run_id=t.run_id, trajectory_id=t.id, versus=other.id, judge="pairwise",
                  judge_hash=uuid.uuid4().hex, model="SmolLM2", status="ok")
    fb = Feedback(source="judge", name=name, value=value, author=judge_author(j), call_id=j.id,
                  versus=other.id, target=FeedbackTarget(kind="trajectory", run_id=t.run_id,
                                                         trajectory_id=t.id))
    assert store.save_judgement(j, [fb])


@pytest.fixture
def judged_pairs(stored) -> tuple[Store, dict[tuple[int, int], Trajectory], dict[int, Trajectory]]:
    """``stored`` plus run B on tasks 0–3 (one epoch, the same prompts), judged pairwise
    against run A's epoch 0: B wins task 0 (verdict on A), ties task 1, wins task 3 (one
    verdict on each side, two criteria), and task 2's B attempt errored (not kept)."""
    store, trajs = stored
    spec = AgentSpec(name="b", instructions="other")
    tasks = [trajs[i, 0].task for i in range(4)]
    store.create_run(RunManifest(run_id=RUN_B, env=ENV, agent_hash=spec.hash(),
                                 task_ids=[t.id for t in tasks], epochs=1, seed=0, config_hash="hb"),
                     spec, tasks)
    b = {}
    for i, task in enumerate(tasks):
        outcome = Outcome(success=False, error_kind="infra") if i == 2 else Outcome(success=False)
        b[i] = Trajectory(id=uuid.uuid4().hex, run_id=RUN_B, task=task, agent_hash=spec.hash(),
                          epoch=0, outcome=outcome, messages=_messages(i, 9, native=i == 1))
        assert store.save_trajectory(b[i])
    _verdict(store, trajs[0, 0], b[0], 0.0)
    _verdict(store, trajs[1, 0], b[1], 0.5)
    _verdict(store, trajs[2, 0], b[2], 1.0)
    _verdict(store, b[3], trajs[3, 0], 1.0)
    _verdict(store, trajs[3, 0], b[3], 0.0, name="concise")
    return store, trajs, b


def test_judge_preference_pairs_follow_pairwise_verdicts(judged_pairs) -> None:
    store, trajs, b = judged_pairs
    lines, count = export(store, [RUN, RUN_B], "preference", preference="judge")
    pairs = list(lines)
    # The verifier would prefer A's successes; the judge preferred B on tasks 0 and 3.
    assert [(p["meta"]["chosen"]["trajectory_id"], p["meta"]["rejected"]["trajectory_id"])
            for p in pairs] == [(b[0].id, trajs[0, 0].id), (b[3].id, trajs[3, 0].id)]
    assert [p["meta"]["judge"] for p in pairs] == [{"share": 1.0, "verdicts": 1},
                                                   {"share": 1.0, "verdicts": 2}]
    first = pairs[0]
    assert first["prompt"] == [m.to_openai() for m in b[0].messages[:2]]
    assert first["chosen"] == _turns(b[0])[2:] and first["rejected"] == _turns(trajs[0, 0])[2:]
    # Task 1 is a tie; task 2's B attempt errored, so it is not kept and its verdict has no pair.
    assert (count.ties, count.unpaired, count.written) == (1, 1, 2)
    # Only run A named: every decisive verdict lacks its other side.
    alone, count_a = export(store, [RUN], "preference", preference="judge")
    assert list(alone) == [] and (count_a.ties, count_a.unpaired) == (1, 3)
    # The default still pairs on the verifier's score: on task 0, A's success over B.
    verifier = list(export(store, [RUN, RUN_B], "preference")[0])
    task0 = next(p["meta"] for p in verifier if p["meta"]["chosen"]["task"] == trajs[0, 0].task.hash())
    assert task0["chosen"]["run_id"] == RUN and task0["chosen"]["success"]
    with pytest.raises(UserError, match="unknown preference source 'judges'"):
        export(store, [RUN], "preference", preference="judges")


def test_cli_export_judge_pairs(judged_pairs, tmp_path: Path) -> None:
    store, _, b = judged_pairs
    env = {"SHARPEN_STORE": store.url}
    res = sharpen("export", RUN, RUN_B, "-f", "preference", "--pairs", "judge", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    lines = [json.loads(x) for x in res.stdout.splitlines()]
    assert [x["meta"]["chosen"]["trajectory_id"] for x in lines] == [b[0].id, b[3].id]
    assert "wrote 2 pairs" in res.stderr and "left out 1 tied pair(s) and 1 whose other" in res.stderr
