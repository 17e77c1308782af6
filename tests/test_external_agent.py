"""The ``external`` agent: agent programs written with the openai SDK (tests/external_agents)
evaluated through the bridge on ``code`` and ``toolshop`` by the real runner and store, the
model answering from tests/cassettes/external_agent.jsonl (recorded from the embedded model
by tests/record_external_cassette.py)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from conftest import procs_with, sharpen
from record_external_cassette import spec
from servers import free_port, llama_server_fixture

from sharpen.api import arun
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import UserError
from sharpen.core.registry import PluginRef
from sharpen.core.trajectory import Trajectory
from sharpen.runner.retry import RetryPolicy
from sharpen.store import Store

pytestmark = pytest.mark.asyncio
llama_server = llama_server_fixture(n_threads=1)


async def play(tmp_path: Path, env: str, agent: AgentSpec, **kw: object) -> tuple[str, Trajectory]:
    """Run ``agent`` on the first task of ``env``; ``(store url, the trajectory)``."""
    url = f"sqlite:///{tmp_path / 'sharpen.db'}"
    run = await arun(env, agent=agent, tasks=1, concurrency=1, store=url, **kw)  # type: ignore[arg-type]
    (traj,) = list(run.trajectories())
    return url, traj


def assert_model_steps(traj: Trajectory, calls: int, priced: bool = True) -> None:
    """``calls`` model calls, each a step with a reply and its usage (and a known cost when
    the model is ``priced``)."""
    with_calls = [s for s in traj.steps if s.usage.calls]
    assert len(with_calls) == calls == traj.usage.calls
    for s in with_calls:
        assert s.messages[0].role == "assistant"
        assert s.usage.calls == 1 and s.usage.input_tokens > 0 and s.usage.output_tokens > 0
        assert (s.usage.cost_usd is not None) is priced
    assert traj.usage.input_tokens == sum(s.usage.input_tokens for s in traj.steps)


def assert_reported(url: str, cwd: Path, traj: Trajectory, success: float) -> None:
    """``sharpen report --json`` shows the run's success, tokens and cost (one attempt)."""
    done = sharpen("report", "latest", "--json", "--store", url, cwd=cwd)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["run"]["agent"] == "external"
    assert report["errors"]["attempts"] == report["errors"]["counted"] == 1
    assert report["accuracy"]["success"]["value"] == success
    cost = report["cost"]
    assert (cost["input_tokens"], cost["output_tokens"]) == (
        traj.usage.input_tokens, traj.usage.output_tokens)
    assert cost["input_tokens"] > 0
    assert cost["cost_usd"] == traj.usage.cost_usd and cost["cost_unknown_attempts"] == 0


async def test_one_shot_answer_is_submitted_and_scored(tmp_path: Path) -> None:
    url, traj = await play(tmp_path, "code", spec("oneshot.py"))
    assert_model_steps(traj, 1)
    (step,) = traj.steps
    assert step.action is not None and step.action.tool == "submit"
    assert step.info["final_answer"] is True
    assert step.action.arguments["code"].lstrip().startswith("def has_close_elements")
    assert "```" not in step.action.arguments["code"]  # the fence was unwrapped
    assert traj.outcome is not None and traj.outcome.error_kind is None
    assert traj.outcome.components["tests_total"] == 7  # the code verifier's verdict
    assert_reported(url, tmp_path, traj, success=0.0)


async def test_streaming_and_answer_file_give_the_same_episode(tmp_path: Path) -> None:
    _, plain = await play(tmp_path / "a", "code", spec("oneshot.py"))
    _, streamed = await play(tmp_path / "b", "code",
                             spec("oneshot.py", env={"STREAM": "1", "ANSWER_FILE": "1"}))
    assert streamed.steps[0].action == plain.steps[0].action  # stdout's noise was not submitted
    assert streamed.usage.total_tokens == plain.usage.total_tokens


async def test_tool_loop_on_code_maps_tool_calls_to_actions(tmp_path: Path) -> None:
    _, traj = await play(tmp_path, "code", spec("tool_loop.py"))
    assert_model_steps(traj, 2)
    first, second = traj.steps
    # The embedded model has no native tools: its fenced reply came back as a tool call,
    # which the program executed at SHARPEN_TOOL_URL — one env.step on the reply's step.
    call = first.messages[0].tool_calls[0]
    assert first.info["tools"] == second.info["tools"] == "text"
    assert call.name == "submit" and first.action is not None and first.action.tool == "submit"
    assert first.messages[1].role == "tool" and first.messages[1].tool_call_id == call.id
    assert first.messages[1].content == first.observation and "tests passed" in first.observation
    assert second.action is None  # it answered in text: the program ended; nothing resubmitted
    assert traj.outcome is not None and traj.outcome.components["submissions"] == 1


async def test_tool_loop_on_toolshop(tmp_path: Path) -> None:
    _, traj = await play(tmp_path, "toolshop", spec("tool_loop.py"))
    assert_model_steps(traj, 1)
    assert traj.outcome is not None and traj.outcome.error_kind is None
    assert traj.outcome.success is False and "state_match" in traj.outcome.components


