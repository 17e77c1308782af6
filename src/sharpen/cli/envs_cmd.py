"""``sharpen envs``: environments, their knobs and task counts."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from sharpen.core.registry import REGISTRY
from sharpen.envs.base import ENV


def envs() -> None:
    """List environments with their knobs, difficulties and task counts."""
    table = Table(title="Environments", title_justify="left")
    for col in ("env", "description", "tasks per split", "difficulties", "knobs", "tools"):
        table.add_column(col, overflow="fold")
    for name in REGISTRY.names("env"):
        info = REGISTRY.create(ENV, name).describe()
        counts = ", ".join(f"{k}: {v}" for k, v in info.task_counts.items())
        knobs = "\n".join(
            f"{k.name} ({k.type}, default {k.default!r})" for k in info.knobs
        ) or "—"
        table.add_row(name, info.description, counts, ", ".join(info.difficulties) or "—",
                      knobs, ", ".join(info.tools))
    Console().print(table)
