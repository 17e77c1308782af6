"""What each toolshop tool does to the database, and the shop's rules.

:func:`call` runs one tool whose arguments already fit its schema
(:mod:`sharpen.envs.toolshop.schema`) and returns a JSON-ready result, or raises
:class:`RuleError` saying which rule the call breaks and what to do instead. A refused call
changes nothing; a write runs in one transaction.

Rules:

- only a ``pending`` order can be cancelled, with a reason of
  :data:`~sharpen.envs.toolshop.catalog.CANCEL_REASONS`; a gift-card payment is refunded to
  the gift card;
- only a ``delivered`` order can have items returned or exchanged, once (its status becomes
  ``return requested`` or ``exchange requested``); the items must be in the order;
- a refund goes to the order's payment method or to a gift card of the order's customer (a
  gift card's balance grows by the refund);
- an item is exchanged for another, *available* item of the same product; the price
  difference is charged to (or refunded on) a payment method of the order's customer; a
  gift card must cover it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from sharpen.envs.toolshop import tools as t
from sharpen.envs.toolshop.database import transaction


class RuleError(Exception):
    """The shop refuses a well-formed call; the message says why and what to do instead."""


def _money(cents: int) -> float:
    return round(cents / 100, 2)


def _one(conn: sqlite3.Connection, sql: str, *args: Any) -> sqlite3.Row | None:
    row: sqlite3.Row | None = conn.execute(sql, args).fetchone()
    return row


def _customer(conn: sqlite3.Connection, cid: str) -> sqlite3.Row:
    row = _one(conn, "SELECT * FROM customers WHERE customer_id = ?", cid)
    if row is None:
        raise RuleError(f"no customer with id {cid!r}; find_customer gives a customer's id")
    return row


def _order(conn: sqlite3.Connection, oid: str) -> sqlite3.Row:
    row = _one(conn, "SELECT * FROM orders WHERE order_id = ?", oid)
    if row is None:
        raise RuleError(f"no order {oid}; list_orders gives a customer's order ids")
    return row


def _method(conn: sqlite3.Connection, pm: str) -> sqlite3.Row:
    row = _one(conn, "SELECT * FROM payment_methods WHERE payment_method_id = ?", pm)
    if row is None:
        raise RuleError(f"no payment method {pm}; find_customer lists a customer's payment methods")
    return row


def _lines(conn: sqlite3.Connection, oid: str) -> list[sqlite3.Row]:
    return conn.execute(
        "SELECT oi.item_id, oi.price_cents, i.product_id, i.options, p.name FROM order_items oi "
        "JOIN items i ON i.item_id = oi.item_id JOIN products p ON p.product_id = i.product_id "
        "WHERE oi.order_id = ? ORDER BY oi.item_id", (oid,)).fetchall()


def _method_view(m: sqlite3.Row) -> dict[str, Any]:
    out = {"payment_method_id": m["payment_method_id"], "kind": m["kind"], "label": m["label"]}
    if m["balance_cents"] is not None:
        out["balance"] = _money(m["balance_cents"])
    return out


def find_customer(conn: sqlite3.Connection, email: str | None = None, name: str | None = None,
                  zip: str | None = None) -> dict[str, Any]:
    if email is not None:
        rows = conn.execute("SELECT * FROM customers WHERE lower(email) = lower(?)",
                            (email.strip(),)).fetchall()
        if not rows:
            raise RuleError(f"no customer with email {email!r}")
    else:
        rows = conn.execute(
            "SELECT * FROM customers WHERE lower(first_name || ' ' || last_name) = lower(?) "
            "AND zip = ? ORDER BY customer_id", (" ".join((name or "").split()), zip)).fetchall()
        if not rows:
            raise RuleError(f"no customer named {name!r} with zip code {zip}")
    c = rows[0]
    methods = conn.execute("SELECT * FROM payment_methods WHERE customer_id = ? "
                           "ORDER BY payment_method_id", (c["customer_id"],)).fetchall()
    orders = [r[0] for r in conn.execute(
        "SELECT order_id FROM orders WHERE customer_id = ? ORDER BY order_id", (c["customer_id"],))]
    return {"customer_id": c["customer_id"], "name": f"{c['first_name']} {c['last_name']}",
            "email": c["email"], "address": {k: c[k] for k in ("street", "city", "zip")},
            "payment_methods": [_method_view(m) for m in methods], "order_ids": orders}


def list_orders(conn: sqlite3.Connection, customer_id: str) -> list[dict[str, Any]]:
    _customer(conn, customer_id)
    out = []
    for o in conn.execute("SELECT * FROM orders WHERE customer_id = ? ORDER BY order_id",
                          (customer_id,)):
        lines = _lines(conn, o["order_id"])
        out.append({"order_id": o["order_id"], "status": o["status"],
                    "products": [r["name"] for r in lines],
                    "total": _money(sum(r["price_cents"] for r in lines))})
    return out


def get_order(conn: sqlite3.Connection, order_id: str) -> dict[str, Any]:
    o = _order(conn, order_id)
    lines = _lines(conn, order_id)
    out: dict[str, Any] = {
        "order_id": o["order_id"], "customer_id": o["customer_id"], "status": o["status"],
        "payment_method_id": o["payment_method_id"],
        "items": [{"item_id": r["item_id"], "product_id": r["product_id"], "product": r["name"],
                   "options": json.loads(r["options"]), "price": _money(r["price_cents"])}
                  for r in lines],
        "total": _money(sum(r["price_cents"] for r in lines)),
    }
    if o["cancel_reason"]:
        out["cancel_reason"] = o["cancel_reason"]
    requests = conn.execute("SELECT item_id, kind, new_item_id FROM returns WHERE order_id = ? "
                            "ORDER BY item_id", (order_id,)).fetchall()
    if requests:
        out["requests"] = [dict(r) for r in requests]
    return out


def get_product(conn: sqlite3.Connection, product_id: str) -> dict[str, Any]:
    p = _one(conn, "SELECT * FROM products WHERE product_id = ?", product_id)
    if p is None:
        raise RuleError(f"no product {product_id}; get_order shows the product id of each item")
    items = conn.execute("SELECT * FROM items WHERE product_id = ? ORDER BY item_id", (product_id,))
    return {"product_id": product_id, "name": p["name"],
            "items": [{"item_id": i["item_id"], "options": json.loads(i["options"]),
                       "price": _money(i["price_cents"]), "available": bool(i["available"])}
                      for i in items]}


_WHY_NOT_CANCEL = {
    "delivered": "is delivered and cannot be cancelled; use return_items",
    "processed": "is processed (already shipped) and cannot be cancelled; once delivered it can "
                 "be returned",
    "cancelled": "is already cancelled",
}


def _credit(conn: sqlite3.Connection, pm: str, cents: int) -> None:
    """Add ``cents`` to ``pm``'s balance if it is a gift card (other methods keep none)."""
    conn.execute("UPDATE payment_methods SET balance_cents = balance_cents + ? "
                 "WHERE payment_method_id = ? AND kind = 'gift_card'", (cents, pm))


