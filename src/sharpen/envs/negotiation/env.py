"""NegotiationEnv: haggle over the price of an item with a private valuation.

The agent plays the buyer or the seller (:mod:`sharpen.envs.negotiation.deal`) against a
scripted opponent (default) or a chat model (``opponent: {name, args}``; see
:mod:`sharpen.envs.negotiation.opponents`). Its tools are ``offer(price)``, ``accept()`` and
``walk_away()``; the rules are in :mod:`sharpen.envs.negotiation.episode`. An optional
critic (``critic: scripted`` or ``{name, args}``; :mod:`sharpen.envs.negotiation.critic`)
comments on the agent's offer between rounds, recorded as ``Feedback(source="critic")``.
Each step's ``info["opponent"]`` records the opponent's answer, so the verifier can re-score
a game against a model opponent offline.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sharpen.core.errors import UserError
from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.core.messages import ToolSpec
from sharpen.core.outcome import Outcome
from sharpen.core.registry import REGISTRY, PluginRef, register
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action
from sharpen.envs import generation
from sharpen.envs.base import EnvInfo, StepResult
from sharpen.envs.negotiation import deal as d
from sharpen.envs.negotiation.critic import ModelCritic, ScriptedCritic
from sharpen.envs.negotiation.episode import Episode, money
from sharpen.envs.negotiation.opponents import ModelOpponent, ScriptedOpponent
from sharpen.envs.negotiation.reference import reference_actions
from sharpen.models.base import MODEL

OFFER = ToolSpec(
    name="offer",
    description="Offer a price for the item. `price` is a number (e.g. 450); the other side "
                "accepts it or answers with a counter-offer.",
    parameters={"type": "object", "properties": {"price": {
        "type": "number", "minimum": 0, "description": "your offer, a number"}},
        "required": ["price"]},
    text_argument="price",
    text_hint="To make an offer, reply with just the price (a number such as 450) in a ``` block",
)
ACCEPT = ToolSpec(name="accept", description="Accept the other side's current offer: the deal "
                  "is closed at that price.", parameters={"type": "object", "properties": {}})
WALK_AWAY = ToolSpec(name="walk_away", description="Leave the negotiation without a deal.",
                     parameters={"type": "object", "properties": {}})

DESCRIPTION = (
    "Negotiate a price as buyer or seller with a private valuation, against a scripted "
    "opponent (boulware, conceder, linear or tit-for-tat) or another model. Success = a deal "
    "at a price that gives the agent at least a target share of the zone of possible "
    "agreement; reward = that share. An optional critic comments between rounds. Knobs: "
    "ZOPA width, opponent strategy, rounds, target share, role."
)


def model_ref(arg: str, value: Any, scripted_ok: bool = True) -> PluginRef | None:
    """``None`` for the scripted default, else the ``{name, args}`` of a model."""
    if value is None or (scripted_ok and value == "scripted"):
        return None
    if isinstance(value, dict) and isinstance(value.get("name"), str):
        return PluginRef.model_validate(value)
    raise UserError(f"{arg} must be 'scripted' or a model {{name, args}}, got {value!r}",
                    f"set {arg}: scripted, or e.g. {arg}: {{name: local}}")


@register("env", "negotiation")
class NegotiationEnv(generation.GeneratedEnv):
    """The negotiation environment. Constructor args are its serialisable ``{name, args}``:

    - ``difficulty``: preset (``easy``, ``medium``, ``hard``) of the tasks :meth:`list_tasks`
      offers (``reset`` accepts a task at any knobs);
    - ``knobs``: overrides of the preset's knobs;
    - ``opponent``: ``scripted`` (default) or a model ``{name, args}`` for agent vs agent;
    - ``critic``: ``None`` (default: no critic), ``scripted``, or a model ``{name, args}``.
    """

    ENV_NAME = "negotiation"
    DESCRIPTION = DESCRIPTION
    stages: ClassVar[dict[str, str]] = {"offer": "bargain", "accept": "close",
                                        "walk_away": "close"}
    """bargain (offers), close (accepting the other side's offer, or walking away)."""

    def __init__(
        self, difficulty: str = "easy", knobs: dict[str, Any] | None = None,
        opponent: str | dict[str, Any] = "scripted", critic: str | dict[str, Any] | None = None,
    ) -> None:
        self.difficulty = difficulty
        self.knob_values = d.resolve_knobs(knobs, difficulty)
        self.opponent_ref = model_ref("opponent", opponent)
        self.critic_ref = model_ref("critic", critic)
        self.critic_kind = "none" if critic is None else "scripted" if self.critic_ref is None \
            else "model"
        self.generator = d.NegotiationTaskGenerator()
        self.tools = [OFFER, ACCEPT, WALK_AWAY]
        self._episode: Episode | None = None
        self._opponent: Any = ScriptedOpponent()
        self._critic: Any = None
        self._models: list[Any] = []
        self._steps = 0

    def _model(self, ref: PluginRef) -> Any:
        model = REGISTRY.create(MODEL, ref)
        self._models.append(model)
        return model

    async def reset(self, task: TaskSpec) -> tuple[str, dict[str, Any]]:
        """Start an episode on ``task``: the prompt, and info ``role``, ``value``,
        ``opening``, ``max_rounds``."""
        deal = d.deal_of(task)
        await self._close_models()
        self._episode, self._steps = Episode(deal), 0
        if self.opponent_ref is not None:
            self._opponent = ModelOpponent(self._model(self.opponent_ref), deal, task.seed)
        if self.critic_kind == "scripted":
            self._critic = ScriptedCritic()
        elif self.critic_ref is not None:
            self._critic = ModelCritic(self._model(self.critic_ref), deal, task.seed)
        other = deal.opponent_role
        if deal.role == "buyer":
            value = (f"The item is worth {money(deal.agent_value)} to you: paying more loses you "
                     "money, and every dollar below it is your gain.")
        else:
            value = (f"It cost you {money(deal.agent_value)}: selling for less loses you money, and "
                     "every dollar above it is your gain.")
        text = (
            f"You are the {deal.role} of {deal.item} (list price {money(deal.list_price)}), "
            f"negotiating with a {other}. {value} The {other} has a private limit too, which you "
            f"do not know.\nThe {other} opens at {money(deal.opening)}.\n"
            f"You have {deal.max_rounds} turns. Each turn do one of:\n"
            "- offer a price: reply with just the number in a code block, e.g.\n```\n"
            f"{deal.list_price}\n```\n"
            f'- accept the {other}\'s current offer: {{"tool": "accept", "arguments": {{}}}}\n'
            '- walk away without a deal: {"tool": "walk_away", "arguments": {}}\n'
            f"After your offer the {other} accepts it or counters. You succeed with a deal that "
            f"gives you at least {deal.target_share:.0%} of the gap between your value and the "
            f"{other}'s limit. Prices run from $0 to {money(deal.max_price)}."
        )
        return text, {"role": deal.role, "value": deal.agent_value, "opening": deal.opening,
                      "max_rounds": deal.max_rounds}

    async def step(self, action: Action) -> StepResult:
        """Apply one action (see :mod:`sharpen.envs.negotiation.episode`)."""
        ep = self._episode
        if ep is None:
            raise RuntimeError("NegotiationEnv.step called before reset")
        index, self._steps = self._steps, self._steps + 1
        if ep.done:
            return StepResult(observation="The negotiation is over; no more moves are accepted.",
                              terminated=ep.end != "deadline", truncated=ep.end == "deadline",
                              info={"invalid": True, "reason": "episode over"})
        deal, other = ep.deal, ep.deal.opponent_role
        r = ep.agent_turn(action)
        info: dict[str, Any] = {"turns": ep.turns, "turns_left": ep.turns_left}
        lines: list[str] = []
        feedback: list[Feedback] = []
        if r["invalid"] is not None:
            info.update(invalid=True, reason=r["invalid"])
            lines.append(r["invalid"])
        elif r["tool"] == "accept":
            lines.append(f"You accept the {other}'s offer of {money(ep.standing)}.")
        elif r["tool"] == "walk_away":
            lines.append("You walk away. No deal.")
        else:
            offer = r["price"]
            move = await self._opponent.respond(deal, ep, offer)
            info["offer"] = offer
            info["opponent"] = move.model_dump(mode="json", exclude_defaults=True)
            ep.opponent_turn(move)
            if ep.end == "deal":
                lines.append(f"The {other} accepts your offer of {money(offer)}.")
            elif ep.end == "opponent_walked":
                lines.append(f"The {other} rejects {money(offer)} and walks away. No deal.")
            elif ep.end == "error":
                info["error"] = ep.error
                lines.append(f"The {other} could not continue; the negotiation is stopped.")
            else:
                lines.append(f"You offered {money(offer)}. The {other} rejects it and counters "
                             f"at {money(ep.standing)}.")
                if self._critic is not None and not ep.done:
                    comment = await self._critic.comment(deal, ep)
                    if comment:
                        lines.append(f"Critic: {comment}")
                        feedback.append(Feedback(
                            source="critic", name="critique", value=comment,
                            author=self._critic.author,
                            rationale=f"on the offer of {money(offer)} at turn {ep.turns}",
                            target=FeedbackTarget(kind="step", step_index=index)))
        reward = 0.0
        if ep.end == "deal" and ep.price is not None:
            reward = ep.outcome().reward
            lines.append(f"Deal at {money(ep.price)}. Your value: {money(deal.agent_value)}.")
        elif ep.end == "deadline":
            lines.append(f"No turns left: the {other} leaves the table. No deal.")
        elif not ep.done:
            lines.append(f"The {other}'s offer stands at {money(ep.standing)}. Your value: "
                         f"{money(deal.agent_value)}. {ep.turns_left} of {deal.max_rounds} turns left.")
        return StepResult(observation="\n".join(lines), reward=reward,
                          terminated=ep.done and ep.end != "deadline",
                          truncated=ep.end == "deadline", info=info, feedback=feedback)

    async def outcome(self) -> Outcome:
        """The verdict so far (see :meth:`Episode.outcome`); before any reset, a failure."""
        if self._episode is None:
            return Outcome(success=False, evidence="no episode")
        return self._episode.outcome()

    def describe(self) -> EnvInfo:
        """What :class:`~sharpen.envs.generation.GeneratedEnv` shows; against a model opponent
        or with a model critic an episode is not replayable (a model answers)."""
        return super().describe().played_by_models({
            "a model plays the opponent": self.opponent_ref is not None,
            "a model critic comments": self.critic_ref is not None,
        })

    def reference_actions(self, task: TaskSpec) -> list[Action] | None:
        """A fixed offer sequence that succeeds against the scripted opponent (the hook the
        ``reference`` agent plays); see :mod:`sharpen.envs.negotiation.reference`."""
        return reference_actions(d.deal_of(task))

    async def _close_models(self) -> None:
        for model in self._models:
            await model.aclose()
        self._models = []
        self._opponent, self._critic = ScriptedOpponent(), None

    async def close(self) -> None:
        """Close the opponent and critic models, if any."""
        await self._close_models()
        self._episode = None
