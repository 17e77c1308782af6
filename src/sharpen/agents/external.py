"""ExternalAgent (``agent: {name: external, args: {command: ...}}``): any agent program that
speaks the OpenAI API, evaluated unchanged — sharpen's take on Inspect's agent bridge.

Per episode:

1. The environment is reset; its first observation is the task prompt.
2. A loopback OpenAI-compatible proxy (:mod:`sharpen.agents.bridge`) starts in front of the
   run's model — whatever :class:`~sharpen.models.base.ChatModel` the runner hands the agent
   (the embedded model, an endpoint, the replay model), with the runner's infra retries.
3. ``command`` runs as a subprocess (a string through ``sh -c``, a list as argv; in ``cwd``,
   default the current directory; in a new session so that its whole process group can be
   stopped) with the task prompt on stdin and these variables set:

   ==========================  =====================================================
   ``OPENAI_BASE_URL``         the proxy, ``http://127.0.0.1:PORT/v1``
   ``OPENAI_API_KEY``          a placeholder (the proxy checks none)
   ``SHARPEN_MODEL``           the run's model name (any model name is accepted)
   ``SHARPEN_TASK_FILE``       the task prompt
   ``SHARPEN_TOOLS_FILE``      the environment's tools, a JSON list in the OpenAI
                               ``tools`` format (pass it as ``tools=``)
   ``SHARPEN_TOOL_URL``        where a tool call is executed: POST ``{"name",
                               "arguments", "tool_call_id"}`` → ``{"observation",
                               "reward", "terminated", "truncated", "invalid"}``
   ``SHARPEN_INSTRUCTIONS_FILE``  the spec's text components (what improvement edits)
   ``SHARPEN_ANSWER_FILE``     where the program may write its final answer
   ==========================  =====================================================

4. Every model call through the proxy is one step with its reply, usage and cost. Each tool
   call the program executes at ``SHARPEN_TOOL_URL`` is one ``env.step`` — the environment's
   action — recorded on the step whose reply made that call.
5. When the program exits with status 0, its final answer — the answer file if it wrote one,
   else its stdout, else the text of the last reply — is submitted through the environment's
   answer tool (the one with a ``text_argument``, e.g. ``code``'s ``submit(code)``; a fenced
   block is unwrapped as the text protocol does), but only if the program took no
   environment action itself and the episode is still open: a program that acted through the
   tools (``toolshop``'s ``cancel_order`` ... ``finish``, or ``code``'s ``submit``) is scored on
   the state it left. The environment's verifier then scores the episode (the runner asks
   ``env.outcome()``).

Failures: a program that runs past ``timeout_s`` (default: the spec's ``limits.max_seconds``),
crashes or exits non-zero fails the episode as the agent's (:class:`~sharpen.core.errors.AgentError`,
error kind ``agent``, with the tail of its stderr). A fault of the model (an ``InfraError``
after retries) or of the proxy makes the episode ``infra``, whatever the program did next. A
limit of the spec reached at the proxy (``max_steps`` model calls, tokens, dollars) stops the
program and the episode is scored as it stands, like the tool agent's limits. A command that
cannot start at all (no such executable) is a :class:`~sharpen.core.errors.UserError`: it stops
the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from sharpen.agents.acting import apply_action
from sharpen.agents.base import BaseAgent
from sharpen.agents.bridge import Bridge
from sharpen.agents.bridge_http import serve
from sharpen.agents.text_protocol import ParseError, parse_text_action
from sharpen.agents.tool_agent import system_prompt
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import AgentError, UserError
from sharpen.core.messages import Message
from sharpen.core.registry import register
from sharpen.core.trajectory import Action, Step, Trajectory
from sharpen.envs.base import Environment
from sharpen.models.base import ChatModel

TAIL = 1500
"""Characters of the program's stderr kept in a failure's message."""
GRACE_S = 3.0
"""Seconds between SIGTERM and SIGKILL when the program is stopped."""


@register("agent", "external")
class ExternalAgent(BaseAgent):
    """Runs an external agent program against the episode (see the module doc).
    ``command``: a shell command line or an argv list. ``timeout_s``: wall-clock limit of the
    program (default: the spec's ``limits.max_seconds``). ``cwd``: its working directory.
    ``env``: extra environment variables for it."""

    def __init__(self, command: str | list[str], timeout_s: float | None = None,
                 cwd: str | None = None, env: dict[str, str] | None = None) -> None:
        if not command or (isinstance(command, list) and not all(isinstance(c, str) for c in command)):
            raise UserError("the external agent needs a command",
                            "set agent args command, e.g. {command: 'python my_agent.py'}")
        if timeout_s is not None and timeout_s <= 0:
            raise UserError(f"timeout_s must be positive, not {timeout_s}", "e.g. timeout_s: 300")
        self.command = command
        self.timeout_s = timeout_s
        self.cwd = cwd
        self.env = dict(env or {})

    async def run(
        self, env: Environment, model: ChatModel, spec: AgentSpec, trajectory: Trajectory
    ) -> None:
        """Play one episode through the program; the caller sets the outcome. Raises
        :class:`AgentError` when the program fails, the bridge's fault when there was one."""
        obs, _ = await env.reset(trajectory.task)
        trajectory.messages = [Message(role="user", content=obs)]
        bridge = Bridge(env, model, spec, trajectory)
        timeout = self.timeout_s or spec.limits.max_seconds
        with tempfile.TemporaryDirectory(prefix="sharpen-external-") as tmp:
            folder = Path(tmp)
            files = {
                "SHARPEN_TASK_FILE": (folder / "task.txt", obs),
                "SHARPEN_TOOLS_FILE": (folder / "tools.json",
                                       json.dumps([t.to_openai() for t in env.tools], indent=1)),
                "SHARPEN_INSTRUCTIONS_FILE": (folder / "instructions.txt",
                                              system_prompt(spec, env.tools, "native")),
            }
            for path, text in files.values():
                path.write_text(text, encoding="utf-8")
            answer_file = folder / "answer.txt"
            async with serve(bridge.handle) as url:
                variables = {k: str(p) for k, (p, _) in files.items()} | {
                    "OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "sharpen-bridge",
                    "SHARPEN_MODEL": model.name, "SHARPEN_TOOL_URL": f"{url}/sharpen/tool",
                    "SHARPEN_ANSWER_FILE": str(answer_file),
                }
                code, out, err, timed_out = await self._play(obs, variables, bridge, timeout)
            answer_text = answer_file.read_text(encoding="utf-8") if answer_file.exists() else ""
        trajectory.ended_at = datetime.now(UTC)
        if bridge.fault is not None:
            raise bridge.fault
        if bridge.limit is not None:
            return  # stopped at a limit: scored as it stands
        tail = err.decode("utf-8", "replace")[-TAIL:].strip()
        if timed_out:
            raise AgentError(f"the agent program ran past its {timeout:g} s timeout"
                             + (f"; stderr: {tail}" if tail else ""))
        if code != 0:
            how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
            raise AgentError(f"the agent program {how}" + (f"; stderr: {tail}" if tail else ""))
        answer = (answer_text.strip() or out.decode("utf-8", "replace").strip()
                  or self._last_reply(trajectory))
        if answer and bridge.actions == 0:
            await self._submit(env, trajectory, answer)
        trajectory.ended_at = datetime.now(UTC)

    async def _play(self, prompt: str, variables: dict[str, str], bridge: Bridge,
                    timeout: float) -> tuple[int, bytes, bytes, bool]:
        """Run the program to its end, its timeout or the bridge's stop; ``(status, stdout,
        stderr, timed_out)``."""
        no_proxy = ",".join(p for p in (os.environ.get("NO_PROXY"), "127.0.0.1,localhost") if p)
        env = {**os.environ, **self.env, **variables, "NO_PROXY": no_proxy, "no_proxy": no_proxy}
        argv = ["/bin/sh", "-c", self.command] if isinstance(self.command, str) else self.command
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, cwd=self.cwd, env=env, start_new_session=True)
        except OSError as exc:  # the same for every episode: a mistake in the config
            raise UserError(f"the external agent's command {self.command!r} cannot start: {exc}",
                            "fix agent args command (an executable on PATH, or a shell line)"
                            ) from None
        talk = asyncio.ensure_future(proc.communicate(prompt.encode()))
        stop = asyncio.ensure_future(bridge.stopped.wait())
        try:
            done, _ = await asyncio.wait({talk, stop}, timeout=timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
            timed_out = not done
            if talk not in done:
                await _stop(proc)
            out, err = await talk
        finally:
            stop.cancel()
            if proc.returncode is None:  # cancelled (Ctrl-C): leave no program behind
                await _stop(proc)
                talk.cancel()
        assert proc.returncode is not None
        return proc.returncode, out, err, timed_out

    @staticmethod
    def _last_reply(trajectory: Trajectory) -> str:
        for step in reversed(trajectory.steps):
            for m in step.messages:
                if m.role == "assistant" and m.content:
                    return m.content
        return ""

    @staticmethod
    async def _submit(env: Environment, trajectory: Trajectory, answer: str) -> None:
        """Submit ``answer`` through the environment's answer tool, if it has one."""
        tools = [t for t in env.tools if t.text_argument]
        if not tools:
            return
        tool = tools[0]
        assert tool.text_argument is not None
        try:
            action = parse_text_action(answer, [tool])
        except ParseError:
            action = Action(tool=tool.name, arguments={tool.text_argument: answer})
        steps = trajectory.steps
        if steps and steps[-1].action is None and steps[-1].invalid_action is None:
            step = steps[-1]
        else:
            step = Step(index=len(steps), messages=[Message(role="assistant", content=answer)])
            steps.append(step)
        ours = dict(step.info)
        observation = await apply_action(env, trajectory, step, action)
        step.info.update(ours, final_answer=True)  # apply_action set the env's info
        step.messages.append(Message(role="user", content=observation))
        trajectory.messages.append(Message(role="user", content=observation))


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the program's process group, SIGKILL it after :data:`GRACE_S`."""
    for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            await asyncio.wait_for(proc.wait(), wait)
            return
        except TimeoutError:
            continue
