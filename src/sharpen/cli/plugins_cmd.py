"""``sharpen plugins [KIND]``: every plug-in name the registry can find, per kind."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from sharpen.core.errors import UserError
from sharpen.core.registry import KINDS, REGISTRY


def plugins(
    kind: Annotated[str | None, typer.Argument(help=f"One kind: {', '.join(KINDS)}.")] = None,
) -> None:
    """List plug-ins by kind: the built-ins and every installed package's (entry points).
    Your own are named as module:Name or path/to/file.py:Name (docs/plugins.md)."""
    if kind is not None and kind not in KINDS:
        raise UserError(f"unknown plug-in kind {kind!r}", f"use one of {', '.join(KINDS)}")
    console = Console()
    for k in [kind] if kind else KINDS:
        names = REGISTRY.names(k)
        console.print(f"[bold]{k}[/]: {', '.join(names) or '(none)'}", highlight=False)