async def test_actions_without_call_ids_solve_toolshop(tmp_path: Path) -> None:
    url, traj = await play(tmp_path, "toolshop", spec("scripted_shop.py"))
    assert_model_steps(traj, 1)
    assert [s.action.tool for s in traj.steps if s.action] == ["cancel_order", "finish"]
    assert traj.steps[0].action is not None  # the first action went on the model's step
    assert traj.steps[-1].terminated
    assert traj.messages[-1].content == traj.steps[-1].observation  # the conversation's end
    assert traj.outcome is not None and traj.outcome.success is True
    assert_reported(url, tmp_path, traj, success=1.0)


async def test_non_zero_exit_is_the_agents_failure(tmp_path: Path) -> None:
    crash = [sys.executable, "-c", "import sys; sys.stderr.write('boom'); sys.exit(3)"]
    _, traj = await play(tmp_path, "code", spec(crash))  # type: ignore[arg-type]
    assert traj.outcome is not None and traj.outcome.success is False
    assert traj.outcome.error_kind == "agent" and traj.outcome.counts
    assert "status 3" in (traj.outcome.error or "") and "boom" in (traj.outcome.error or "")


async def test_timeout_is_the_agents_failure(tmp_path: Path) -> None:
    hang = [sys.executable, "-c", "import time; time.sleep(120)"]
    _, traj = await play(tmp_path, "code", spec(hang, timeout_s=1))  # type: ignore[arg-type]
    assert traj.outcome is not None and traj.outcome.error_kind == "agent"
    assert "timeout" in (traj.outcome.error or "")
    assert traj.wall_seconds < 60  # stopped, not waited for


async def test_dead_model_is_infra(tmp_path: Path) -> None:
    agent = spec("oneshot.py").model_copy(update={"model": PluginRef(
        name="openai", args={"base_url": f"http://127.0.0.1:{free_port()}/v1", "model": "x",
                             "timeout": 5})})
    url = f"sqlite:///{tmp_path / 'sharpen.db'}"
    with pytest.raises(UserError, match="infra errors"):  # the runner's breaker: nothing answers
        await arun("code", agent=agent, tasks=1, concurrency=1, store=url,
                   retry=RetryPolicy(max_retries=0))
    store = Store(url)
    (traj,) = list(store.iter_trajectories(store.resolve_run("latest")))
    assert traj.outcome is not None and traj.outcome.error_kind == "infra"
    assert "ConnectError" in (traj.outcome.error or "")
    assert not traj.outcome.counts


async def test_step_limit_stops_the_program(tmp_path: Path) -> None:
    agent = spec("tool_loop.py")
    agent = agent.model_copy(update={"limits": agent.limits.model_copy(update={"max_steps": 1})})
    _, traj = await play(tmp_path, "code", agent)
    assert_model_steps(traj, 1)
    assert traj.steps[0].truncated and "step limit" in traj.steps[0].info["limit"]
    assert traj.outcome is not None and traj.outcome.error_kind is None  # scored as it stands


async def test_model_calls_are_steps_in_the_viewer(tmp_path: Path) -> None:
    pytest.importorskip("fastapi", reason="the viewer extra")
    from fastapi.testclient import TestClient

    from sharpen.viewer import create_app

    url, traj = await play(tmp_path, "code", spec("tool_loop.py"))
    page = TestClient(create_app(Store(url))).get(f"/t/{traj.id}")
    assert page.status_code == 200
    assert 'id="step-0"' in page.text and 'id="step-1"' in page.text
    assert "You are an agent that acts only through the tools." in page.text  # its own prompt
    assert f"tokens {traj.usage.input_tokens} in / {traj.usage.output_tokens} out" in page.text


async def test_requests_the_bridge_cannot_serve_are_refused_not_faults(tmp_path: Path) -> None:
    _, traj = await play(tmp_path, "code", spec("bad_requests.py"))
    assert traj.outcome is not None and traj.outcome.error_kind is None, traj.outcome
    assert traj.usage.calls == 0
    (step,) = traj.steps  # only its final answer, submitted
    assert step.info["final_answer"] and step.action is not None


async def test_cancelled_run_leaves_no_program_behind(tmp_path: Path) -> None:
    marker = f"sharpen-external-test-{tmp_path.name}"
    hang = [sys.executable, "-c", f"import time; time.sleep(120)  # {marker}"]
    task = asyncio.ensure_future(play(tmp_path, "code", spec(hang)))  # type: ignore[arg-type]
    for _ in range(200):
        if procs_with(marker):
            break
        await asyncio.sleep(0.05)
    assert procs_with(marker), "the program never started"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert procs_with(marker) == []


@pytest.mark.slow
async def test_tool_loop_through_a_real_server_with_native_tools(tmp_path: Path,
                                                                 llama_server: str) -> None:
    """The run's model is llama-cpp-python's server with native tools: the request's tools go
    to it as tools, not as the text protocol."""
    agent = spec("tool_loop.py").model_copy(update={"model": PluginRef(
        name="openai", args={"base_url": llama_server, "model": "smollm2", "structured": "none"})})
    _, traj = await play(tmp_path, "code", agent)
    assert traj.outcome is not None and traj.outcome.error_kind is None, traj.outcome
    assert traj.usage.calls >= 1
    assert_model_steps(traj, traj.usage.calls, priced=False)  # no price for a local server
    assert traj.steps[0].info["tools"] == "native"


async def test_a_command_that_cannot_start_stops_the_run(tmp_path: Path) -> None:
    missing = [str(tmp_path / "no-such-agent")]
    with pytest.raises(UserError, match="cannot start"):
        await play(tmp_path, "code", spec(missing))  # type: ignore[arg-type]
