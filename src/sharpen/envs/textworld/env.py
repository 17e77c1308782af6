"""TextWorldEnv: an ALFWorld-style household text game, procedural and pure Python.

The agent is told its goal (e.g. "put a hot apple on countertop 1") and what it sees; it
acts by typing commands through one tool, ``act(command)``. Worlds come from
:mod:`sharpen.envs.textworld.generate`, the command language from
:mod:`sharpen.envs.textworld.parse`, the rules from :mod:`sharpen.envs.textworld.rules`,
the walkthrough from :mod:`sharpen.envs.textworld.solver`. Every step's ``info`` carries the
admissible commands (``info["admissible"]``) for agents that want them; the observation shows
them only when ``show_admissible`` is set — the game never requires them.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sharpen.core.errors import UserError
from sharpen.core.messages import ToolSpec
from sharpen.core.outcome import Outcome
from sharpen.core.registry import register
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action
from sharpen.envs import generation
from sharpen.envs.args import positive_int
from sharpen.envs.base import StepResult
from sharpen.envs.textworld import generate as gen
from sharpen.envs.textworld import rules
from sharpen.envs.textworld.episode import ARGUMENT, TOOL, Episode, default_max_steps
from sharpen.envs.textworld.parse import COMMAND_HELP, Command, parse
from sharpen.envs.textworld.perturb import PERTURBATIONS
from sharpen.envs.textworld.solver import solve
from sharpen.envs.textworld.world import World

ACT = ToolSpec(
    name=TOOL,
    description=("Type one command into the text game, e.g. 'go north', 'open drawer 1', "
                 "'take apple 1 from countertop 1', 'put apple 1 in fridge 1', 'heat apple 1 "
                 "with microwave 1', 'clean mug 1 with sink 1', 'look', 'inventory', "
                 "'examine drawer 1'."),
    parameters={
        "type": "object",
        "properties": {ARGUMENT: {"type": "string", "description": "one game command"}},
        "required": [ARGUMENT],
    },
    text_argument=ARGUMENT,
    text_hint="To act, reply with one game command (for example: open drawer 1) in a ``` block",
)
"""The one tool of the textworld environment."""

DESCRIPTION = (
    "ALFWorld-style household text game, generated procedurally: rooms joined by doors, "
    "containers to open, objects to find, heat, clean and place. Goal families: "
    "pick_and_place, heat, clean, find, put_two. One tool, act(command), takes text commands "
    "('open drawer 1', 'put apple 1 in fridge 1'); admissible commands are in each step's "
    "info. Success = the goal state is reached. Knobs: rooms, distractors, goal depth, family."
)


def _plan(task: TaskSpec) -> tuple[World, list[str]]:
    world = gen.world_of(task)
    plan = solve(world)
    if plan is None:  # pragma: no cover - impossible by construction
        raise RuntimeError(f"textworld task {task.id} has no walkthrough")
    return world, plan


def new_episode(task: TaskSpec, max_steps: int | None) -> Episode:
    """A fresh episode on ``task``'s regenerated world (the env and the verifier share it)."""
    world, plan = _plan(task)
    return Episode(world=world, walkthrough=len(plan),
                   max_steps=max_steps or default_max_steps(len(plan)))


