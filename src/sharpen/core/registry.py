"""The plug-in registry: every plug-in is created from, and serialises to, ``{name, args}``.

Environments, agents, models, proposers and judges register themselves with a decorator::

    @register("env", "code")
    class CodeEnv: ...

and are built from a :class:`PluginRef` (``{"name": "code", "args": {...}}``), which is what
YAML configs, CLI overrides, resume hashes and re-scoring from the store all share.

The registry is an explicit object (:data:`REGISTRY` is the default instance that the
decorators fill at import time); nothing else in sharpen keeps global state.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from sharpen.core.errors import UserError
from sharpen.core.hashing import content_hash

T = TypeVar("T")

KINDS = ("env", "agent", "model", "proposer", "judge", "verifier")

# Modules that register the built-in plug-ins. Importing them lazily keeps `import sharpen`
# fast and lets optional dependencies (llama.cpp) stay optional.
# One module per line: each environment package registers its env and its verifier.
_ENV_MODULES: tuple[str, ...] = (
    "sharpen.envs.code",
    "sharpen.envs.gridsafety",
    "sharpen.envs.sql",
    "sharpen.envs.shell",
    "sharpen.envs.adapters.reasoning_gym_env",
    "sharpen.envs.adapters.textarena_env",
    "sharpen.envs.adapters.from_gym",
    "sharpen.envs.toolshop",
    "sharpen.envs.negotiation",
    "sharpen.envs.textworld",
)
_BUILTIN_MODULES: dict[str, tuple[str, ...]] = {
    "env": _ENV_MODULES,
    "agent": ("sharpen.agents.tool_agent", "sharpen.agents.baselines", "sharpen.agents.reflexion"),
    "model": ("sharpen.models.local", "sharpen.models.openai_compat", "sharpen.models.replay"),
    "verifier": _ENV_MODULES,
    "proposer": (
        "sharpen.improve.proposers.reflexion",
        "sharpen.improve.proposers.guidelines",
        "sharpen.improve.proposers.evolve",
        "sharpen.improve.proposers.opro",
        "sharpen.improve.proposers.best_of_n",
    ),
}


class PluginRef(BaseModel):
    """A serialisable reference to a plug-in: its registered name and constructor args."""

    model_config = ConfigDict(frozen=True)

    name: str
    """Registered name, e.g. ``"code"``."""
    args: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for the plug-in's constructor (JSON-serialisable)."""

    def hash(self) -> str:
        """Content hash of the reference; equal refs build equal plug-ins."""
        return content_hash(self)


class Registry:
    """Maps (kind, name) to a factory."""

    def __init__(self) -> None:
        self._entries: dict[str, dict[str, Callable[..., Any]]] = {k: {} for k in KINDS}
        self._loaded: set[str] = set()

    def register(self, kind: str, name: str) -> Callable[[T], T]:
        """Decorator registering ``obj`` under ``(kind, name)``; the object gets ``registry_name``."""
        if kind not in self._entries:
            raise ValueError(f"unknown plug-in kind {kind!r}; kinds are {KINDS}")

        def deco(obj: T) -> T:
            existing = self._entries[kind].get(name)
            if existing is not None and existing is not obj:
                raise ValueError(f"{kind} {name!r} is already registered by {existing!r}")
            self._entries[kind][name] = obj  # type: ignore[assignment]
            obj.registry_name = name
            return obj

        return deco

    def _load_builtins(self, kind: str) -> None:
        if kind in self._loaded:
            return
        self._loaded.add(kind)
        for module in _BUILTIN_MODULES.get(kind, ()):
            importlib.import_module(module)

    def names(self, kind: str) -> list[str]:
        """Registered names of ``kind``, sorted."""
        self._load_builtins(kind)
        return sorted(self._entries[kind])

    def get(self, kind: str, name: str) -> Callable[..., Any]:
        """The factory for ``(kind, name)``; an unknown name raises a :class:`UserError`."""
        self._load_builtins(kind)
        try:
            return self._entries[kind][name]
        except KeyError:
            known = sorted(self._entries[kind])
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise UserError(
                f"unknown {kind} {name!r}",
                f"{hint}known {kind}s: {', '.join(known) or '(none)'}",
            ) from None

    def create(self, kind: str, ref: PluginRef | dict[str, Any] | str, **extra: Any) -> Any:
        """Build a plug-in from a ref (or a bare name). ``extra`` are non-serialised runtime args."""
        if isinstance(ref, str):
            ref = PluginRef(name=ref)
        elif isinstance(ref, dict):
            ref = PluginRef.model_validate(ref)
        factory = self.get(kind, ref.name)
        try:
            return factory(**ref.args, **extra)
        except TypeError as exc:
            raise UserError(
                f"bad arguments for {kind} {ref.name!r}: {exc}",
                "check the argument names in your config or CLI flags",
            ) from None


REGISTRY = Registry()
"""The default registry, filled by the ``@register`` decorators of built-in plug-ins."""

register = REGISTRY.register
