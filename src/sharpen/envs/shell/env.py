"""ShellEnv: "do this in a shell" tasks in a sandboxed temporary directory.

One episode = one generated task (:mod:`sharpen.envs.shell.tasks`). At reset a fresh
:class:`~sharpen.sandbox.local.LocalSandbox` workdir is filled with the task's files and the
goal is stated in words. Tools:

- ``run(command)`` — ``bash -c command`` in the workdir (bubblewrap, no network, rlimits);
  the observation is the exit code, stdout and stderr (each truncated). A fenced ```bash
  block in a plain-text reply fills ``command``. An empty command is explained and not
  counted.
- ``done()`` — finish; the hidden checks are run and the reward is 1 or 0.

The episode also ends after ``max_commands`` commands. The checks (:mod:`.check`) never exist
in the sandbox during the episode; they run after it. ``outcome()`` is that verdict:
``success`` when every check passes, ``reward`` 1/0, ``components`` ``checks_passed``,
``checks_total``, ``commands``. :class:`ShellVerifier` recomputes it offline by replaying the
trajectory's commands in a fresh sandbox.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, ClassVar

from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.core.messages import ToolSpec
from sharpen.core.outcome import Outcome
from sharpen.core.registry import register
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action, Trajectory
from sharpen.envs import generation
from sharpen.envs.args import positive_int, positive_seconds
from sharpen.envs.base import BaseVerifier, StepResult
from sharpen.envs.shell import tasks as gen
from sharpen.envs.shell.check import CheckResult, run_checks
from sharpen.envs.shell.perturb import PERTURBATIONS
from sharpen.envs.shell.stages import STAGES, command_stage
from sharpen.envs.shell.tasks import ShellProblem, materialize
from sharpen.sandbox.local import LocalSandbox

OUTPUT_CHARS = 2000
"""Characters of stdout and of stderr shown per command."""

DESCRIPTION = (
    "Shell tasks in a sandboxed temporary directory: count log lines, split a CSV into files, "
    "sort numbers, replace text across files, write a small executable script. Tools "
    "run(command) (bash; observation = exit code, stdout, stderr) and done(); success is "
    "decided by hidden checks of the final directory."
)

RUN = ToolSpec(
    name="run",
    description=("Run a bash command in the task directory (`bash -c`, no network). Returns "
                 "the exit code, stdout and stderr."),
    parameters={"type": "object",
                "properties": {"command": {"type": "string", "description": "Bash command."}},
                "required": ["command"]},
    text_argument="command",
    text_hint="To run a command, reply with it in one ```bash code block",
)
DONE = ToolSpec(name="done", description="Finish the task; the directory is then checked.",
                parameters={"type": "object", "properties": {}}, final=True)


def _clip(text: str, limit: int = OUTPUT_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n... ({len(text) - limit} more chars)"


def _listing(problem: ShellProblem) -> str:
    return "\n".join(f"  {path} ({text.count(chr(10))} lines)"
                     for path, text in sorted(problem.files.items()))


class ShellTaskGenerator(generation.PresetKnobs):
    """The :class:`~sharpen.envs.base.Generator` of shell tasks (stateless)."""

    KNOB_SCHEMA = gen.KNOBS
    PRESET_TABLE = gen.PRESETS

    def sample(self, knobs: dict[str, Any], seed: int, split: str = "test") -> TaskSpec:
        """The ``seed``-th task of ``split`` at ``knobs`` (seed moved into the split's range)."""
        full = gen.resolve_knobs(knobs)
        task_seed = generation.seed_for(split, seed)
        family = gen.build(task_seed, full).family
        return TaskSpec(env="shell", id=f"shell/{family}/{task_seed}", seed=task_seed,
                        knobs=full, split=generation.as_split(split),
                        metadata={"difficulty": gen.difficulty_of(full), "family": family})

    def materialize(self, task: TaskSpec) -> ShellProblem:
        return materialize(task)

    async def check_reference(self, task: TaskSpec) -> CheckResult:
        """Run the reference commands in a real sandbox and return the checks' verdict."""
        problem = materialize(task)
        async with LocalSandbox() as sandbox:
            for path, text in problem.files.items():
                await sandbox.write_file(path, text)
            for command in problem.reference:
                await sandbox.exec(["bash", "-c", command], timeout=10.0)
            return await run_checks(sandbox, problem)

    def is_solvable(self, task: TaskSpec) -> bool:
        """Whether the reference commands pass the hidden checks in a real sandbox."""
        box: list[bool] = []

        def target() -> None:
            box.append(asyncio.run(self.check_reference(task)).success)

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            target()
        else:  # called from async code: run on a thread with its own loop
            thread = threading.Thread(target=target)
            thread.start()
            thread.join()
        return bool(box and box[0])


@register("env", "shell")
class ShellEnv(generation.GeneratedEnv):
    """The shell environment. Constructor args are its serialisable ``{name, args}``:
    ``difficulty`` (preset), ``knobs`` (overrides), ``max_commands`` (commands per episode),
    ``command_timeout`` (seconds per command)."""

    ENV_NAME = "shell"
    DESCRIPTION = DESCRIPTION
    perturbations = PERTURBATIONS
    """Declared perturbations (:mod:`sharpen.envs.shell.perturb`)."""
    stages: ClassVar[dict[str, str]] = STAGES
    """inspect / change / verify, by a command's verbs (:mod:`.stages`); ``done`` verifies."""

    def __init__(self, difficulty: str = "easy", knobs: dict[str, Any] | None = None,
                 max_commands: int = 10, command_timeout: float = 5.0) -> None:
        positive_int("max_commands", max_commands)
        positive_seconds("command_timeout", command_timeout)
        self.difficulty = difficulty
        self.knob_values = gen.resolve_knobs(knobs, difficulty)
        self.max_commands = max_commands
        self.command_timeout = float(command_timeout)
        self.generator = ShellTaskGenerator()
        self.tools = [RUN, DONE]
        self._sandbox: LocalSandbox | None = None
        self._problem: ShellProblem | None = None
        self._steps = 0
        self._commands = 0
        self._done = False
        self._verdict: CheckResult | None = None

    async def reset(self, task: TaskSpec) -> tuple[str, dict[str, Any]]:
        """Fresh sandbox with the task's files; the prompt states the goal."""
        await self.close()
        self._problem = problem = materialize(task)
        self._steps = self._commands = 0
        self._done = False
        self._verdict = None
        self._sandbox = LocalSandbox()
        for path, text in problem.files.items():
            await self._sandbox.write_file(path, text)
        text = (f"You are in a shell, in a directory containing:\n{_listing(problem)}\n\n"
                f"Task: {problem.goal}\n\n"
                "Run bash commands with the `run` tool (or reply with a ```bash code block); "
                "each returns its exit code, stdout and stderr. Call `done` when the task is "
                f"complete. You can run at most {self.max_commands} commands.")
        return text, {"task_id": task.id, "family": problem.family,
                      "commands_left": self.max_commands}

    @staticmethod
    def action_error(action: Action) -> str | None:
        """Why ``action`` is invalid, or ``None``."""
        if action.tool == DONE.name:
            return None
        if action.tool != RUN.name:
            return f"Unknown tool {action.tool!r}. Use `run(command)` or `done()`."
        command = action.arguments.get("command")
        if not isinstance(command, str):
            return "`run` needs the argument `command`: a bash command as a string."
        if not command.strip():
            return "`command` is empty. Give a bash command to run."
        return None

    async def step(self, action: Action) -> StepResult:
        if self._problem is None or self._sandbox is None:
            raise RuntimeError("ShellEnv.step called before reset")
        index = self._steps
        self._steps += 1
        left = self.max_commands - self._commands
        if self._done:
            return StepResult(observation="The episode is over.", terminated=True,
                              info={"invalid": True})
        why = self.action_error(action)
        if why is not None:
            return StepResult(observation=why,
                              info={"invalid": True, "reason": why, "commands_left": left})
        if action.tool == DONE.name:
            return await self._finish("Done.", {})
        command = action.arguments["command"]
        result = await self._sandbox.exec(["bash", "-c", command], timeout=self.command_timeout)
        self._commands += 1
        self._verdict = None
        code = "none (timed out)" if result.timed_out else str(result.returncode)
        obs = f"exit code: {code}\nstdout:\n{_clip(result.stdout)}\nstderr:\n{_clip(result.stderr)}"
        if result.timed_out:
            obs += f"\nThe command was killed after {self.command_timeout:g} seconds."
        if result.truncated:
            obs += "\n(output truncated)"
        info = {"exit_code": result.returncode, "timed_out": result.timed_out,
                "commands": self._commands, "commands_left": self.max_commands - self._commands}
        feedback = [Feedback(
            source="execution", name="exit_code",
            value=-1 if result.returncode is None else result.returncode, rationale=obs,
            author="env:shell", target=FeedbackTarget(kind="step", step_index=index))]
        if self._commands >= self.max_commands:
            done = await self._finish(obs + "\n\nNo commands left; the directory is checked.", info)
            done.feedback = feedback
            return done
        return StepResult(observation=obs, info=info, feedback=feedback)

    async def _finish(self, text: str, info: dict[str, Any]) -> StepResult:
        self._done = True
        outcome = await self.outcome()
        verdict = "The task is complete." if outcome.success else "The task is not complete."
        return StepResult(observation=f"{text}\n{verdict}", reward=outcome.reward,
                          terminated=True, info={**info, "success": outcome.success})

    async def outcome(self) -> Outcome:
        """The hidden checks on the current workdir (cached until the next command)."""
        components = {"checks_passed": 0.0, "checks_total": 0.0, "commands": float(self._commands)}
        if self._problem is None or self._sandbox is None:
            return Outcome(success=False, reward=0.0, evidence="no episode",
                           components=components)
        if self._verdict is None:
            self._verdict = await run_checks(self._sandbox, self._problem)
        v = self._verdict
        components.update(checks_passed=float(v.passed), checks_total=float(v.total))
        return Outcome(success=v.success, reward=1.0 if v.success else 0.0,
                       components=components, evidence=v.text())

    def stage(self, action: Action) -> str | None:
        """``done``: verify; ``run``: its command's stage (:func:`.stages.command_stage`)."""
        if action.tool == DONE.name:
            return "verify"
        command = action.arguments.get("command")
        if action.tool != RUN.name or not isinstance(command, str):
            return None
        return command_stage(command)

    def reference_actions(self, task: TaskSpec) -> list[Action]:
        """The reference bash commands, then ``done`` (the ``reference`` agent's plan)."""
        problem = materialize(task)
        return [Action(tool="run", arguments={"command": c}) for c in problem.reference] + [
            Action(tool="done", arguments={})]

    async def close(self) -> None:
        if self._sandbox is not None:
            await self._sandbox.close()
            self._sandbox = None


@register("verifier", "shell")
class ShellVerifier(BaseVerifier):
    """Re-scores a stored shell trajectory offline: replays its valid actions (``run``
    commands, up to ``done`` or ``max_commands``) in a fresh sandbox and runs the hidden
    checks. Takes the env's arguments. Commands whose effect depends on time or randomness
    may replay differently."""

    def __init__(self, difficulty: str = "easy", knobs: dict[str, Any] | None = None,
                 max_commands: int = 10, command_timeout: float = 5.0) -> None:
        self.args: dict[str, Any] = {"difficulty": difficulty, "knobs": knobs,
                                     "max_commands": max_commands, "command_timeout": command_timeout}

    async def score(self, trajectory: Trajectory) -> Outcome:
        env = ShellEnv(**self.args)
        try:
            await env.reset(trajectory.task)
            for step in trajectory.steps:
                if step.action is None or env.action_error(step.action) is not None:
                    continue
                result = await env.step(step.action)
                if result.terminated:
                    break
            return await env.outcome()
        finally:
            await env.close()
