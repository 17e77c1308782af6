"""Fixture records: small, realistic runs of the ``code`` environment written through the
real Store API (``create_run`` + ``save_trajectory``), for the viewer's tests, screenshots
and a quick look (``python -m sharpen.viewer.demo sqlite:///demo.db``).

They are fabricated — no model ran — and say so: every agent spec is named ``fixture-…``.
"""

from __future__ import annotations

import json
import random
import sys
import uuid
from datetime import UTC, datetime, timedelta

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.core.hashing import content_hash
from sharpen.core.judgement import JudgeCall, Judgement
from sharpen.core.manifest import RunManifest
from sharpen.core.messages import Message, ToolCall, Usage
from sharpen.core.outcome import ErrorKind, Outcome
from sharpen.core.registry import PluginRef
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action, Step, Trajectory
from sharpen.store.store import Store

SYSTEM = "You are a careful programmer. Solve the task. Call submit(code) with your answer."
FUNCS = [
    ("add_digits", "Return the sum of the decimal digits of n.", "easy"),
    ("reverse_words", "Return the words of s in reverse order, joined by one space.", "easy"),
    ("running_max", "Return the list of running maxima of xs.", "medium"),
    ("rle", "Run-length encode s as a list of (char, count) pairs.", "medium"),
    ("balanced", "Return True when the brackets ()[]{} in s are balanced.", "hard"),
    ("kth_prime", "Return the k-th prime number (1-based).", "hard"),
]
SCRIPT_PAYLOAD = (
    "Here is my answer <script>window.__pwned = 1; document.title = 'pwned'</script> "
    "and <img src=x onerror=\"window.__pwned = 2; document.title = 'pwned'\"> "
    "<a href=\"javascript:window.__pwned=3\" onclick=\"window.__pwned=4\">click</a> "
    "<svg onload=\"window.__pwned=5\"></svg>"
)
"""Model output that would run script if the viewer rendered it as HTML."""


def fixture_tasks() -> list[TaskSpec]:
    """Six generated-looking code tasks with difficulty labels."""
    return [TaskSpec(env="code", id=f"fixture/{name}", seed=i, knobs={"difficulty": diff},
                     split="test", metadata={"difficulty": diff, "prompt": doc})
            for i, (name, doc, diff) in enumerate(FUNCS)]


def fixture_spec(name: str, temperature: float, parents: list[str] | None = None) -> AgentSpec:
    """An agent spec named ``fixture-<name>``."""
    return AgentSpec(name=f"fixture-{name}", model=PluginRef(name="local"),
                     params={"temperature": temperature, "max_tokens": 384},
                     parents=parents or [])


def make_trajectory(run_id: str, task: TaskSpec, spec: AgentSpec, epoch: int, solved: bool,
                    rng: random.Random, *, n_steps: int = 2, error_kind: ErrorKind | None = None,
                    reply: str | None = None, start: datetime | None = None) -> Trajectory:
    """One realistic episode: prompt, ``n_steps`` submit calls with test reports, execution
    feedback on each step, and the outcome."""
    tid = uuid.uuid4().hex
    name = task.id.split("/")[-1]
    prompt = [Message(role="system", content=SYSTEM),
              Message(role="user", content=f"def {name}(x):\n    \"\"\"{task.metadata['prompt']}\"\"\"\n")]
    messages = list(prompt)
    steps: list[Step] = []
    feedback: list[Feedback] = []
    t0 = start or datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
    total = Usage()
    for i in range(n_steps):
        last = i == n_steps - 1
        passed = solved and last
        code = f"def {name}(x):\n    # attempt {i + 1}\n    return {'sorted(x)' if passed else 'x'}\n"
        text = f"Attempt {i + 1}: I will submit this.\n```python\n{code}```"
        if reply is not None and i == 0:
            text = reply
        call = ToolCall(id=f"call_{i}", name="submit", arguments={"code": code})
        n_pass = 5 if passed else rng.randint(0, 4)
        report = (f"{n_pass}/5 tests passed." + ("" if passed else
                  f"\nFAILED test_{rng.randint(1, 5)}: assert {name}(3) == 6, got 3"))
        step_msgs = [Message(role="assistant", content=text, tool_calls=[call]),
                     Message(role="tool", content=report, tool_call_id=call.id)]
        usage = Usage(input_tokens=180 + 60 * i, output_tokens=40 + rng.randint(0, 30), calls=1,
                      cost_usd=0.0)
        total = total + usage
        messages.extend(step_msgs)
        steps.append(Step(index=i, messages=step_msgs, action=Action(tool="submit", arguments={"code": code}),
                          observation=report, reward=n_pass / 5, terminated=passed or last,
                          usage=usage, model_seconds=0.4 + rng.random(), env_seconds=0.06,
                          info={"tests_passed": n_pass, "tests_total": 5}))
        feedback.append(Feedback(source="execution", name="tests_passed", value=n_pass / 5,
                                 rationale=report, author="env:code",
                                 target=FeedbackTarget(kind="step", run_id=run_id, trajectory_id=tid,
                                                       step_index=i)))
        if passed:
            break
    reward = steps[-1].reward if steps else 0.0
    outcome = Outcome(success=solved and error_kind is None, reward=reward,
                      components={"tests_passed": reward * 5, "tests_total": 5},
                      error_kind=error_kind,
                      error="model endpoint: 503 after 3 retries" if error_kind == "infra" else None,
                      evidence="" if solved else "test_3: assert f(3) == 6")
    return Trajectory(id=tid, run_id=run_id, task=task, agent_hash=spec.hash(), epoch=epoch,
                      seed=rng.randint(0, 2**31), messages=messages, steps=steps, outcome=outcome,
                      feedback=feedback, usage=total, started_at=t0,
                      ended_at=t0 + timedelta(seconds=3 + rng.random() * 5))