@register("env", "textworld")
class TextWorldEnv(generation.GeneratedEnv):
    """The textworld environment. Constructor args are its serialisable ``{name, args}``:

    - ``difficulty``: preset (``easy``, ``medium``, ``hard``) of the tasks :meth:`list_tasks`
      offers (``reset`` accepts a task at any knobs);
    - ``knobs``: overrides of the preset's knobs;
    - ``max_steps``: turns (valid or not) allowed per episode; default three times the
      task's walkthrough length plus 10;
    - ``show_admissible``: also list the admissible commands in every observation (they are
      always in ``info["admissible"]``).
    """

    ENV_NAME = "textworld"
    DESCRIPTION = DESCRIPTION
    perturbations = PERTURBATIONS
    """Declared perturbations (:mod:`sharpen.envs.textworld.perturb`)."""
    stages: ClassVar[dict[str, str]] = {
        **dict.fromkeys(("look", "inventory", "go", "examine", "open", "close"), "explore"),
        **dict.fromkeys(("take", "put", "heat", "clean"), "manipulate")}
    """By the command's verb (:mod:`.parse`): explore (moving, looking, opening and closing
    containers to see inside), manipulate (taking, placing, heating, cleaning objects)."""

    def __init__(
        self, difficulty: str = "easy", knobs: dict[str, Any] | None = None,
        max_steps: int | None = None, show_admissible: bool = False,
    ) -> None:
        self.difficulty = difficulty
        self.knob_values = gen.resolve_knobs(knobs, difficulty)
        self.max_steps = None if max_steps is None else positive_int("max_steps", max_steps)
        if not isinstance(show_admissible, bool):
            raise UserError(f"show_admissible must be true or false, got {show_admissible!r}",
                            "set show_admissible to true or false, or leave it out")
        self.show_admissible = show_admissible
        self.generator = gen.TextWorldTaskGenerator()
        self.tools = [ACT]
        self._episode: Episode | None = None

    def _admissible(self, ep: Episode) -> list[str]:
        return rules.admissible(ep.world, ep.state)

    def _with_admissible(self, text: str, admissible: list[str]) -> str:
        if not self.show_admissible:
            return text
        return f"{text}\nAdmissible commands: {', '.join(admissible)}."

    async def reset(self, task: TaskSpec) -> tuple[str, dict[str, Any]]:
        """Start an episode on ``task``: the prompt, and info ``goal``, ``room``,
        ``max_steps`` and ``admissible``."""
        ep = self._episode = new_episode(task, self.max_steps)
        world = ep.world
        goal = world.goal.text(world)
        admissible = self._admissible(ep)
        text = (
            f"You are in a house. Your task is to: {goal}.\n\n"
            f"{rules.describe_room(world, ep.state)}\n\n"
            f"{COMMAND_HELP} You have {ep.max_steps} turns.\n"
            "Reply with one command per turn in a code block, e.g.\n```\nlook\n```"
        )
        return self._with_admissible(text, admissible), {
            "goal": goal, "room": ep.state.room, "max_steps": ep.max_steps,
            "admissible": admissible}

    async def step(self, action: Action) -> StepResult:
        """Apply one action (see :mod:`sharpen.envs.textworld.episode`)."""
        ep = self._episode
        if ep is None:
            raise RuntimeError("TextWorldEnv.step called before reset")
        if ep.done:
            return StepResult(observation="The episode is over; no more commands are accepted.",
                              terminated=ep.solved, truncated=not ep.solved,
                              info={"invalid": True, "reason": "episode over", "admissible": []})
        r = ep.apply(action)
        truncated = ep.done and not ep.solved
        admissible = [] if ep.done else self._admissible(ep)
        info: dict[str, Any] = {"room": ep.state.room, "turns": ep.turns,
                                "turns_left": ep.max_steps - ep.turns,
                                "goal_reached": ep.solved, "admissible": admissible}
        text = r["message"]
        if r["invalid"] is not None:
            info.update(invalid=True, reason=r["invalid"])
        if truncated:
            text += "\nNo turns left."
        elif not ep.solved:
            text = self._with_admissible(text, admissible)
        return StepResult(observation=text, reward=r["reward"], terminated=ep.solved,
                          truncated=truncated, info=info)

    async def outcome(self) -> Outcome:
        """The verdict so far (see :meth:`Episode.outcome`); before any reset, a failure."""
        if self._episode is None:
            return Outcome(success=False, evidence="no episode")
        return self._episode.outcome()

    def stage(self, action: Action) -> str | None:
        """The stage of the ``act`` command's verb; ``None`` for a command that does not
        parse (or another tool)."""
        command = action.arguments.get(ARGUMENT)
        if action.tool != TOOL or not isinstance(command, str):
            return None
        parsed = parse(command)
        return self.stages.get(parsed.verb) if isinstance(parsed, Command) else None

    def reference_actions(self, task: TaskSpec) -> list[Action] | None:
        """The BFS walkthrough as ``act`` actions (the hook the ``reference`` agent plays),
        or ``None`` if the goal is unreachable."""
        plan = solve(gen.world_of(task))
        if plan is None:
            return None
        return [Action(tool=TOOL, arguments={ARGUMENT: c}) for c in plan]

    async def close(self) -> None:
        """Nothing to release."""
        self._episode = None
