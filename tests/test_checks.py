"""The conformance checks (``sharpen.testing`` / ``sharpen check``): every built-in passes
them, and each planted fault is caught with a message that names it.

Planted plug-ins are small classes below, registered on a fresh :class:`Registry` (which
still finds the built-in agents through the entry points) or named as ``module:Name``.
Models are the real ``openai`` backend against real servers on loopback.
"""

from __future__ import annotations

import json
import random
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import sharpen
from servers import ScriptedServer, chat_body

from sharpen.agents.base import BaseAgent
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import UserError
from sharpen.core.messages import Message, ToolCall, ToolSpec, Usage
from sharpen.core.outcome import Outcome
from sharpen.core.registry import PluginRef, Registry
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action, Step, Trajectory
from sharpen.envs.adapters.optional import require
from sharpen.envs.base import BaseEnvironment, BaseVerifier, StepResult
from sharpen.improvement.proposal import BaseProposer, Proposal, ProposalContext
from sharpen.models.base import BaseChatModel, Completion
from sharpen.testing import CheckReport, check_agent, check_env, check_model, check_proposer

BUILT_IN_ENVS = ["code", "sql", "shell", "gridsafety", "toolshop", "textworld", "negotiation"]
ADAPTERS = {"reasoning_gym": "reasoning_gym", "textarena": "textarena", "gymnasium": "gymnasium"}


def problems(report: CheckReport, check: str) -> list[str]:
    return [p.message for p in report.problems if p.check == check]


# -- built-in environments ---------------------------------------------------------------------


@pytest.mark.parametrize("name", BUILT_IN_ENVS)
def test_every_built_in_environment_passes_check_env(name: str) -> None:
    report = check_env(name)
    report.raise_for_problems()
    checks = {line.split(":")[0] for line in report.passed}
    assert {"build", "tools", "describe", "list-tasks", "reset", "null-agent", "reference-agent",
            "replay", "verifier"} <= checks


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_every_adapter_passes_check_env(name: str) -> None:
    pytest.importorskip(ADAPTERS[name], reason=f"the {name} adapter's package is not installed")
    report = check_env(name)
    report.raise_for_problems()
    checks = {line.split(":")[0] for line in report.passed}
    assert {"null-agent", "replay", "verifier"} <= checks
    if name == "gymnasium":  # the Gymnasium adapter knows no solution of an arbitrary env
        assert any(n.startswith("reference-agent: no reference") for n in report.notes)
    else:
        assert "reference-agent" in checks


def test_toolshop_database_path_is_noted_not_compared() -> None:
    """Toolshop's info names its own temporary database, which differs per instance."""
    report = check_env("toolshop", tasks=2)
    assert report.ok
    assert any("db_path" in n for n in report.notes)


# -- planted environments ------------------------------------------------------------------------

WORDS = ["apple", "pear", "plum", "fig", "kiwi", "lime"]
ANSWER = ToolSpec(name="answer", description="Say the word.", text_argument="text",
                  parameters={"type": "object", "properties": {"text": {"type": "string"}},
                              "required": ["text"]})


def word_of(task: TaskSpec) -> str:
    return WORDS[task.seed % len(WORDS)]


class EchoEnv(BaseEnvironment):
    """Say the word the task names (a correct environment, the base of the faults)."""

    def __init__(self) -> None:
        self.tools = [ANSWER]
        self._word = ""
        self._said: str | None = None

    def list_tasks(self, split: str | None = None, limit: int | None = None,
                   seed: int = 0) -> list[TaskSpec]:
        rng = random.Random(seed)
        return [TaskSpec(env="echo", id=f"echo/{i}", seed=rng.randrange(10**6))
                for i in range(limit or 3)]

    async def reset(self, task: TaskSpec) -> tuple[str, dict[str, Any]]:
        self._word, self._said = word_of(task), None
        return f"Say {self._word}.", {"letters": len(self._word)}

    async def step(self, action: Action) -> StepResult:
        self._said = str(action.arguments.get("text", ""))
        right = self._said == self._word
        return StepResult(observation="right" if right else f"wrong: {self._said!r}",
                          reward=float(right), terminated=True)

    async def outcome(self) -> Outcome:
        right = self._said == self._word
        return Outcome(success=right, reward=float(right))

    def reference_solution(self, task: TaskSpec) -> str | None:
        return word_of(task)


