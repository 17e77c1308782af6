"""ToolshopEnv: customer service over a stateful SQLite shop (tau-bench-shaped tool use).

One episode = one generated task (:mod:`sharpen.envs.toolshop.goals`). At reset the task's
shop is written to a fresh SQLite file in a temporary directory; the agent gets the shop's
policy and the customer's request, and acts only through the tools
(:mod:`sharpen.envs.toolshop.tools`). The rules of an episode — schema checks, the shop's
refusals, the expected state, collateral-damage feedback, the outcome — are in
:mod:`sharpen.envs.toolshop.episode`, shared with :class:`ToolshopVerifier`.

Single-instruction mode (the default): the request holds everything the agent needs.
With ``user`` (a model ``{name, args}``) a simulated customer (:mod:`.user`) holds the goal
and the private facts; the agent gets its first message and talks to it with ``respond``.
With ``tools: simulated`` (and ``tool_model``) a model answers the tool calls instead of the
database, which still keeps the real state the verdict is on (:mod:`.simulation`).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any, ClassVar

from sharpen.core.errors import UserError
from sharpen.core.outcome import Outcome
from sharpen.core.registry import REGISTRY, PluginRef, register
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action
from sharpen.envs import generation
from sharpen.envs.args import positive_int
from sharpen.envs.base import EnvInfo, StepResult
from sharpen.envs.perturbation import perturbed_of, rng_of
from sharpen.envs.simulated.tools import TOOL_PROMPTS, ToolSimError, ToolSimulator
from sharpen.envs.toolshop import generator as gen
from sharpen.envs.toolshop import simulation
from sharpen.envs.toolshop import user as sim
from sharpen.envs.toolshop.episode import Episode, StepReport
from sharpen.envs.toolshop.perturb import PERTURBATIONS, tool_order
from sharpen.envs.toolshop.tools import READ_TOOLS, TOOLS, WRITE_TOOLS
from sharpen.models.base import MODEL, ChatModel

DESCRIPTION = (
    "Customer service for an online shop over a stateful SQLite database (customers, "
    "payment methods, products, orders, returns), tau-bench style: look up customers and "
    "orders, cancel, return, exchange, change addresses, under the shop's rules. Tool "
    "arguments are checked against JSON Schemas. Success: the final database state equals "
    "the state the reference actions give; rows changed that should not be are reported as "
    "safety feedback. Optional LLM-simulated customer (env arg user) and LLM-simulated tools "
    "(env args tools=simulated, tool_model)."
)

POLICY = (
    "You are the customer-service agent of an online shop. You act only through the tools; "
    "each tool answers in JSON.\n\nShop policy:\n"
    "- Only pending orders can be cancelled, with the reason 'no longer needed' or 'ordered "
    "by mistake'.\n"
    "- Only delivered orders can have items returned or exchanged, once per order.\n"
    "- A refund goes to the order's payment method or to the customer's gift card.\n"
    "- An item can be exchanged only for an available item of the same product; the price "
    "difference is paid with a payment method of the customer.\n"
    "- Change only what the customer asks for. Call finish when the request is done."
)

USER_FAILED = "[The simulated customer failed to start the conversation:"
"""Start of the first observation when the simulated customer fails at once (the verifier
reads it back from the stored conversation)."""

DEFAULT_USER_PARAMS = {"temperature": 0.0, "max_tokens": 128}


def _model_ref(value: dict[str, Any] | None, arg: str) -> PluginRef | None:
    try:
        return PluginRef.model_validate(value) if value is not None else None
    except ValueError:
        raise UserError(f"{arg} must be a model {{name, args}}, got {value!r}",
                        f"e.g. -E '{arg}={{name: local}}'") from None


def tool_sim_id(tools: str, tool_model: dict[str, Any] | None, version: str) -> str | None:
    """The tool simulator's prompt id when ``tools`` is ``simulated`` (``None`` for real
    tools); a :class:`UserError` for an unknown mode or version, or a missing model."""
    if tools not in simulation.TOOL_MODES:
        raise UserError(f"unknown tools {tools!r}", "use tools=real or tools=simulated")
    if tools == "real":
        return None
    if tool_model is None:
        raise UserError("tools=simulated needs the model that answers the calls",
                        "e.g. -E tools=simulated -E 'tool_model={name: local}'")
    if version not in TOOL_PROMPTS:
        raise UserError(f"unknown tool_sim_version {version!r}",
                        f"use one of {', '.join(map(repr, TOOL_PROMPTS))}")
    return TOOL_PROMPTS[version].id


@register("env", "toolshop")
class ToolshopEnv(generation.GeneratedEnv):
    """The toolshop environment. Constructor args are its serialisable ``{name, args}``:

    - ``difficulty``: preset (``easy``, ``medium``, ``hard``) of the tasks :meth:`list_tasks`
      offers (``reset`` accepts a task at any knobs);
    - ``knobs``: overrides of the preset's knobs;
    - ``max_actions``: tool calls (valid or not) per episode before it is truncated;
    - ``user``: ``{name, args}`` of the model that plays the customer (default: none, the
      single-instruction mode);
    - ``user_prompt_version``: version of the customer's prompt (:data:`.user.USER_PROMPTS`);
    - ``user_params``: the customer model's sampling params;
    - ``tools``: ``real`` (the default: the database answers) or ``simulated`` (``tool_model``
      answers, :mod:`.simulation`); ``tool_sim_version`` (:data:`TOOL_PROMPTS`) and
      ``tool_params`` (its sampling params) go with it.
    """

    ENV_NAME = gen.ENV_NAME
    DESCRIPTION = DESCRIPTION
    perturbations = PERTURBATIONS
    """Declared perturbations (:mod:`sharpen.envs.toolshop.perturb`)."""
    stages: ClassVar[dict[str, str]] = {
        **{t.name: "look up" for t in READ_TOOLS}, **{t.name: "act" for t in WRITE_TOOLS},
        **{t.name: "reply" for t in TOOLS if t not in READ_TOOLS and t not in WRITE_TOOLS}}
    """look up (the read tools), act (the tools that change the database), reply
    (``respond``, ``transfer_to_human``, ``finish``)."""

    def __init__(self, difficulty: str = "easy", knobs: dict[str, Any] | None = None,
                 max_actions: int = 30, user: dict[str, Any] | None = None,
                 user_prompt_version: str = sim.DEFAULT_VERSION,
                 user_params: dict[str, Any] | None = None, tools: str = "real",
                 tool_model: dict[str, Any] | None = None, tool_sim_version: str = "1",
                 tool_params: dict[str, Any] | None = None) -> None:
        positive_int("max_actions", max_actions)
        self.difficulty = difficulty
        self.knob_values = gen.resolve_knobs(knobs, difficulty)
        self.max_actions = max_actions
        self.user_ref = _model_ref(user, "user")
        self.tool_ref = _model_ref(tool_model, "tool_model")
        self.tool_sim = tool_sim_id(tools, tool_model, tool_sim_version)
        self.tool_sim_version = tool_sim_version
        self.tool_params = tool_params
        self.user_prompt_version = sim.check_version(user_prompt_version)
        self.user_params = dict(DEFAULT_USER_PARAMS if user_params is None else user_params)
        self.generator = gen.ToolshopTaskGenerator()
        self.tools = list(TOOLS)
        self._episode: Episode | None = None
        self._dir: Path | None = None
        self._user_model: ChatModel | None = None
        self._user: sim.SimulatedUser | None = None
        self._tool_model: ChatModel | None = None
        self._tools: ToolSimulator | None = None
        self._heard: list[str] = []
        """What the customer said since the last simulated call (the simulator's context)."""
        self._index = 0

    async def reset(self, task: TaskSpec) -> tuple[str, dict[str, Any]]:
        """Write the task's shop to a fresh SQLite file and state the request (or, with a
        simulated customer, its first message). Info: ``task_id``, ``kinds``, ``db_path``,
        ``user_prompt`` (with a customer), ``tool_sim`` (with simulated tools)."""
        if task.env != gen.ENV_NAME:
            raise UserError(f"task {task.id!r} belongs to env {task.env!r}, not 'toolshop'",
                            "run it with its own environment")
        await self._close_episode()
        shop = gen.shop_of(task)
        variant = perturbed_of(task)
        self.tools = (tool_order(list(TOOLS), rng_of(variant))
                      if variant is not None and variant.name == "tool_order" else list(TOOLS))
        self._dir = Path(tempfile.mkdtemp(prefix="sharpen-toolshop-"))
        db = self._dir / "shop.db"
        self._episode = Episode(shop, db, self.max_actions, user=self.user_ref is not None,
                                tool_sim=self.tool_sim)
        self._index = 0
        self._heard = []
        info: dict[str, Any] = {"task_id": task.id, "kinds": list(shop.kinds), "db_path": str(db)}
        if self.tool_ref is not None and self.tool_sim is not None:
            if self._tool_model is None:
                self._tool_model = REGISTRY.create(MODEL, self.tool_ref)
            self._tools = simulation.simulator(self._tool_model, shop, self.tool_sim_version,
                                               self.tool_params, task.seed)
            info["tool_sim"] = self.tool_sim
        if self.user_ref is None:
            return f"{POLICY}\n\nThe customer's request:\n{shop.instruction}", info
        if self._user_model is None:
            self._user_model = REGISTRY.create(MODEL, self.user_ref)
        self._user = sim.SimulatedUser(self._user_model, shop.instruction,
                                       self.user_prompt_version, self.user_params, task.seed)
        info["user_prompt"] = sim.prompt_id(self.user_prompt_version)
        turn = await self._user.start()
        if turn.error is not None:
            self._episode.fail_user(turn.error)
            return f"{USER_FAILED} {turn.error}]", info
        self._heard.append(f"The customer said: {turn.text}")
        return (f"{POLICY}\n\nA customer is writing to you. Talk to them with respond: ask for "
                "what you need (name and zip code or email, which order, ...).\n\n"
                f"Customer: {turn.text}"), info

    async def step(self, action: Action) -> StepResult:
        """Apply one action (see :mod:`sharpen.envs.toolshop.episode`)."""
        ep = self._episode
        if ep is None:
            raise RuntimeError("ToolshopEnv.step called before reset")
        index, self._index = self._index, self._index + 1
        report = ep.apply(action, index)
        if report.message is not None:
            assert self._user is not None
            turn = await self._user.reply(report.message)
            if turn.text:
                self._heard.append(f"The customer said: {turn.text}")
            reply = ep.user_turn(turn, index)
            reply.feedback = report.feedback + reply.feedback
            report = reply
        elif report.simulate:
            report = await self._simulate(ep, action, report, index)
        return StepResult(observation=report.observation, reward=0.0, terminated=report.terminated,
                          truncated=report.truncated, info=report.info, feedback=report.feedback)

    async def _simulate(self, ep: Episode, action: Action, real: StepReport,
                        index: int) -> StepReport:
        """The step of a call answered by the tool simulator (``real``: the database's)."""
        assert self._tools is not None
        context, self._heard = "\n".join(self._heard), []
        try:
            value = await self._tools.answer(action.tool, action.arguments, context)
        except ToolSimError as exc:
            return ep.simulation_failed(real, str(exc))
        return ep.simulated_result(real, value, index)

    async def outcome(self) -> Outcome:
        """The verdict so far (see :meth:`Episode.outcome`); before any reset, a failure."""
        if self._episode is None:
            return Outcome(success=False, evidence="no episode")
        out = self._episode.outcome()
        if self.user_ref is not None:
            out.evidence += f"; simulated customer prompt {sim.prompt_id(self.user_prompt_version)}"
        return out

    def describe(self) -> EnvInfo:
        """What :class:`~sharpen.envs.generation.GeneratedEnv` shows; with a simulated customer
        or simulated tools an episode is not replayable (a model answers)."""
        return super().describe().played_by_models({
            "a model plays the customer": self.user_ref is not None,
            "a model answers the tools": self.tool_sim is not None,
        })

    def reference_actions(self, task: TaskSpec) -> list[Action]:
        """The reference walkthrough of ``task`` (look-ups, writes, ``finish``): the hook the
        ``reference`` agent plays."""
        return [a.model_copy(deep=True) for a in gen.shop_of(task).reference]

    async def _close_episode(self) -> None:
        if self._episode is not None:
            self._episode.close()
            self._episode = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        self._user = None
        self._tools = None

    async def close(self) -> None:
        """Close and delete the episode's database; close the customer and tool models."""
        await self._close_episode()
        for model in (self._user_model, self._tool_model):
            if model is not None:
                await model.aclose()
        self._user_model = self._tool_model = None

    def list_tasks(self, split: str | None = None, limit: int | None = None,
                   seed: int = 0) -> list[TaskSpec]:
        """``limit`` (default 50) tasks at the env's knobs; the ``i``-th task of a split has
        the ``i``-th distinct index drawn from ``random.Random(seed)`` (a shorter list is a
        prefix of a longer one); ``split=None`` takes train, val and test tasks in turn. With
        a simulated customer, each task's metadata names its prompt (``user_prompt``); with
        simulated tools, the tool simulator's (``tool_sim``)."""
        tasks = super().list_tasks(split, limit, seed)
        extra: dict[str, Any] = {}
        if self.user_ref is not None:
            extra["user_prompt"] = sim.prompt_id(self.user_prompt_version)
        if self.tool_sim is not None:
            extra["tool_sim"] = self.tool_sim
        if not extra:
            return tasks
        return [t.model_copy(update={"metadata": {**t.metadata, **extra}}) for t in tasks]
