"""Finding plug-ins: the ``sharpen`` entry-point group and ``module:Name`` / ``file.py:Name``
references. Used by :class:`~sharpen.core.registry.Registry`; every failure a user can cause
(a typo in a module or object name, a missing file, a dependency the plug-in needs) is one
:class:`UserError` that says what to write instead.

Entry points (``[project.entry-points.sharpen]`` in a package's ``pyproject.toml``):

- ``"KIND.NAME" = "module:Object"`` — ``Object`` is registered as ``NAME`` of ``KIND`` when
  that name is first asked for (nothing is imported before);
- ``"KIND.NAME" = "module"`` — the module is imported, and its ``@register`` decorators must
  register ``NAME``;
- ``"anything" = "module"`` (no kind prefix) — a module of ``@register`` decorators, imported
  when a name is not found otherwise (Inspect AI's convention).
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import pkgutil
import sys
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sharpen.core.errors import UserError

if TYPE_CHECKING:
    from sharpen.core.registry import Registry

GROUP = "sharpen"
"""The entry-point group plug-in packages declare."""


def protocol_members(protocol: type[Any]) -> list[str]:
    """The public members a Protocol class declares (annotations and methods, its bases
    included), in declaration order."""
    out: list[str] = []
    for klass in reversed(protocol.__mro__):
        if klass is object or klass.__name__ in ("Protocol", "Generic"):
            continue
        names = [*getattr(klass, "__annotations__", {}), *vars(klass)]
        for name in names:
            if not name.startswith("_") and name not in out:
                out.append(name)
    return out


def is_reference(name: str) -> bool:
    """Whether ``name`` is a ``module:Name`` or ``file.py:Name`` reference, not a registered
    name."""
    return ":" in name


def load_reference(kind: str, ref: str) -> Callable[..., Any]:
    """The object a ``module:Name`` or ``path/to/file.py:Name`` reference points to."""
    where, _, attr = ref.rpartition(":")
    if not where or not attr:
        raise UserError(f"bad {kind} reference {ref!r}",
                        "write it as module:Name or path/to/file.py:Name")
    if where.endswith(".py") or "/" in where or "\\" in where:
        module = _load_file(kind, ref, Path(where))
    else:
        module = _import_module(kind, ref, where)
    obj: object = getattr(module, attr, None)
    if obj is None:
        public = sorted(n for n, v in vars(module).items()
                        if not n.startswith("_") and callable(v)
                        and getattr(v, "__module__", None) == module.__name__)
        close = difflib.get_close_matches(attr, public, n=1)
        hint = f"did you mean {where}:{close[0]}? " if close else ""
        raise UserError(
            f"{where} has no {attr!r} (from {kind} reference {ref!r})",
            f"{hint}it defines: {', '.join(public) or '(nothing callable)'}",
        )
    if not callable(obj):
        raise UserError(f"{ref!r} is a {type(obj).__name__}, not a {kind} class or factory",
                        "point the reference at the class (or a function that returns the plug-in)")
    return obj


def _load_file(kind: str, ref: str, path: Path) -> types.ModuleType:
    path = path.expanduser()
    full = path.resolve()
    if not full.is_file():
        raise UserError(f"no file {str(path)!r} (from {kind} reference {ref!r})",
                        f"the path is read relative to the current folder, {Path.cwd()}")
    # One module per file, under a name no import can clash with; kept in sys.modules so
    # that pickling, dataclasses and a second reference to the same file all see one module.
    name = f"sharpen_plugin_{full.stem}_{hashlib.sha1(str(full).encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, full)
    if spec is None or spec.loader is None:
        raise UserError(f"cannot load {str(path)!r} as Python (from {kind} reference {ref!r})",
                        "the file must be a .py module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except ModuleNotFoundError as exc:
        del sys.modules[name]
        raise UserError(f"{path} imports {exc.name!r}, which is not installed",
                        f"install it (pip install {exc.name}) in the environment sharpen runs in") from None
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _import_module(kind: str, ref: str, dotted: str) -> types.ModuleType:
    try:
        return importlib.import_module(dotted)
    except ModuleNotFoundError as exc:
        missing = exc.name or dotted
        if dotted != missing and not dotted.startswith(missing + "."):
            raise UserError(f"module {dotted!r} imports {missing!r}, which is not installed",
                            f"install it (pip install {missing.split('.')[0]})") from None
        raise UserError(f"cannot import module {dotted!r} (from {kind} reference {ref!r})",
                        _module_hint(dotted)) from None


def _module_hint(dotted: str) -> str:
    """What to write instead of a module that cannot be imported: the closest module name,
    or the file form when the module is a file in the current folder."""
    as_file = Path(*dotted.split(".")).with_suffix(".py")
    if as_file.is_file():
        return (f"{as_file} is a file here but not an installed module: name it as "
                f"{as_file}:Name, or install its package")
    close = _close_module(dotted)
    if close:
        return f"did you mean {close}?"
    return "check the module name, and that its package is installed where sharpen runs"


def _close_module(dotted: str) -> str | None:
    """The importable module name closest to ``dotted``, part by part (``pkgz.envs`` →
    ``pkg.envs``), or ``None``."""
    parent, _, leaf = dotted.rpartition(".")
    if not parent:
        found = difflib.get_close_matches(leaf, [m.name for m in pkgutil.iter_modules()], n=1)
        return found[0] if found else None
    try:
        package = importlib.import_module(parent)
    except ImportError:
        fixed = _close_module(parent)
        return f"{fixed}.{leaf}" if fixed else None
    names = [m.name for m in pkgutil.iter_modules(getattr(package, "__path__", []))]
    found = difflib.get_close_matches(leaf, names, n=1)
    return f"{parent}.{found[0]}" if found else None


def import_plugin_module(module: str) -> None:
    """Import a catch-all plug-in module (its decorators register what it holds)."""
    _import_module("plug-in", module, module)


class EntryPoints:
    """The ``sharpen`` entry points of every installed distribution, read once."""

    def __init__(self) -> None:
        self._by_name: dict[tuple[str, str], list[importlib.metadata.EntryPoint]] | None = None
        self._modules: list[str] = []
        self._imported = False

    def _scan(self) -> dict[tuple[str, str], list[importlib.metadata.EntryPoint]]:
        if self._by_name is None:
            from sharpen.core.registry import KINDS

            by_name: dict[tuple[str, str], list[importlib.metadata.EntryPoint]] = {}
            for ep in importlib.metadata.entry_points(group=GROUP):
                kind, dot, name = ep.name.partition(".")
                if dot and kind in KINDS and name:
                    by_name.setdefault((kind, name), []).append(ep)
                else:
                    self._modules.append(ep.value)
            self._by_name = by_name
        return self._by_name

    def names(self, kind: str) -> set[str]:
        """Names entry points declare for ``kind`` (nothing is imported)."""
        return {name for k, name in self._scan() if k == kind}

    def modules(self) -> list[str]:
        """Catch-all plug-in modules, each returned once (a second call gives none)."""
        self._scan()
        if self._imported:
            return []
        self._imported = True
        return list(self._modules)

    def load(self, kind: str, name: str, registry: Registry) -> None:
        """Load the entry point ``kind.name`` (if any) into ``registry``."""
        points = self._scan().get((kind, name), [])
        if not points:
            return
        if len({ep.value for ep in points}) > 1:
            owners = ", ".join(f"{ep.value} ({_dist(ep)})" for ep in points)
            raise UserError(f"{kind} {name!r} is declared by more than one package: {owners}",
                            "uninstall one of them, or name the one you want as module:Name")
        ep = points[0]
        try:
            obj = ep.load()
        except ModuleNotFoundError as exc:
            raise UserError(
                f"{kind} {name!r} (entry point {ep.value} of {_dist(ep)}) needs {exc.name!r}, "
                "which is not installed", f"install it (pip install {(exc.name or '').split('.')[0]})",
            ) from None
        except AttributeError as exc:
            raise UserError(f"entry point {kind}.{name} of {_dist(ep)} is broken: {exc}",
                            f"fix the value {ep.value!r} in that package's pyproject.toml") from None
        if not isinstance(obj, types.ModuleType):
            registry.add(kind, name, obj)
        else:
            from sharpen.core.registry import REGISTRY

            # A module entry point registered through the decorators, i.e. on REGISTRY.
            if registry is not REGISTRY and name in REGISTRY._entries[kind]:
                registry.add(kind, name, REGISTRY._entries[kind][name])


def _dist(ep: importlib.metadata.EntryPoint) -> str:
    dist = ep.dist
    return f"package {dist.name}" if dist is not None else "an installed package"


class Parameters:
    """What a factory's signature accepts, read once (``inspect.signature`` costs tens of
    microseconds, and the runner builds an environment and an agent per episode)."""

    def __init__(self, factory: Callable[..., Any]) -> None:
        try:
            sig = inspect.signature(factory)
        except (TypeError, ValueError):  # a builtin or C callable: accept, let the call say
            self.names: frozenset[str] | None = None
            self.required: frozenset[str] = frozenset()
            return
        params = list(sig.parameters.values())
        var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
        keyword = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        self.names = None if var_kw else frozenset(p.name for p in keyword)
        """Keyword names it takes (``None``: any)."""
        self.required = frozenset(p.name for p in keyword if p.default is p.empty)
        """Keyword names it needs."""

    def fits(self, args: dict[str, Any], extra: dict[str, Any]) -> bool:
        """Whether calling with ``**args, **extra`` binds (the fast path of
        :func:`check_arguments`, which says what is wrong when it does not)."""
        if self.names is not None and any(k not in self.names for k in (*args, *extra)):
            return False
        return all(r in args or r in extra for r in self.required)


def check_arguments(kind: str, name: str, factory: Callable[..., Any], args: dict[str, Any],
                    extra: dict[str, Any], knobs: Sequence[str] = ()) -> None:
    """A :class:`UserError` unless ``factory`` takes ``args`` (the serialised ones, which a
    user wrote) and ``extra``: it names each unknown argument with the closest valid one and
    lists what the plug-in takes. Checked before the call, so a ``TypeError`` raised inside a
    plug-in is never mistaken for a config mistake. ``knobs`` are further names the plug-in
    accepts (an environment's knobs, see :mod:`sharpen.envs.arguments`): an arg named by one
    is not unknown, and they are suggested and listed with the arguments."""
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return  # a builtin or C callable: let the call say
    try:
        sig.bind(**args, **extra)
        return
    except TypeError as exc:
        problem = str(exc)
    params = [p for p in sig.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
              and p.name not in extra]
    takes = ", ".join(p.name if p.default is p.empty else f"{p.name}={p.default!r}" for p in params)
    accepts_any = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    known = [p.name for p in params] + [k for k in knobs if k not in extra]
    unknown = [a for a in args if a not in known] if not accepts_any else []
    if unknown:
        parts = []
        for arg in unknown:
            close = difflib.get_close_matches(arg, known, n=1)
            parts.append(f"{arg!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        problem = f"unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(parts)}"
    knob_list = f"; knobs: {', '.join(knobs)}" if knobs else ""
    raise UserError(f"bad arguments for {kind} {name!r}: {problem}",
                    f"it takes: {takes or '(no arguments)'}{knob_list}")