class EchoVerifier(BaseVerifier):
    """Re-scores an echo trajectory from its last answer."""

    async def score(self, trajectory: Trajectory) -> Outcome:
        said = [s.action.arguments.get("text") for s in trajectory.steps if s.action is not None]
        right = bool(said) and said[-1] == word_of(trajectory.task)
        return Outcome(success=right, reward=float(right))


class NondeterministicEnv(EchoEnv):
    """Draws its tasks from the global RNG."""

    def list_tasks(self, split: str | None = None, limit: int | None = None,
                   seed: int = 0) -> list[TaskSpec]:
        return [TaskSpec(env="echo", id=f"echo/{random.randrange(10**9)}",
                         seed=random.randrange(10**6)) for _ in range(limit or 3)]


class DisagreeingVerifier(BaseVerifier):
    """Says the opposite of what the environment said."""

    async def score(self, trajectory: Trajectory) -> Outcome:
        right = await EchoVerifier().score(trajectory)
        return Outcome(success=not right.success, reward=1.0 - right.reward)


class WrongReferenceEnv(EchoEnv):
    """Its reference solution is a misspelling."""

    def reference_solution(self, task: TaskSpec) -> str | None:
        return word_of(task) + "x"


class BadSchemaEnv(EchoEnv):
    """Its tool's schema uses a type JSON Schema does not have."""

    def __init__(self) -> None:
        super().__init__()
        self.tools = [ANSWER.model_copy(update={"parameters": {
            "type": "object", "properties": {"text": {"type": "strng"}}}})]


class ClockEnv(EchoEnv):
    """Its observations count calls across instances (shared state), so a replay differs."""

    calls = 0

    async def step(self, action: Action) -> StepResult:
        result = await super().step(action)
        type(self).calls += 1
        return result.model_copy(update={"observation": f"{result.observation} (call {self.calls})"})


class LenientEnv(EchoEnv):
    """Accepts the empty answer."""

    async def outcome(self) -> Outcome:
        right = self._said in (self._word, "")
        return Outcome(success=right, reward=float(right))


class LenientVerifier(BaseVerifier):
    async def score(self, trajectory: Trajectory) -> Outcome:
        said = [s.action.arguments.get("text") for s in trajectory.steps if s.action is not None]
        right = bool(said) and said[-1] in (word_of(trajectory.task), "")
        return Outcome(success=right, reward=float(right))


class NeedsPackageEnv(EchoEnv):
    """Needs an optional package that is not installed."""

    def list_tasks(self, split: str | None = None, limit: int | None = None,
                   seed: int = 0) -> list[TaskSpec]:
        require("sharpen_no_such_package")
        return super().list_tasks(split, limit, seed)


def planted(env: type[BaseEnvironment], verifier: type[BaseVerifier] = EchoVerifier) -> Registry:
    """A fresh registry holding ``env`` and ``verifier`` as ``echo``."""
    registry = Registry()
    registry.register("env", "echo")(env)
    registry.register("verifier", "echo")(verifier)
    return registry


def test_the_planted_base_environment_passes() -> None:
    """The faults below are each one change to an environment that passes."""
    report = check_env("echo", registry=planted(EchoEnv))
    report.raise_for_problems()
    assert len(report.passed) == 9


def test_a_nondeterministic_generator_is_caught() -> None:
    report = check_env("echo", registry=planted(NondeterministicEnv))
    [message] = problems(report, "list-tasks")
    assert "nondeterministic task generator" in message and "global random" in message
    assert not report.ok


def test_a_verifier_that_disagrees_with_the_environment_is_caught() -> None:
    report = check_env("echo", registry=planted(EchoEnv, DisagreeingVerifier))
    [message] = problems(report, "verifier")
    assert "disagrees with the environment on 10 of 10" in message
    # the null run comes first: the environment failed it, the verifier claims a success
    assert "verifier says success=True reward=1.0, the environment said success=False reward=0.0" \
        in message
    assert [p.check for p in report.problems] == ["verifier"]


