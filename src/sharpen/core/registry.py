"""The plug-in registry: every plug-in is created from, and serialises to, ``{name, args}``.

Environments, agents, models, proposers and judges register themselves with a decorator::

    @register("env", "code")
    class CodeEnv(BaseEnvironment): ...

and are built from a :class:`PluginRef` (``{"name": "code", "args": {...}}``), which is what
YAML configs, CLI overrides, resume hashes and re-scoring from the store all share.

A name is found in one of three ways, the built-ins included (sharpen declares its own in its
``pyproject.toml`` like any other package; :mod:`sharpen.core.discovery` does the finding):

- a registered name (``code``), declared by a package in the ``sharpen`` entry-point group:
  ``"env.myenv" = "mypkg.envs:MyEnv"`` (``KIND.NAME``; loaded the first time that name is
  asked for) or ``mypkg = "mypkg.plugins"`` (a module whose decorators register plug-ins;
  imported when a name is not found otherwise);
- ``module:Name`` — an object importable from an installed module;
- ``path/to/file.py:Name`` — an object defined in a Python file.

Each kind has a contract (a Protocol with a base class that gives its optional members
documented defaults); :class:`Kind` ties the kind's name to it, so ``create(ENV, ref)`` is
typed as an ``Environment`` and a plug-in that misses a member of its contract is refused with
one message that names the members and the base class.

The registry is an explicit object (:data:`REGISTRY` is the default instance that the
decorators fill at import time); nothing else in sharpen keeps global state.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field

from sharpen.core import discovery
from sharpen.core.errors import UserError
from sharpen.core.hashing import content_hash

T = TypeVar("T")
P = TypeVar("P", bound=Callable[..., Any])

KINDS = ("env", "agent", "model", "proposer", "judge", "verifier", "detector", "trainer", "executor")
"""Every plug-in kind (the ``KIND`` of a ``KIND.NAME`` entry point)."""


FoldArgs = Callable[[Callable[..., Any], str, dict[str, Any], dict[str, Any]], dict[str, Any]]
"""See :attr:`Kind.fold_args`."""


class Kind(Generic[T]):
    """A plug-in kind and its contract: ``ENV: Kind[Environment] = Kind("env", Environment,
    "sharpen.envs.base.BaseEnvironment")``. The domain layer defines one per kind next to
    its Protocol; the registry uses it to type ``create`` and to check what it builds."""

    def __init__(self, name: str, contract: type[Any], base: str,
                 fold_args: FoldArgs | None = None) -> None:
        if name not in KINDS:
            raise ValueError(f"unknown plug-in kind {name!r}; kinds are {KINDS}")
        self.name = name
        self.contract = contract
        """The Protocol a plug-in of this kind meets."""
        self.base = base
        """Dotted path of the base class that gives the contract's defaults (for messages)."""
        self.members = discovery.protocol_members(contract)
        self.fold_args = fold_args
        """``fold_args(factory, name, args, extra)``: the args rewritten into ones the factory
        takes, when it does not take them as written (the env kind folds knob names into
        ``knobs``: :func:`sharpen.envs.arguments.fold_knobs`); it raises the
        :class:`UserError` for a name it cannot place."""

    def missing(self, obj: object) -> list[str]:
        """The members of the contract that ``obj`` lacks (empty when it conforms)."""
        return [m for m in self.members if not hasattr(obj, m)]

    def __repr__(self) -> str:
        return f"Kind({self.name!r})"


class PluginRef(BaseModel):
    """A serialisable reference to a plug-in: its registered name and constructor args."""

    model_config = ConfigDict(frozen=True)

    name: str
    """Registered name (``"code"``), or a reference: ``"mypkg.envs:MyEnv"`` or
    ``"path/to/file.py:MyEnv"``."""
    args: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for the plug-in's constructor (JSON-serialisable)."""

    def hash(self) -> str:
        """Content hash of the reference; equal refs build equal plug-ins."""
        return content_hash(self)


def _kind_name(kind: Kind[Any] | str) -> str:
    name = kind.name if isinstance(kind, Kind) else kind
    if name not in KINDS:
        raise ValueError(f"unknown plug-in kind {name!r}; kinds are {KINDS}")
    return name