def cancel_order(conn: sqlite3.Connection, order_id: str, reason: str) -> dict[str, Any]:
    o = _order(conn, order_id)
    if o["status"] != "pending":
        why = _WHY_NOT_CANCEL.get(o["status"], f"is '{o['status']}' and cannot be cancelled")
        raise RuleError(f"order {order_id} {why}")
    total = sum(r["price_cents"] for r in _lines(conn, order_id))
    with transaction(conn):
        conn.execute("UPDATE orders SET status = 'cancelled', cancel_reason = ? WHERE order_id = ?",
                     (reason, order_id))
        _credit(conn, o["payment_method_id"], total)
    return {"order_id": order_id, "status": "cancelled", "refund": _money(total),
            "refunded_to": o["payment_method_id"]}


def _delivered(conn: sqlite3.Connection, order_id: str, item_ids: list[str], verb: str) -> sqlite3.Row:
    """The order, if it is delivered and holds every item of ``item_ids``."""
    o = _order(conn, order_id)
    status = o["status"]
    if status in ("return requested", "exchange requested"):
        raise RuleError(f"order {order_id} already has a {status.split()[0]} request; only one "
                        "return or exchange per order")
    if status != "delivered":
        hint = "; use cancel_order" if status == "pending" else ""
        raise RuleError(f"order {order_id} is {status}; only delivered orders can be {verb}{hint}")
    held = {r["item_id"] for r in _lines(conn, order_id)}
    for item in item_ids:
        if item not in held:
            raise RuleError(f"item {item} is not in order {order_id}; its items are "
                            f"{', '.join(sorted(held))}")
    return o


