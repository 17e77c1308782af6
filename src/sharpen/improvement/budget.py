"""Budgets of an improvement run: rollouts, tokens and dollars, with a preflight estimate.

Every rollout the engine runs (minibatch gates, validation) and every proposer call is
charged to one :class:`Spend`. A rollout is one environment episode: an agent that retries on
a freshly reset environment (``reflexion``) spends one per attempt. The engine starts an
iteration only when the budget can still afford its minibatch pair at one episode per task,
so a run overshoots by at most one validation pass — or, for a child that retries, by up to
its trials times its gate and validation. The held-out test split is scored outside the
budget.
"""

from __future__ import annotations

from pydantic import BaseModel

from sharpen.core.errors import UserError
from sharpen.core.messages import Usage


class Budget(BaseModel):
    """Limits of one improvement run; ``None`` means no limit on that axis (at least one
    axis must be limited)."""

    rollouts: int | None = 200
    """Episodes run on train and val (gates and validation), test excluded."""
    tokens: int | None = None
    """Tokens (input + output) of rollouts, proposer calls and an objective's judge together."""
    usd: float | None = None
    """Dollars of rollouts and proposer calls (calls of unknown price count as 0 here and
    are reported as unknown)."""

    def describe(self) -> str:
        """The limits in words, e.g. ``120 rollouts · 50,000 tokens · $2``."""
        parts = [f"{self.rollouts} rollouts" if self.rollouts is not None else "",
                 f"{self.tokens:,} tokens" if self.tokens is not None else "",
                 f"${self.usd:g}" if self.usd is not None else ""]
        return " · ".join(p for p in parts if p)

    def check(self) -> None:
        """A :class:`UserError` for a budget that limits nothing or is not positive."""
        if self.rollouts is None and self.tokens is None and self.usd is None:
            raise UserError("the improvement budget limits nothing",
                            "set --budget-rollouts, --budget-tokens or --budget-usd")
        for name, value in (("rollouts", self.rollouts), ("tokens", self.tokens), ("usd", self.usd)):
            if value is not None and value <= 0:
                raise UserError(f"budget {name} must be positive, got {value}",
                                f"set --budget-{name} to a positive number")


class Spend(BaseModel):
    """What a run has used so far."""

    rollouts: int = 0
    """Episodes run (train minibatches and validation)."""
    rollout_usage: Usage = Usage()
    """Tokens and cost of those episodes."""
    proposer_usage: Usage = Usage()
    """Tokens and cost of proposer calls (including invalid proposals)."""
    judge_usage: Usage = Usage()
    """Tokens and cost of the objective's judge on train and val (none for ``success``)."""

    @property
    def tokens(self) -> int:
        """All tokens: rollouts, proposers and the objective's judge."""
        return (self.rollout_usage.total_tokens + self.proposer_usage.total_tokens
                + self.judge_usage.total_tokens)

    @property
    def usd(self) -> float:
        """Known dollars: rollouts, proposers and the objective's judge."""
        return ((self.rollout_usage.cost_usd or 0.0) + (self.proposer_usage.cost_usd or 0.0)
                + (self.judge_usage.cost_usd or 0.0))

    @property
    def cost_unknown(self) -> bool:
        """Whether some call had no known price."""
        return (self.rollout_usage.cost_usd is None or self.proposer_usage.cost_usd is None
                or self.judge_usage.cost_usd is None)

    def exhausted(self, budget: Budget, next_rollouts: int = 0) -> str | None:
        """Why ``budget`` cannot afford ``next_rollouts`` more episodes, or ``None``."""
        if budget.rollouts is not None and self.rollouts + next_rollouts > budget.rollouts:
            # Say why a run stops with rollouts left: the next gate would not fit.
            need = f"; a gate takes about {next_rollouts}" if self.rollouts < budget.rollouts else ""
            return f"rollout budget ({self.rollouts} of {budget.rollouts} used{need})"
        if budget.tokens is not None and self.tokens >= budget.tokens:
            return f"token budget ({self.tokens:,} of {budget.tokens:,} used)"
        if budget.usd is not None and self.usd >= budget.usd:
            return f"dollar budget (${self.usd:.4f} of ${budget.usd:g} used)"
        return None


def preflight(budget: Budget, *, val_size: int, minibatch: int, accept_rate: float = 0.3) -> str:
    """One line that says what ``budget`` buys: the seed's validation pass, then per
    proposal two minibatch evaluations and, for the accepted share, a validation pass.
    ``accept_rate`` is a planning guess, said as such."""
    if budget.rollouts is None:
        return "budget is in tokens or dollars: proposals are counted as they are spent"
    per_proposal = 2 * minibatch + accept_rate * val_size
    left = budget.rollouts - val_size
    n = max(0, int(left // per_proposal)) if per_proposal > 0 else 0
    return (f"this budget buys about {n} proposals ({budget.rollouts} rollouts: {val_size} to "
            f"validate the seed, then 2×{minibatch} per proposal plus {val_size} per accepted one, "
            f"assuming {accept_rate:.0%} are accepted and one episode per task; an agent that "
            f"retries spends one per attempt)")