def test_a_reference_agent_that_fails_is_caught() -> None:
    report = check_env("echo", registry=planted(WrongReferenceEnv))
    [message] = problems(report, "reference-agent")
    assert "the reference agent fails 5/5 tasks" in message and "reference_solution" in message


def test_a_tool_schema_that_is_not_json_schema_is_caught() -> None:
    report = check_env("echo", registry=planted(BadSchemaEnv))
    [message] = problems(report, "tool-schema")
    assert "tool 'answer': parameters is not valid JSON Schema" in message
    assert "'strng' is not valid" in message and "properties/text/type" in message


def test_a_replay_that_differs_is_caught_with_the_place() -> None:
    report = check_env("echo", registry=planted(ClockEnv))
    [message] = problems(report, "replay")
    assert "do not replay byte-identically" in message and "step 0: the observation differs" in message


def test_a_checker_that_accepts_an_empty_answer_is_caught() -> None:
    report = check_env("echo", registry=planted(LenientEnv, LenientVerifier))
    [message] = problems(report, "null-agent")
    assert "the null agent (an empty answer) succeeds on 5/5" in message


def test_a_missing_optional_package_is_one_clear_problem() -> None:
    report = check_env("echo", registry=planted(NeedsPackageEnv))
    [problem] = report.problems
    assert problem.check == "list-tasks"
    assert "needs the Python package 'sharpen_no_such_package'" in problem.message
    assert "pip install" in problem.message and "Traceback" not in problem.message


def test_a_module_reference_is_checked_and_its_missing_verifier_noted() -> None:
    report = check_env(f"{__name__}:EchoEnv", registry=Registry(entry_points=True))
    assert report.ok, report.problems
    assert any(n.startswith("verifier: no verifier registered") for n in report.notes)


def test_raise_for_problems_holds_every_message() -> None:
    report = check_env("echo", registry=planted(WrongReferenceEnv, DisagreeingVerifier))
    with pytest.raises(AssertionError) as info:
        report.raise_for_problems()
    text = str(info.value)
    assert "[reference-agent]" in text and "[verifier]" in text


# -- agents ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scripted() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


def openai_ref(server: ScriptedServer, scenario: str, **args: Any) -> dict[str, Any]:
    return {"name": "openai", "args": {"base_url": server.base_url(scenario), "model": "scripted",
                                       **args}}


@pytest.mark.parametrize("name", ["null", "reference"])
def test_model_free_built_in_agents_pass_check_agent(name: str) -> None:
    report = check_agent(name)
    report.raise_for_problems()
    assert "needs-model: needs_model is False" in report.passed


@pytest.mark.parametrize("name", ["tool", "reflexion"])
def test_model_using_built_in_agents_pass_check_agent(scripted: ScriptedServer, name: str) -> None:
    report = check_agent(name, model=openai_ref(scripted, "tools"))
    report.raise_for_problems()
    assert "trajectory: messages, steps, ended_at and usage well formed" in report.passed


def test_an_agent_that_needs_a_model_is_not_checked_without_one() -> None:
    with pytest.raises(UserError, match="needs a model"):
        check_agent("tool")


class SloppyAgent(BaseAgent):
    """Records a step without messages, negative usage, and never sets ended_at."""

    needs_model = False

    async def run(self, env: Any, model: Any, spec: AgentSpec, trajectory: Trajectory) -> None:
        obs, _ = await env.reset(trajectory.task)
        trajectory.messages = [Message(role="user", content=obs)]
        trajectory.steps.append(Step(index=1, messages=[], usage=Usage(input_tokens=-5)))


class VagueAgent(BaseAgent):
    needs_model = "sometimes"  # type: ignore[assignment]

    async def run(self, env: Any, model: Any, spec: AgentSpec, trajectory: Trajectory) -> None:
        return None


def test_a_malformed_trajectory_is_caught_fault_by_fault() -> None:
    report = check_agent(f"{__name__}:SloppyAgent", episodes=1)
    faults = problems(report, "trajectory")
    assert any("step 0 has index 1" in f for f in faults)
    assert any("step 0 has no messages" in f for f in faults)
    assert any("step 0 usage is negative (input_tokens=-5)" in f for f in faults)
    assert any("ended_at is not set" in f for f in faults)


