"""Task goals: what the customer asks for, and :func:`build_shop`, which draws a whole task.

A goal is ``goal_depth`` write actions for one customer, each of a kind:

- ``cancel`` — cancel one of their *pending* orders, with a stated reason;
- ``return`` — return one or two items of a *delivered* order, refunded to the order's
  payment method or to the customer's gift card;
- ``exchange`` — exchange one item of a *delivered* order for the same product with one
  option changed (an available item), the price difference paid with their credit card;
- ``address`` — change their default address (at most once per goal).

Each order goal has its own *key product*, and the goal's order is the only one of the
customer's orders in that status holding it, so "my pending order with the Desk Lamp" names
exactly one order. Key products never appear in the customer's other orders, except in the
``distractors``: orders holding a key product in a *different* status (a delivered Desk
Lamp order next to the pending one that must be cancelled). With ``lookups`` the
instruction names the customer by name and zip (or email), orders by status and product and
items by product and options, so the agent must look ids up; without it, every id is given.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from sharpen.core.trajectory import Action
from sharpen.envs.toolshop import catalog
from sharpen.envs.toolshop.world import PRODUCTS, Row, Shop, ShopBuilder, options_text

KINDS = ("cancel", "return", "exchange", "address")
STATUS_OF = {"cancel": "pending", "return": "delivered", "exchange": "delivered"}
"""The status an order must have for each kind of goal."""
METHOD_WORDS = {"credit_card": "my credit card", "paypal": "my PayPal account",
                "gift_card": "my gift card"}


@dataclass
class _OrderGoal:
    kind: str
    product: int  # index into PRODUCTS
    item: Row  # the key item in the order
    order: Row | None = None


def _one_option_swaps(builder: ShopBuilder, item: Row) -> list[tuple[Row, str, str]]:
    """Available items of ``item``'s product that differ from it in exactly one option:
    ``(item, option name, new value)``."""
    old = json.loads(item["options"])
    out = []
    for other in builder.items_of[item["product_id"]]:
        new = json.loads(other["options"])
        diff = [k for k in old if old[k] != new[k]]
        if other["available"] and len(diff) == 1:
            out.append((other, diff[0], new[diff[0]]))
    return out


def _pick_kinds(rng: random.Random, depth: int) -> list[str]:
    kinds: list[str] = []
    for _ in range(depth):
        pool = ["cancel", "return", "exchange"] + ([] if "address" in kinds else ["address"])
        kinds.append(rng.choice(pool))
    return kinds


def _pick_keys(builder: ShopBuilder, kinds: list[str]) -> list[_OrderGoal]:
    """One key product (and key item) per order goal, all distinct."""
    rng = builder.rng
    candidates = list(range(len(PRODUCTS)))
    rng.shuffle(candidates)
    goals = []
    for kind in kinds:
        if kind == "address":
            continue
        while True:
            index = candidates.pop()
            items = builder.items_of[builder.product_ids[index]]
            if kind == "exchange":
                items = [i for i in items if _one_option_swaps(builder, i)]
            if items:
                goals.append(_OrderGoal(kind, index, rng.choice(items)))
                break
    return goals


def _customer_words(rng: random.Random, c: Row, lookups: bool) -> tuple[str, Action | None]:
    """How the customer introduces themself, and the look-up that finds them (none when the
    id is given)."""
    if not lookups:
        return f"Hi, my customer id is {c['customer_id']}.", None
    name = f"{c['first_name']} {c['last_name']}"
    if rng.random() < 0.3:
        return (f"Hi, this is {name}; my account email is {c['email']}.",
                Action(tool="find_customer", arguments={"email": c["email"]}))
    return (f"Hi, I'm {name}, zip code {c['zip']}.",
            Action(tool="find_customer", arguments={"name": name, "zip": c["zip"]}))


def _order_write(builder: ShopBuilder, goal: _OrderGoal, customer: Row, methods: dict[str, Row],
                 lookups: bool) -> tuple[Action, str, list[Action]]:
    """The write action of an order goal, its sentence, and the look-ups before it."""
    rng, order = builder.rng, goal.order
    assert order is not None
    oid = order["order_id"]
    product = PRODUCTS[goal.product].name
    where = f"my {order['status']} order with the {product}" if lookups else f"order {oid}"
    reads = [Action(tool="get_order", arguments={"order_id": oid})]
    if goal.kind == "cancel":
        reason = rng.choice(catalog.CANCEL_REASONS)
        text = f"Cancel {where}; the reason: {reason}."
        return Action(tool="cancel_order", arguments={"order_id": oid, "reason": reason}), text, reads
    if goal.kind == "return":
        held = [r for r in builder.rows.order_items if r["order_id"] == oid]
        chosen = [goal.item["item_id"]]
        others = [r["item_id"] for r in held if r["item_id"] != goal.item["item_id"]]
        if others and rng.random() < 0.4:
            chosen.append(rng.choice(others))
        gift = methods.get("gift_card")
        method = gift if gift is not None and rng.random() < 0.5 else None
        pm = method["payment_method_id"] if method else order["payment_method_id"]
        if lookups:
            names = [_product_of(builder, i) for i in chosen]
            what = " and the ".join(names)
            refund = "to my gift card" if method else "to the original payment method"
            text = f"From {where}, return the {what}; refund {refund}."
        else:
            text = f"Return item{'s' * (len(chosen) > 1)} {' and '.join(chosen)} of {where}; refund to {pm}."
        action = Action(tool="return_items", arguments={"order_id": oid, "item_ids": chosen,
                                                        "payment_method_id": pm})
        return action, text, reads
    new, option, value = rng.choice(_one_option_swaps(builder, goal.item))
    pm = methods["credit_card"]["payment_method_id"]
    if lookups:
        old = options_text(json.loads(goal.item["options"]))
        text = (f"In {where}, exchange the {product} ({old}) for the same {product} with "
                f"{option} {value}; pay any price difference with my credit card.")
        reads.append(Action(tool="get_product", arguments={"product_id": goal.item["product_id"]}))
    else:
        text = (f"Exchange item {goal.item['item_id']} of {where} for item {new['item_id']}; pay "
                f"any price difference with {pm}.")
    action = Action(tool="exchange_items", arguments={
        "order_id": oid, "item_ids": [goal.item["item_id"]], "new_item_ids": [new["item_id"]],
        "payment_method_id": pm})
    return action, text, reads


def _product_of(builder: ShopBuilder, item_id: str) -> str:
    item = next(i for i in builder.rows.items if i["item_id"] == item_id)
    return PRODUCTS[builder.product_ids.index(item["product_id"])].name


def _address_write(builder: ShopBuilder, customer: Row, lookups: bool) -> tuple[Action, str]:
    new = builder.address(avoid_city=customer["city"])
    action = Action(tool="update_address", arguments={"customer_id": customer["customer_id"], **new})
    if lookups:
        return action, f"Change my default address to {new['street']}, {new['city']}, {new['zip']}."
    return action, (f"Update my default address: street '{new['street']}', city '{new['city']}', "
                    f"zip '{new['zip']}'.")


def build_shop(seed: int, knobs: dict[str, Any]) -> Shop:
    """The task of ``(seed, knobs)`` (knobs already resolved); see the module doc."""
    rng = random.Random(seed)
    builder = ShopBuilder(rng)
    builder.add_products()
    everything = list(range(len(PRODUCTS)))
    first, last = rng.choice(catalog.FIRST_NAMES), rng.choice(catalog.LAST_NAMES)
    customer = builder.add_customer(first, last)
    for _ in range(knobs["customers"] - 1):
        other = (rng.choice(catalog.FIRST_NAMES), rng.choice(catalog.LAST_NAMES))
        if other == (first, last):  # the one namesake allowed lives elsewhere (below)
            other = (other[0], rng.choice([n for n in catalog.LAST_NAMES if n != last]))
        c = builder.add_customer(*other)
        builder.add_background(c["customer_id"], rng.randint(1, knobs["orders_per_customer"]),
                               everything)
    if knobs["distractors"] >= 2 and knobs["lookups"]:  # same name, another city
        twin = builder.add_customer(first, last, avoid_city=customer["city"])
        builder.add_background(twin["customer_id"], rng.randint(1, knobs["orders_per_customer"]),
                               everything)
    kinds = _pick_kinds(rng, knobs["goal_depth"])
    order_goals = _pick_keys(builder, kinds)
    keys = {g.product for g in order_goals}
    fillers = [p for p in everything if p not in keys]
    cid = customer["customer_id"]
    builder.add_background(cid, rng.randint(1, knobs["orders_per_customer"]), fillers)
    for g in order_goals:
        extra = rng.sample(fillers, rng.randint(0, 2))
        g.order = builder.add_order(cid, STATUS_OF[g.kind], [g.product, *extra], {g.product: g.item})
    for _ in range(knobs["distractors"]):
        if not order_goals:
            builder.add_background(cid, 1, fillers)
            continue
        g = rng.choice(order_goals)
        status = rng.choice([s for s in catalog.ORDER_STATUSES if s != STATUS_OF[g.kind]])
        builder.add_order(cid, status, [g.product, *rng.sample(fillers, rng.randint(0, 2))])
    methods = {m["kind"]: m for m in builder.methods_of(cid)}
    hello, find = _customer_words(rng, customer, knobs["lookups"])
    lines, writes = [], []
    reference = [find] if find is not None else []
    if knobs["lookups"] and order_goals:
        reference.append(Action(tool="list_orders", arguments={"customer_id": cid}))
    goals = iter(order_goals)
    for kind in kinds:
        if kind == "address":
            action, text = _address_write(builder, customer, knobs["lookups"])
            reads: list[Action] = []
        else:
            action, text, reads = _order_write(builder, next(goals), customer, methods,
                                               knobs["lookups"])
        lines.append(text)
        writes.append(action)
        reference.extend([*(reads if knobs["lookups"] else []), action])
    if len(lines) == 1:
        body = f"{hello} Please help me with this: {lines[0]}"
    else:
        body = hello + " Please do the following:\n" + "\n".join(
            f"{i}. {line}" for i, line in enumerate(lines, 1))
    instruction = body + "\nPlease don't change anything else."
    reference.append(Action(tool="finish", arguments={}))
    return Shop(tables=builder.rows.tables(), customer_id=cid, kinds=tuple(kinds),
                instruction=instruction, writes=tuple(writes), reference=tuple(reference))
