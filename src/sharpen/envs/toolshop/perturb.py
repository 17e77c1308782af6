"""The toolshop environment's declared perturbations, applied where a shop is materialised.

- ``paraphrase`` — the customer's request opens with another lead-in; what it asks is
  unchanged.
- ``tool_order`` — the agent is offered the same tools in another order (the env's
  ``tools`` after ``reset``; :func:`tool_order`).
- ``tool_failure`` — one tool the reference walkthrough uses is down for its first call: that
  call answers a transient error and changes nothing, and the same call made again works
  (an outage with a retry as the backup path). The shop's :attr:`Shop.outage` names the
  tool, so the live episode and the verifier's replay fail the same call; the reference
  walkthrough retries it.

The database, the goal and the expected state are the original's, so the verifier's verdict
means the same thing on a variant.
"""

from __future__ import annotations

import random
from dataclasses import replace

from sharpen.core.messages import ToolSpec
from sharpen.envs.toolshop.tools import ENDINGS, RESPOND
from sharpen.envs.toolshop.world import Shop

PERTURBATIONS: dict[str, str] = {
    "paraphrase": "the customer's request opens with another lead-in",
    "tool_order": "the same tools are offered in another order",
    "tool_failure": "one tool the task needs fails once with a transient error; a retry works",
}
"""Name -> what it changes (``ToolshopEnv.perturbations``)."""

OUTAGE_ERROR = ("Error: the {tool} service is temporarily unavailable (timed out). Nothing was "
                "changed; try the call again.")
"""What the failing call answers."""

_LEADS = (
    "Hello, I hope you can help me today. {text}",
    "Hi there, sorry to bother you. {text}",
    "Good morning. I have a request about my account. {text}",
)


def perturb_shop(shop: Shop, name: str, rng: random.Random) -> Shop:
    """``shop`` under perturbation ``name`` (``tool_order`` changes nothing here)."""
    if name == "paraphrase":
        return replace(shop, instruction=rng.choice(_LEADS).format(text=shop.instruction))
    if name == "tool_order":
        return shop
    if name == "tool_failure":
        used = list(dict.fromkeys(a.tool for a in shop.reference
                                  if a.tool not in ENDINGS and a.tool != RESPOND.name))
        tool = rng.choice(used)
        first = next(i for i, a in enumerate(shop.reference) if a.tool == tool)
        retry = shop.reference[first].model_copy(deep=True)
        reference = (*shop.reference[:first + 1], retry, *shop.reference[first + 1:])
        return replace(shop, outage=tool, reference=reference)
    raise ValueError(f"unknown toolshop perturbation {name!r}")


def tool_order(tools: list[ToolSpec], rng: random.Random) -> list[ToolSpec]:
    """``tools`` in another order (a different one whenever there are two or more)."""
    out = list(tools)
    while len(out) > 1 and out == tools:
        rng.shuffle(out)
    return out