def test_a_needs_model_that_is_not_a_bool_is_caught() -> None:
    report = check_agent(f"{__name__}:VagueAgent")
    [message] = problems(report, "needs-model")
    assert "needs_model is 'sometimes' (str)" in message


# -- models ------------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["ok", "tools"])
def test_the_openai_backend_passes_check_model(scripted: ScriptedServer, scenario: str) -> None:
    # The scripted server ignores response_format: told so, the model validates instead.
    report = check_model(openai_ref(scripted, scenario, structured="none"))
    report.raise_for_problems()
    expected = "1 call(s) of 'submit'" if scenario == "tools" else "text"
    assert f"tools: with one tool offered, the reply is {expected}" in report.passed
    assert any(n.startswith("structured: structured_output is 'validate'") for n in report.notes)


def test_a_server_that_ignores_the_response_schema_is_caught(scripted: ScriptedServer) -> None:
    """``structured: json_schema`` (the default) promises a constrained reply; the scripted
    server answers "hello" whatever the response_format."""
    report = check_model(openai_ref(scripted, "ok"))
    [message] = problems(report, "structured")
    assert message.startswith("structured_output is 'server', yet the reply to a request with "
                              "a response_schema is not valid against it: The reply is not "
                              "valid JSON")
    assert "set structured to what the server speaks, or none" in message
    path, _, body = scripted.requests[-1]
    assert path.startswith("/ok/") and body["response_format"]["type"] == "json_schema"


def test_a_backend_that_fails_is_a_problem_naming_the_fix(scripted: ScriptedServer) -> None:
    report = check_model(openai_ref(scripted, "500"))
    [message] = problems(report, "complete")
    assert message.startswith("the backend failed") and "base_url" in message


class RudeModel(BaseChatModel):
    """Replies as the user with negative usage, and calls a tool it was not offered."""

    name = "rude"
    supports_tools = True

    async def complete(self, messages: list[Message], tools: list[ToolSpec] | None = None,
                       params: dict[str, Any] | None = None) -> Completion:
        if tools:
            call = ToolCall(id="c1", name="launch_rockets", arguments={})
            return Completion(message=Message(role="assistant", tool_calls=[call]),
                              finish_reason="tool_calls")
        return Completion(message=Message(role="user", content="hi"), usage=Usage(output_tokens=-2))


def test_a_model_breaking_the_completion_contract_is_caught() -> None:
    report = check_model(f"{__name__}:RudeModel")
    complete = problems(report, "complete")
    assert any("role is 'user'" in m for m in complete)
    assert any("usage is negative (output_tokens=-2)" in m for m in complete)
    [tools] = problems(report, "tools")
    assert "calls ['launch_rockets'], a tool it was not offered" in tools


# -- proposers ---------------------------------------------------------------------------------

GOOD = "Read each step of the docstring and do them in order. Test your function on the examples."


@pytest.fixture(scope="module")
def writer_url() -> Iterator[str]:
    """An OpenAI-shaped server on loopback that always answers with one fenced proposal."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = json.dumps(chat_body(f"Here:\n```\n{GOOD}\n```")).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_reflexion_proposer_passes_check_proposer_without_a_model() -> None:
    report = check_proposer("reflexion")
    report.raise_for_problems()
    assert "load-state: load_state(state()) round-trips" in report.passed


@pytest.mark.parametrize("name", ["evolve", "opro"])
def test_llm_proposers_pass_check_proposer(writer_url: str, name: str) -> None:
    # The writer ignores response_format: told so, the proposers ask for fenced text.
    model = {"name": "openai", "args": {"base_url": writer_url, "model": "w", "tools": False,
                                        "structured": "none"}}
    report = check_proposer(name, model=model)
    report.raise_for_problems()
    assert any(p.startswith("propose: a new child") for p in report.passed)


def test_an_llm_proposer_is_not_checked_without_a_model() -> None:
    with pytest.raises(UserError, match="no model was given"):
        check_proposer("evolve")


class LazyProposer(BaseProposer):
    """Proposes its parent unchanged; its state holds a set; load_state forgets."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    async def propose(self, ctx: ProposalContext) -> Proposal:
        self.seen.add(ctx.parent.hash)
        return Proposal(spec=ctx.parent.spec, change="nothing")

    def state(self) -> dict[str, Any]:
        return {"seen": self.seen}


