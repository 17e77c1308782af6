"""Shared CLI options and parsing helpers."""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer
import yaml

from sharpen.core.errors import UserError

StoreOpt = Annotated[
    str | None,
    typer.Option("--store", envvar="SHARPEN_STORE",
                 help="SQLAlchemy URL of the store (default: sqlite:///.sharpen/sharpen.db)."),
]


def parse_kv(pairs: list[str] | None, flag: str) -> dict[str, Any]:
    """``["a=1", "b=x"]`` → ``{"a": 1, "b": "x"}``; values are read as YAML scalars."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(f"{flag} {pair!r} is not KEY=VALUE", f"write it as {flag} key=value")
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError:
            out[key.strip()] = value
    return out


def open_store(url: str | None):
    from sharpen.store import Store

    return Store(url or os.environ.get("SHARPEN_STORE") or None)
