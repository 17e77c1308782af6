"""The toolshop tools as JSON Schemas (what the agent is shown).

Read tools: ``find_customer``, ``list_orders``, ``get_order``, ``get_product``. Write tools
(they change the database): ``cancel_order``, ``return_items``, ``exchange_items``,
``update_address``. Conversation: ``respond`` (a message to the customer), ``finish`` and
``transfer_to_human`` (both end the episode). Their behaviour and the shop's rules are in
:mod:`sharpen.envs.toolshop.actions`.

For the text protocol of small models, ``respond`` takes a fenced block as its ``message``
and its ``text_hint`` tells the model how to call every other tool with one JSON object.
"""

from __future__ import annotations

from typing import Any

from sharpen.core.messages import ToolSpec
from sharpen.envs.toolshop.catalog import CANCEL_REASONS
from sharpen.envs.toolshop.schema import NON_BLANK


def _string(pattern: str, example: str) -> dict[str, Any]:
    return {"type": "string", "pattern": pattern, "examples": [example]}


CUSTOMER_ID = _string("^[a-z]+_[a-z]+_[0-9]{4}$", "ana_lopez_1234")
ORDER_ID = _string("^#W[0-9]{7}$", "#W1234567")
ITEM_ID = _string("^[0-9]{10}$", "1234567890")
PRODUCT_ID = _string("^P[0-9]{4}$", "P1234")
PAYMENT_METHOD_ID = _string("^(credit_card|paypal|gift_card)_[0-9]{7}$", "gift_card_1234567")
EMAIL = _string("^[^@\\s]+@[^@\\s]+\\.[A-Za-z]+$", "ana.lopez12@example.com")
ZIP = _string("^[0-9]{5}$", "62704")
TEXT = {"type": "string", "minLength": 1, "pattern": NON_BLANK}


def _items(unique: bool = True) -> dict[str, Any]:
    return {"type": "array", "items": ITEM_ID, "minItems": 1, "uniqueItems": unique}


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str],
          **extra: Any) -> ToolSpec:
    return ToolSpec(name=name, description=description, parameters={
        "type": "object", "properties": properties, "required": required,
        "additionalProperties": False, **extra})


FIND_CUSTOMER = _tool(
    "find_customer",
    "Find a customer by email, or by full name and zip code. Returns their customer id, "
    "address, payment methods and order ids.",
    {"email": EMAIL, "name": TEXT, "zip": ZIP}, [],
    anyOf=[{"required": ["email"]}, {"required": ["name", "zip"]}])
LIST_ORDERS = _tool(
    "list_orders", "A customer's orders: order id, status, products and total.",
    {"customer_id": CUSTOMER_ID}, ["customer_id"])
GET_ORDER = _tool(
    "get_order",
    "One order: status, payment method and items (item id, product id, product, options, price).",
    {"order_id": ORDER_ID}, ["order_id"])
GET_PRODUCT = _tool(
    "get_product", "A product's items: item id, options, price and whether it is available.",
    {"product_id": PRODUCT_ID}, ["product_id"])
CANCEL_ORDER = _tool(
    "cancel_order",
    "Cancel a pending order. A gift-card payment is refunded to the gift card.",
    {"order_id": ORDER_ID, "reason": {"type": "string", "enum": list(CANCEL_REASONS)}},
    ["order_id", "reason"])
RETURN_ITEMS = _tool(
    "return_items",
    "Request the return of items of a delivered order (one return or exchange per order). "
    "The refund goes to payment_method_id: the order's payment method or a gift card of the "
    "customer.",
    {"order_id": ORDER_ID, "item_ids": _items(), "payment_method_id": PAYMENT_METHOD_ID},
    ["order_id", "item_ids", "payment_method_id"])
EXCHANGE_ITEMS = _tool(
    "exchange_items",
    "Exchange items of a delivered order for available items of the same products "
    "(new_item_ids[i] replaces item_ids[i]; one return or exchange per order). The price "
    "difference is paid or refunded with payment_method_id, a payment method of the customer.",
    {"order_id": ORDER_ID, "item_ids": _items(), "new_item_ids": _items(unique=False),
     "payment_method_id": PAYMENT_METHOD_ID},
    ["order_id", "item_ids", "new_item_ids", "payment_method_id"])
UPDATE_ADDRESS = _tool(
    "update_address", "Change a customer's default address.",
    {"customer_id": CUSTOMER_ID, "street": TEXT, "city": TEXT, "zip": ZIP},
    ["customer_id", "street", "city", "zip"])
TRANSFER_TO_HUMAN = _tool(
    "transfer_to_human",
    "Hand the customer over to a human agent, with a summary; ends the conversation.",
    {"summary": TEXT}, ["summary"]).model_copy(update={"final": True})
RESPOND = ToolSpec(
    name="respond",
    description="Send a message to the customer (ask for a missing detail, report what you did).",
    parameters={"type": "object", "properties": {"message": TEXT}, "required": ["message"],
                "additionalProperties": False},
    text_argument="message",
    text_hint=(
        'Call one tool per reply with one JSON object, e.g. {"tool": "get_order", '
        '"arguments": {"order_id": "#W1234567"}}. To write to the customer instead, put your '
        "message in a ``` block"),
)
FINISH = _tool("finish", "End the conversation once the customer's request is done.", {},
               []).model_copy(update={"final": True})

READ_TOOLS = (FIND_CUSTOMER, LIST_ORDERS, GET_ORDER, GET_PRODUCT)
WRITE_TOOLS = (CANCEL_ORDER, RETURN_ITEMS, EXCHANGE_ITEMS, UPDATE_ADDRESS)
TOOLS: tuple[ToolSpec, ...] = (*READ_TOOLS, *WRITE_TOOLS, RESPOND, TRANSFER_TO_HUMAN, FINISH)
"""Every tool, in the order the agent sees them."""
WRITES = frozenset(t.name for t in WRITE_TOOLS)
ENDINGS = frozenset({FINISH.name, TRANSFER_TO_HUMAN.name})
"""Tools that end the episode."""