class ForgetfulProposer(LazyProposer):
    async def propose(self, ctx: ProposalContext) -> Proposal:
        spec = ctx.parent.spec.model_copy(update={"components": {"instructions": "Be brief."}})
        self.seen.add(ctx.parent.hash)
        return Proposal(spec=spec, change="brief instructions")

    def state(self) -> dict[str, Any]:
        return {"seen": sorted(self.seen)}


def test_a_proposer_returning_its_parent_with_a_set_in_its_state_is_caught() -> None:
    report = check_proposer(f"{__name__}:LazyProposer")
    [propose] = problems(report, "propose")
    assert "the proposed spec is the parent unchanged" in propose
    [state] = problems(report, "state")
    assert "state() is not JSON-serialisable" in state and "set" in state


def test_a_proposer_whose_load_state_forgets_is_caught() -> None:
    report = check_proposer(f"{__name__}:ForgetfulProposer")
    assert "propose: a new child: brief instructions" in report.passed
    [message] = problems(report, "load-state")
    assert "load_state must restore everything state() returns" in message


# -- the command line ----------------------------------------------------------------------------

BAD_SCHEMA_PLUGIN = '''
from sharpen.core.messages import ToolSpec
from sharpen.core.outcome import Outcome
from sharpen.core.task import TaskSpec
from sharpen.envs.base import BaseEnvironment, StepResult


class Broken(BaseEnvironment):
    """An environment whose tool schema is not JSON Schema."""

    def __init__(self):
        self.tools = [ToolSpec(name="say", description="Say it.",
                               parameters={"type": "object", "required": "text"})]

    def list_tasks(self, split=None, limit=None, seed=0):
        return [TaskSpec(env="broken", id=str(i), seed=i) for i in range(limit or 2)]

    async def reset(self, task):
        return "Say hi.", {}

    async def step(self, action):
        return StepResult(observation="ok", terminated=True)

    async def outcome(self):
        return Outcome(success=False)
'''


def test_cli_check_env_lists_each_check_and_exits_by_the_verdict(tmp_path: Path) -> None:
    ok = sharpen("check", "env", "sql", "--tasks", "2", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "ok env sql: 9 passed, 0 failed" in ok.stdout
    assert "passed verifier: 'sql' re-scores 4 stored trajectories" in ok.stdout
    (tmp_path / "broken.py").write_text(textwrap.dedent(BAD_SCHEMA_PLUGIN))
    bad = sharpen("check", "env", "broken.py:Broken", "--json", cwd=tmp_path)
    assert bad.returncode == 1, bad.stderr
    report = json.loads(bad.stdout)
    assert report["ok"] is False
    assert [p["check"] for p in report["problems"]] == ["tool-schema"]
    assert "tool 'say': parameters is not valid JSON Schema" in report["problems"][0]["message"]


def test_cli_check_agent_needs_a_model_flag(tmp_path: Path, scripted: ScriptedServer) -> None:
    missing = sharpen("check", "agent", "tool", cwd=tmp_path)
    assert missing.returncode == 2 and "fix: pass model=" in missing.stderr
    ok = sharpen("check", "agent", "tool", "--base-url", scripted.base_url("tools"), cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "passed trajectory:" in ok.stdout


def test_cli_check_env_args_reach_the_environment(tmp_path: Path) -> None:
    out = sharpen("check", "env", "code", "-E", "max_submissions=0", cwd=tmp_path)
    assert out.returncode == 1
    assert "failed build: cannot build the environment: max_submissions" in out.stdout


def test_check_report_ref_argument_forms_agree() -> None:
    """A name with args, and a {name, args} ref, check the same environment."""
    a = check_env("sql", args={"max_submissions": 1}, tasks=1)
    b = check_env(PluginRef(name="sql", args={"max_submissions": 1}), tasks=1)
    assert a.ok and b.ok and a.passed == b.passed
