"""Generated shops: the rows of a toolshop database, drawn from one seeded RNG.

A :class:`Shop` is everything one task needs: the rows of every table (customers, payment
methods, products, items, orders, order items; ``returns`` starts empty), the customer the
task is about, the goal (:mod:`sharpen.envs.toolshop.goals`) and the reference walkthrough.
:func:`build_shop` draws it from ``random.Random(seed)`` alone, so the same seed and knobs
give the same shop, byte for byte, in any process and whatever else runs.

Ids: customers ``first_last_1234``, orders ``#W`` + 7 digits, items 10 digits, products
``P`` + 4 digits, payment methods ``credit_card_``/``paypal_``/``gift_card_`` + 7 digits.
Money is in integer cents. Every customer has a credit card, and maybe a PayPal account and
a gift card (with a balance), at most one of each, so "my gift card" names one method.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sharpen.core.trajectory import Action
from sharpen.envs.toolshop import catalog
from sharpen.envs.toolshop.catalog import PRODUCTS, ProductTemplate

Row = dict[str, Any]

AVAILABLE = 0.8
"""Probability that an item can be ordered (exchanges need an available item)."""


def options_text(options: dict[str, str]) -> str:
    """``{"color": "red", "size": "M"}`` as ``color red, size M``."""
    return ", ".join(f"{k} {v}" for k, v in options.items())


@dataclass
class ShopRows:
    """The rows of every table while a shop is being generated (the ``returns`` table
    starts empty)."""

    customers: list[Row] = field(default_factory=list)
    payment_methods: list[Row] = field(default_factory=list)
    products: list[Row] = field(default_factory=list)
    items: list[Row] = field(default_factory=list)
    orders: list[Row] = field(default_factory=list)
    order_items: list[Row] = field(default_factory=list)

    def tables(self) -> dict[str, list[Row]]:
        return {"customers": self.customers, "payment_methods": self.payment_methods,
                "products": self.products, "items": self.items, "orders": self.orders,
                "order_items": self.order_items, "returns": []}


class ShopBuilder:
    """Draws rows from ``rng`` and keeps ids unique. The goal generator uses the same
    builder to add the task's own orders."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.rows = ShopRows()
        self._ids: set[str] = set()
        self.product_ids: list[str] = []  # index i -> id of PRODUCTS[i]
        self.items_of: dict[str, list[Row]] = {}  # product id -> its items

    def unique(self, make: Callable[[], str]) -> str:
        """A fresh id from ``make`` (redrawn until unused)."""
        while True:
            value = make()
            if value not in self._ids:
                self._ids.add(value)
                return value

    def digits(self, n: int) -> str:
        return "".join(self.rng.choice("0123456789") for _ in range(n))

    def add_products(self) -> None:
        """Every catalogue product with one item per option combination."""
        for template in PRODUCTS:
            pid = self.unique(lambda: "P" + self.digits(4))
            self.product_ids.append(pid)
            self.rows.products.append({"product_id": pid, "name": template.name})
            items = self.items_of[pid] = []
            names = [n for n, _ in template.options]
            for combo in itertools.product(*(values for _, values in template.options)):
                item = {
                    "item_id": self.unique(lambda: self.rng.choice("123456789") + self.digits(9)),
                    "product_id": pid,
                    "options": json.dumps(dict(zip(names, combo, strict=True))),
                    "price_cents": self.rng.randrange(template.low_cents, template.high_cents + 1),
                    "available": int(self.rng.random() < AVAILABLE),
                }
                items.append(item)
                self.rows.items.append(item)

    def template(self, product_index: int) -> ProductTemplate:
        return PRODUCTS[product_index]

    def address(self, avoid_city: str | None = None) -> dict[str, str]:
        """A random street address (``street``, ``city``, ``zip``)."""
        city, zip_code = self.rng.choice([c for c in catalog.CITIES if c[0] != avoid_city])
        street = f"{self.rng.randrange(1, 1000)} {self.rng.choice(catalog.STREETS)}"
        return {"street": street, "city": city, "zip": zip_code}

    def add_customer(self, first: str, last: str, avoid_city: str | None = None) -> Row:
        """A customer with an address, a credit card and maybe a PayPal account and a gift
        card."""
        cid = self.unique(lambda: f"{first.lower()}_{last.lower()}_{self.rng.randrange(1000, 10000)}")
        email = self.unique(lambda: f"{first}.{last}{self.rng.randrange(10, 100)}@example.com".lower())
        customer = {"customer_id": cid, "first_name": first, "last_name": last, "email": email,
                    **self.address(avoid_city)}
        self.rows.customers.append(customer)
        kinds = ["credit_card"]
        if self.rng.random() < 0.5:
            kinds.append("paypal")
        if self.rng.random() < 0.6:
            kinds.append("gift_card")
        for kind in kinds:
            def method_id(k: str = kind) -> str:
                return f"{k}_{self.digits(7)}"
            mid = self.unique(method_id)
            label = {"credit_card": f"visa ending {self.digits(4)}", "paypal": "paypal account",
                     "gift_card": "gift card"}[kind]
            balance = self.rng.randrange(20, 301) * 100 if kind == "gift_card" else None
            self.rows.payment_methods.append({"payment_method_id": mid, "customer_id": cid,
                                              "kind": kind, "label": label,
                                              "balance_cents": balance})
        return customer

    def methods_of(self, customer_id: str) -> list[Row]:
        return [m for m in self.rows.payment_methods if m["customer_id"] == customer_id]

    def add_order(self, customer_id: str, status: str, product_indices: list[int],
                  items: dict[int, Row] | None = None) -> Row:
        """An order of ``customer_id`` in ``status`` holding one item of each product in
        ``product_indices`` (the item given in ``items``, else a random one), paid with a
        random payment method of the customer."""
        oid = self.unique(lambda: "#W" + self.rng.choice("123456789") + self.digits(6))
        method = self.rng.choice(self.methods_of(customer_id))
        order = {"order_id": oid, "customer_id": customer_id, "status": status,
                 "payment_method_id": method["payment_method_id"], "cancel_reason": None}
        self.rows.orders.append(order)
        for index in product_indices:
            item = (items or {}).get(index) or self.rng.choice(self.items_of[self.product_ids[index]])
            self.rows.order_items.append({"order_id": oid, "item_id": item["item_id"],
                                          "price_cents": item["price_cents"]})
        return order

    def random_status(self) -> str:
        return self.rng.choices(catalog.ORDER_STATUSES, catalog.STATUS_WEIGHTS)[0]

    def add_background(self, customer_id: str, n_orders: int, products: list[int]) -> None:
        """``n_orders`` orders of 1-3 random products from ``products``."""
        for _ in range(n_orders):
            k = self.rng.randint(1, min(3, len(products)))
            self.add_order(customer_id, self.random_status(), self.rng.sample(products, k))


@dataclass(frozen=True)
class Shop:
    """One generated task: the database rows, the goal and the reference walkthrough."""

    tables: dict[str, list[Row]]
    """Rows per table, in insertion order (the ``returns`` table is empty)."""
    customer_id: str
    """The customer the task is about."""
    kinds: tuple[str, ...]
    """The goal's write actions, by kind (``cancel``, ``return``, ``exchange``, ``address``)."""
    instruction: str
    """The customer's request in words: everything a single-instruction agent needs."""
    writes: tuple[Action, ...]
    """The goal's write actions; replayed on a fresh copy they give the expected state."""
    reference: tuple[Action, ...]
    """The reference walkthrough: the look-ups a careful agent makes, the writes, ``finish``."""
    outage: str | None = None
    """A tool whose first call fails with a transient error (the ``tool_failure``
    perturbation, :mod:`.perturb`), or ``None``."""
