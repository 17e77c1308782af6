"""A command group that imports a command's module only when that command runs.

``sharpen --help`` lists every command from a static table (name, module, attribute, one-line
help), so it never imports the runner, the store or numpy; ``sharpen run ...`` imports
``sharpen.cli.run_cmd`` and nothing else. A test checks each table line against the loaded
command's own docstring, so the two cannot drift apart.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup


@dataclass(frozen=True)
class LazyCommand:
    """Where a command lives: ``module:attribute`` is a typer-decorable function or a
    :class:`typer.Typer` sub-app; ``help`` is its one-line help (the docstring's first
    paragraph)."""

    name: str
    module: str
    attribute: str
    help: str


def one_line(doc: str | None) -> str:
    """A docstring's first paragraph on one line: what ``--help`` lists for a command."""
    return " ".join((doc or "").strip().split("\n\n")[0].split())


def load_command(spec: LazyCommand) -> Any:
    """Import ``spec``'s module and build the click command typer would build for it."""
    obj = getattr(importlib.import_module(spec.module), spec.attribute)
    # Mounted on a throw-away parent as the eager app mounted it: a sub-app then gets no
    # completion options of its own, and both kinds come out as the parent's sub-command.
    parent = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    parent.callback()(lambda: None)
    if isinstance(obj, typer.Typer):
        parent.add_typer(obj, name=spec.name)
    else:
        parent.command(spec.name)(obj)
    group = typer.main.get_command(parent)
    assert isinstance(group, TyperGroup)
    return group.commands[spec.name]


class LazyGroup(TyperGroup):
    """A :class:`TyperGroup` whose commands come from :attr:`lazy` (set by a subclass):
    placeholders carrying the one-line help until a command is resolved to run."""

    lazy: tuple[LazyCommand, ...] = ()

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self._specs = {spec.name: spec for spec in self.lazy}
        for spec in self.lazy:
            # A placeholder: enough for the help listing and for "did you mean" on a typo.
            self.commands.setdefault(spec.name, TyperCommand(
                name=spec.name, short_help=spec.help, help=spec.help))
        self._loaded: set[str] = set()

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """The command, real once resolved; a help-only placeholder before (``--help``)."""
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        """Resolve as click does, then swap a placeholder for the real, imported command."""
        name, command, rest = super().resolve_command(ctx, args)
        if name in self._specs and name not in self._loaded:
            command = self.commands[name] = load_command(self._specs[name])
            self._loaded.add(name)
        return name, command, rest
