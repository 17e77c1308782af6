"""Simulated tools for toolshop (env arg ``tools: simulated``).

With simulated tools, every well-formed call of a read or write tool is answered by a
:class:`~sharpen.envs.simulated.tools.ToolSimulator` — a model shown the tool's schemas
(:data:`RESULT_SCHEMAS` gives each tool's result schema) and the customer's request — and
the agent sees only that answer. The call is still applied to the real SQLite shop, in the
shadow: the episode's state, the collateral-damage feedback and the verdict are the real
world's, so success means "the agent's actions, taken while seeing simulated results, would
have done the task in the real shop". The verdict is only as good as the simulation: a
simulator that invents a customer id leads the agent to write to an order that does not
exist, and the episode fails in the real shop.

Each simulated step's ``info["tool_sim"]`` holds the simulator's prompt id, the real
observation the agent did not see (``real``) and whether the two agree (``agrees``: equal
JSON, or both refusals) — a measure of the simulation's fidelity on this task, which the
outcome sums as components ``simulated_calls`` and ``simulated_agreed``. A simulator failure
ends the episode with ``error_kind="user_sim"``. Schema checks stay the environment's: an
invalid call is answered with the precise schema error, as with real tools.
"""

from __future__ import annotations

import json
from typing import Any

from sharpen.envs.simulated.tools import ToolSimulator, is_error
from sharpen.envs.toolshop import tools as t
from sharpen.envs.toolshop.world import Shop
from sharpen.models.base import ChatModel

TOOL_MODES = ("real", "simulated")

_NAME = {"type": "string", "minLength": 1, "maxLength": 40}
_MONEY = {"type": "number"}
_ADDRESS = {"type": "object", "properties": {"street": _NAME, "city": _NAME, "zip": t.ZIP},
            "required": ["street", "city", "zip"], "additionalProperties": False}
_OPTIONS = {"type": "object", "additionalProperties": {"type": "string", "maxLength": 20}}
_STATUS = {"type": "string", "enum": ["pending", "processed", "delivered", "cancelled",
                                      "return requested", "exchange requested"]}


def _object(properties: dict[str, Any], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties,
            "required": [k for k in properties if k not in optional], "additionalProperties": False}


def _list(items: dict[str, Any], most: int = 8) -> dict[str, Any]:
    return {"type": "array", "items": items, "maxItems": most}


RESULT_SCHEMAS: dict[str, dict[str, Any]] = {
    t.FIND_CUSTOMER.name: _object({
        "customer_id": t.CUSTOMER_ID, "name": _NAME, "email": t.EMAIL, "address": _ADDRESS,
        "payment_methods": _list(_object({"payment_method_id": t.PAYMENT_METHOD_ID,
                                          "kind": {"type": "string",
                                                   "enum": ["credit_card", "paypal", "gift_card"]},
                                          "label": _NAME, "balance": _MONEY}, ("balance",)), 3),
        "order_ids": _list(t.ORDER_ID)}),
    t.LIST_ORDERS.name: _list(_object({"order_id": t.ORDER_ID, "status": _STATUS,
                                       "products": _list(_NAME, 4), "total": _MONEY})),
    t.GET_ORDER.name: _object({
        "order_id": t.ORDER_ID, "customer_id": t.CUSTOMER_ID, "status": _STATUS,
        "payment_method_id": t.PAYMENT_METHOD_ID,
        "items": _list(_object({"item_id": t.ITEM_ID, "product_id": t.PRODUCT_ID,
                                "product": _NAME, "options": _OPTIONS, "price": _MONEY}), 4),
        "total": _MONEY, "cancel_reason": _NAME,
        "requests": _list(_object({"item_id": t.ITEM_ID, "kind": _NAME,
                                   "new_item_id": {"type": ["string", "null"]}}), 4)},
        ("cancel_reason", "requests")),
    t.GET_PRODUCT.name: _object({
        "product_id": t.PRODUCT_ID, "name": _NAME,
        "items": _list(_object({"item_id": t.ITEM_ID, "options": _OPTIONS, "price": _MONEY,
                                "available": {"type": "boolean"}}))}),
    t.CANCEL_ORDER.name: _object({"order_id": t.ORDER_ID, "status": {"const": "cancelled"},
                                  "refund": _MONEY, "refunded_to": t.PAYMENT_METHOD_ID}),
    t.RETURN_ITEMS.name: _object({"order_id": t.ORDER_ID, "status": {"const": "return requested"},
                                  "item_ids": _list(t.ITEM_ID, 4), "refund": _MONEY,
                                  "refund_to": t.PAYMENT_METHOD_ID}),
    t.EXCHANGE_ITEMS.name: _object({"order_id": t.ORDER_ID,
                                    "status": {"const": "exchange requested"},
                                    "price_difference": _MONEY,
                                    "paid_with": t.PAYMENT_METHOD_ID}),
    t.UPDATE_ADDRESS.name: _object({"customer_id": t.CUSTOMER_ID, "address": _ADDRESS}),
}
"""The JSON Schema of each read and write tool's result (what :mod:`.actions` returns)."""

SIMULATED = frozenset(RESULT_SCHEMAS)
"""The tools a simulator answers (respond, finish and transfer_to_human stay the env's)."""


def task_text(shop: Shop) -> str:
    """What the tool simulator is told of the task: the customer's request to the agent."""
    return f"Serve a customer of an online shop. The customer's request:\n{shop.instruction}"


def simulator(model: ChatModel, shop: Shop, version: str, params: dict[str, Any] | None,
              seed: int) -> ToolSimulator:
    """The tool simulator of one episode on ``shop``."""
    tools = [tool for tool in t.TOOLS if tool.name in SIMULATED]
    return ToolSimulator(model, task_text(shop), tools, RESULT_SCHEMAS, version, params, seed)


def observation(value: Any) -> str:
    """What the agent sees of a simulated result: its JSON, or ``Error: ...`` for a refusal
    (as the real shop words one)."""
    if is_error(value):
        return f"Error: {value['error'].rstrip('.')}."
    return json.dumps(value, ensure_ascii=False)


def agrees(real: str, value: Any) -> bool:
    """Whether a simulated result says what the real tool said (``real``, its observation):
    both refusals, or equal JSON."""
    if real.startswith("Error: "):
        return is_error(value)
    return bool(json.loads(real) == value)