def create_fixture_run(store: Store, spec: AgentSpec, tasks: list[TaskSpec], epochs: int,
                       solve_rate: float, seed: int, created: datetime,
                       cost_per_call: float = 0.0) -> str:
    """A finished fixture run: ``tasks × epochs`` trajectories; returns its id."""
    rng = random.Random(seed)
    run_id = uuid.UUID(int=rng.getrandbits(128)).hex
    config = content_hash({"fixture": seed, "agent": spec.hash()})
    manifest = RunManifest(run_id=run_id, created_at=created, env=PluginRef(name="code"),
                           agent_hash=spec.hash(), task_ids=[t.id for t in tasks], epochs=epochs,
                           seed=seed, config_hash=config, isolation="fixture")
    store.create_run(manifest, spec, tasks)
    for k, task in enumerate(tasks):
        for e in range(epochs):
            hard = task.metadata["difficulty"] == "hard"
            solved = rng.random() < (solve_rate * (0.4 if hard else 1.0))
            error: ErrorKind | None = "infra" if (k == 3 and e == epochs - 1 and seed % 2) else None
            t = make_trajectory(run_id, task, spec, e, solved, rng, n_steps=rng.randint(1, 3),
                                error_kind=error, start=created + timedelta(seconds=10 * (k * epochs + e)))
            if cost_per_call:
                t.usage = t.usage.model_copy(update={"cost_usd": cost_per_call * t.usage.calls})
            store.save_trajectory(t)
    store.set_run_status(run_id, "finished", {"wall_seconds": 10.0 * len(tasks) * epochs})
    return run_id


def fill_fixture_store(store: Store) -> dict[str, str]:
    """Two comparable runs (baseline and a derived spec) plus a run holding a trajectory whose
    model output carries script payloads. Returns ids: ``baseline``, ``candidate``, ``xss_run``,
    ``xss_trajectory``."""
    tasks = fixture_tasks()
    base = fixture_spec("baseline", 0.0)
    cand = fixture_spec("candidate", 0.2, parents=[base.hash()])
    t0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
    ids = {
        "baseline": create_fixture_run(store, base, tasks, 3, 0.45, 1, t0, cost_per_call=0.0004),
        "candidate": create_fixture_run(store, cand, tasks, 3, 0.75, 2, t0 + timedelta(hours=2),
                                        cost_per_call=0.0006),
    }
    xss_spec = fixture_spec("untrusted-output", 0.7)
    run_id = uuid.uuid4().hex
    manifest = RunManifest(run_id=run_id, created_at=t0 + timedelta(hours=4), env=PluginRef(name="code"),
                           agent_hash=xss_spec.hash(), task_ids=[tasks[0].id], epochs=1, seed=9,
                           config_hash=content_hash({"fixture": "xss"}), isolation="fixture")
    store.create_run(manifest, xss_spec, tasks[:1])
    t = make_trajectory(run_id, tasks[0], xss_spec, 0, False, random.Random(9), n_steps=2,
                        reply=SCRIPT_PAYLOAD, start=t0 + timedelta(hours=4))
    store.save_trajectory(t)
    store.set_run_status(run_id, "finished", {"wall_seconds": 6.0})
    ids.update(xss_run=run_id, xss_trajectory=t.id)
    return ids


def judge_fixture_run(store: Store, run_id: str) -> list[str]:
    """Fabricated judge records on the run, as ``sharpen judge`` stores them — a judgement per
    trajectory with its (made-up) model call and a ``solved`` verdict citing steps, a person's
    ``solved`` annotation on every other one, and one failed judgement — so the judge pages
    have something to show. Returns the judgements' ids."""
    judge, judge_hash = "rubric:fixture", content_hash({"fixture": "judge"})
    author = f"{judge}@{judge_hash[:8]} (local)"
    ids = []
    for i, t in enumerate(store.iter_trajectories(run_id)):
        target = FeedbackTarget(kind="trajectory", run_id=run_id, trajectory_id=t.id)
        solved = t.outcome is not None and t.outcome.success
        if t.outcome is None or t.outcome.error_kind is not None:
            store.save_judgement(Judgement(run_id=run_id, trajectory_id=t.id, judge=judge,
                                           judge_hash=judge_hash, model="local", status="error",
                                           error="the reply was not JSON after 1 re-ask"))
            continue
        last = len(t.steps) - 1
        verdict = solved != (i % 5 == 4)  # wrong on every fifth
        why = (f"[S{last}] submits code that passes the tests." if verdict else
               f"The tests fail at [S{last}]" + ("; [S0] already missed the edge case." if last else "."))
        reply = json.dumps({"solved": {"explanation": why, "value": verdict}})
        j = Judgement(run_id=run_id, trajectory_id=t.id, judge=judge, judge_hash=judge_hash,
                      model="local", status="ok", seconds=1.2,
                      calls=[JudgeCall(messages=[Message(role="system", content="You judge an agent's work."),
                                                 Message(role="user", content="Transcript: ...")],
                                       reply=reply)],
                      usage=Usage(input_tokens=420, output_tokens=48, calls=1, cost_usd=0.0))
        store.save_judgement(j, [Feedback(source="judge", target=target, name="solved",
                                          value=verdict, rationale=why, author=author,
                                          call_id=j.id)])
        if i % 2 == 0:
            store.add_feedback(Feedback(source="human", target=target, name="solved",
                                        value=solved, author="fixture-reader",
                                        rationale="read the tests"))
        ids.append(j.id)
    return ids


if __name__ == "__main__":
    with Store(sys.argv[1] if len(sys.argv) > 1 else None) as st:
        made = fill_fixture_store(st)
        judge_fixture_run(st, made["baseline"])
        print(made)
