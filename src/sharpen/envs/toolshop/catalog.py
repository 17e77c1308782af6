"""The fixed vocabulary toolshop worlds are drawn from: products and their option
dimensions, people's names, streets and cities. Only data; every random choice that uses it
is made in :mod:`sharpen.envs.toolshop.world` from a seeded ``random.Random``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProductTemplate:
    """One product: its name, its option dimensions (every combination is an item) and the
    price range of its items, in cents."""

    name: str
    options: tuple[tuple[str, tuple[str, ...]], ...]
    low_cents: int
    high_cents: int


PRODUCTS: tuple[ProductTemplate, ...] = (
    ProductTemplate("T-Shirt", (("color", ("red", "blue", "black", "white")),
                                ("size", ("S", "M", "L", "XL"))), 1200, 2900),
    ProductTemplate("Running Shoes", (("color", ("grey", "black", "orange")),
                                      ("size", ("8", "9", "10", "11"))), 6500, 12900),
    ProductTemplate("Desk Lamp", (("color", ("black", "white", "brass")),
                                  ("bulb", ("LED", "halogen"))), 2500, 6900),
    ProductTemplate("Backpack", (("color", ("green", "black", "navy")),
                                 ("capacity", ("20L", "30L"))), 3900, 8900),
    ProductTemplate("Water Bottle", (("capacity", ("500ml", "750ml", "1L")),
                                     ("material", ("steel", "plastic"))), 900, 3400),
    ProductTemplate("Headphones", (("color", ("black", "white", "blue")),
                                   ("type", ("wired", "wireless"))), 4900, 19900),
    ProductTemplate("Coffee Maker", (("capacity", ("4 cups", "8 cups", "12 cups")),
                                     ("color", ("black", "silver"))), 3900, 12900),
    ProductTemplate("Yoga Mat", (("thickness", ("4mm", "6mm", "8mm")),
                                 ("color", ("purple", "green", "grey"))), 1900, 5900),
    ProductTemplate("Rain Jacket", (("size", ("S", "M", "L", "XL")),
                                    ("color", ("yellow", "navy"))), 5900, 14900),
    ProductTemplate("Keyboard", (("layout", ("US", "UK")),
                                 ("switch", ("linear", "tactile", "clicky"))), 4500, 15900),
    ProductTemplate("Office Chair", (("color", ("black", "grey")),
                                     ("armrests", ("fixed", "adjustable"))), 12900, 34900),
    ProductTemplate("Tent", (("size", ("2-person", "4-person")),
                             ("color", ("green", "orange"))), 8900, 29900),
)
"""The catalogue: every world holds all of these products, with ids drawn per world."""

FIRST_NAMES = (
    "Ana", "Ben", "Chloe", "Daniel", "Elena", "Farid", "Grace", "Hiro", "Isabel", "James",
    "Keiko", "Liam", "Maya", "Noah", "Olga", "Pedro", "Quinn", "Rosa", "Sam", "Tara", "Umar",
    "Vera", "Wei", "Yusuf", "Zoe", "Mateo", "Priya", "Lucas", "Amara", "Ivan",
)
LAST_NAMES = (
    "Lopez", "Smith", "Kim", "Novak", "Garcia", "Okafor", "Rossi", "Tanaka", "Muller",
    "Silva", "Haddad", "Johnson", "Patel", "Nguyen", "Cohen", "Ivanova", "Brown", "Santos",
    "Yilmaz", "Dubois", "Moreau", "Khan", "Larsen", "Fischer", "Costa", "Ahmed", "Wright",
    "Bianchi", "Sato", "Evans",
)
STREETS = (
    "Elm Street", "Oak Avenue", "Maple Road", "Cedar Lane", "Pine Street", "Lake Drive",
    "Hill Road", "River Street", "Park Avenue", "Sunset Boulevard", "Mill Lane",
    "Church Street", "Station Road", "Orchard Way", "Meadow Court", "Harbor View",
)
CITIES: tuple[tuple[str, str], ...] = (
    ("Springfield", "62704"), ("Riverton", "82501"), ("Fairview", "37062"),
    ("Madison", "53703"), ("Georgetown", "78626"), ("Salem", "97301"), ("Franklin", "37064"),
    ("Clinton", "52732"), ("Ashland", "97520"), ("Burlington", "05401"), ("Oxford", "38655"),
    ("Dayton", "45402"), ("Milton", "02186"), ("Auburn", "36830"), ("Hudson", "44236"),
    ("Kingston", "12401"),
)
"""Cities with one zip code each."""

ORDER_STATUSES = ("pending", "processed", "delivered", "cancelled")
"""Statuses a generated order can start in. ``return requested`` and ``exchange requested``
are reached only through the tools."""

STATUS_WEIGHTS = (0.25, 0.2, 0.45, 0.1)
"""How often a background order starts in each of :data:`ORDER_STATUSES`."""

CANCEL_REASONS = ("no longer needed", "ordered by mistake")
"""The only reasons ``cancel_order`` accepts."""