class Registry:
    """Maps (kind, name) to a factory; finds names it was not told about through the
    ``sharpen`` entry points and ``module:Name`` / ``file.py:Name`` references."""

    def __init__(self, *, entry_points: bool = True) -> None:
        """``entry_points=False`` gives an empty registry that knows only what is registered
        on it (and references), e.g. for a test that plants its own plug-ins."""
        self._entries: dict[str, dict[str, Callable[..., Any]]] = {k: {} for k in KINDS}
        self._points = discovery.EntryPoints() if entry_points else None
        self._parameters: dict[Callable[..., Any], discovery.Parameters] = {}
        self._folded: dict[tuple[str, str], dict[str, Any]] = {}

    def register(self, kind: Kind[Any] | str, name: str) -> Callable[[P], P]:
        """Decorator registering ``obj`` under ``(kind, name)``; the object gets
        ``registry_name`` (the name it was registered under first)."""
        kind_name = _kind_name(kind)

        def deco(obj: P) -> P:
            existing = self._entries[kind_name].get(name)
            if existing is not None and existing is not obj:
                raise ValueError(f"{kind_name} {name!r} is already registered by {existing!r}")
            self._entries[kind_name][name] = obj
            if not hasattr(obj, "registry_name"):
                # A class or function takes any attribute; P only says it is callable.
                obj.registry_name = name  # type: ignore[attr-defined]
            return obj

        return deco

    def names(self, kind: Kind[Any] | str) -> list[str]:
        """Registered names of ``kind``, sorted: every entry point's and every name already
        registered (references are not listed)."""
        kind_name = _kind_name(kind)
        names = set(self._entries[kind_name])
        if self._points is not None:
            names |= self._points.names(kind_name)
            for module in self._points.modules():  # catch-all modules may register anything
                discovery.import_plugin_module(module)
            names |= set(self._entries[kind_name])
        return sorted(names)

    def get(self, kind: Kind[Any] | str, name: str) -> Callable[..., Any]:
        """The factory for ``(kind, name)``; an unknown name or a bad reference raises a
        :class:`UserError` that says what to write instead."""
        kind_name = _kind_name(kind)
        entries = self._entries[kind_name]
        if name in entries:
            return entries[name]
        if discovery.is_reference(name):
            obj = discovery.load_reference(kind_name, name)
            entries[name] = obj  # later lookups of the same reference are a dict hit
            return obj
        if self._points is not None:
            self._points.load(kind_name, name, self)
            if name in entries:
                return entries[name]
            for module in self._points.modules():
                discovery.import_plugin_module(module)
            if name in entries:
                return entries[name]
        known = self.names(kind_name)
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UserError(
            f"unknown {kind_name} {name!r}",
            f"{hint}known {kind_name}s: {', '.join(known) or '(none)'}; a plug-in of your own is "
            "named as module:Name or path/to/file.py:Name (docs/plugins.md)",
        )

    def add(self, kind: Kind[Any] | str, name: str, obj: Callable[..., Any]) -> None:
        """Register ``obj`` under ``(kind, name)`` unless that name is taken by it already
        (what an entry point ``KIND.NAME = module:Object`` does when loaded)."""
        kind_name = _kind_name(kind)
        if self._entries[kind_name].get(name) is not obj:
            self.register(kind_name, name)(obj)

    @overload
    def create(self, kind: Kind[T], ref: PluginRef | dict[str, Any] | str, **extra: Any) -> T: ...

    @overload
    def create(self, kind: str, ref: PluginRef | dict[str, Any] | str, **extra: Any) -> Any: ...

    def create(self, kind: Kind[Any] | str, ref: PluginRef | dict[str, Any] | str,
               **extra: Any) -> Any:
        """Build a plug-in from a ref (or a bare name). ``extra`` are non-serialised runtime
        args. With a :class:`Kind`, the result is checked against the kind's contract."""
        if isinstance(ref, str):
            ref = PluginRef(name=ref)
        elif isinstance(ref, dict):
            ref = PluginRef.model_validate(ref)
        kind_name = _kind_name(kind)
        factory = self.get(kind_name, ref.name)
        params = self._parameters.get(factory)
        if params is None:
            params = self._parameters[factory] = discovery.Parameters(factory)
        args = ref.args
        if not params.fits(args, extra):
            if isinstance(kind, Kind) and kind.fold_args is not None:
                key = (kind_name, ref.hash())  # the runner builds an env per episode: fold once
                if key not in self._folded:
                    self._folded[key] = kind.fold_args(factory, ref.name, dict(args), extra)
                args = copy.deepcopy(self._folded[key])  # a factory may keep and change its dicts
            discovery.check_arguments(kind_name, ref.name, factory, args, extra)
        obj = factory(**args, **extra)
        if isinstance(kind, Kind):
            missing = kind.missing(obj)
            if missing:
                raise UserError(
                    f"{kind_name} {ref.name!r} ({type(obj).__qualname__}) does not meet the "
                    f"{kind.contract.__name__} contract: it lacks {', '.join(missing)}",
                    f"subclass {kind.base}, which gives every optional member a default, or "
                    "define them (docs/plugins.md)",
                )
        return obj


REGISTRY = Registry()
"""The default registry, filled by the ``@register`` decorators of built-in plug-ins."""

register = REGISTRY.register