def return_items(conn: sqlite3.Connection, order_id: str, item_ids: list[str],
                 payment_method_id: str) -> dict[str, Any]:
    o = _delivered(conn, order_id, item_ids, "returned")
    m = _method(conn, payment_method_id)
    own_gift = m["kind"] == "gift_card" and m["customer_id"] == o["customer_id"]
    if payment_method_id != o["payment_method_id"] and not own_gift:
        raise RuleError(f"a refund goes to the order's payment method ({o['payment_method_id']}) "
                        f"or a gift card of the customer; {payment_method_id} is neither")
    prices = {r["item_id"]: r["price_cents"] for r in _lines(conn, order_id)}
    refund = sum(prices[i] for i in item_ids)
    with transaction(conn):
        conn.execute("UPDATE orders SET status = 'return requested' WHERE order_id = ?", (order_id,))
        conn.executemany("INSERT INTO returns VALUES (?, ?, 'return', NULL, ?)",
                         [(order_id, i, payment_method_id) for i in item_ids])
        _credit(conn, payment_method_id, refund)
    return {"order_id": order_id, "status": "return requested", "item_ids": item_ids,
            "refund": _money(refund), "refund_to": payment_method_id}


def exchange_items(conn: sqlite3.Connection, order_id: str, item_ids: list[str],
                   new_item_ids: list[str], payment_method_id: str) -> dict[str, Any]:
    o = _delivered(conn, order_id, item_ids, "exchanged")
    if len(new_item_ids) != len(item_ids):
        raise RuleError(f"item_ids has {len(item_ids)} item(s) but new_item_ids has "
                        f"{len(new_item_ids)}; give one new item per exchanged item")
    lines = {r["item_id"]: r for r in _lines(conn, order_id)}
    difference = 0
    for old, new in zip(item_ids, new_item_ids, strict=True):
        row = _one(conn, "SELECT i.*, p.name FROM items i JOIN products p USING (product_id) "
                         "WHERE item_id = ?", new)
        if row is None:
            raise RuleError(f"no item {new}; get_product lists a product's items")
        if new == old:
            raise RuleError(f"item {old} would be exchanged for itself; choose another item")
        if row["product_id"] != lines[old]["product_id"]:
            raise RuleError(f"item {new} is a {row['name']}, not a {lines[old]['name']}; an item "
                            "can only be exchanged for an item of the same product")
        if not row["available"]:
            raise RuleError(f"item {new} is not available; choose an available item (get_product)")
        difference += row["price_cents"] - lines[old]["price_cents"]
    m = _method(conn, payment_method_id)
    if m["customer_id"] != o["customer_id"]:
        raise RuleError(f"payment method {payment_method_id} does not belong to the order's "
                        f"customer {o['customer_id']}")
    if m["kind"] == "gift_card" and m["balance_cents"] < difference:
        raise RuleError(f"gift card {payment_method_id} has {_money(m['balance_cents'])} but the "
                        f"exchange costs {_money(difference)} more; use another payment method")
    with transaction(conn):
        conn.execute("UPDATE orders SET status = 'exchange requested' WHERE order_id = ?",
                     (order_id,))
        conn.executemany("INSERT INTO returns VALUES (?, ?, 'exchange', ?, ?)",
                         [(order_id, a, b, payment_method_id)
                          for a, b in zip(item_ids, new_item_ids, strict=True)])
        _credit(conn, payment_method_id, -difference)
    return {"order_id": order_id, "status": "exchange requested",
            "price_difference": _money(difference), "paid_with": payment_method_id}


def update_address(conn: sqlite3.Connection, customer_id: str, street: str, city: str,
                   zip: str) -> dict[str, Any]:
    _customer(conn, customer_id)
    address = {"street": " ".join(street.split()), "city": " ".join(city.split()), "zip": zip}
    with transaction(conn):
        conn.execute("UPDATE customers SET street = ?, city = ?, zip = ? WHERE customer_id = ?",
                     (address["street"], address["city"], zip, customer_id))
    return {"customer_id": customer_id, "address": address}


HANDLERS: dict[str, Callable[..., Any]] = {
    t.FIND_CUSTOMER.name: find_customer, t.LIST_ORDERS.name: list_orders,
    t.GET_ORDER.name: get_order, t.GET_PRODUCT.name: get_product,
    t.CANCEL_ORDER.name: cancel_order, t.RETURN_ITEMS.name: return_items,
    t.EXCHANGE_ITEMS.name: exchange_items, t.UPDATE_ADDRESS.name: update_address,
}


def call(conn: sqlite3.Connection, name: str, arguments: dict[str, Any]) -> Any:
    """Run the read or write tool ``name`` (arguments already schema-checked)."""
    return HANDLERS[name](conn, **arguments)
