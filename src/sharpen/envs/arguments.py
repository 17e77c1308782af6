"""An environment's arguments: its constructor's parameters, and its knobs as arguments too.

``-E n_ops=2``, ``env: {name: code, args: {n_ops: 2}}`` in YAML and
``sharpen.run("code", env_args={"n_ops": 2})`` all reach :meth:`Registry.create`, which calls
:func:`fold_knobs` (the env kind's ``fold_args`` hook) when an arg is not a constructor
parameter: a knob name given as a top-level arg is moved into the knob overrides, so each
name that ``sharpen envs NAME`` lists is accepted wherever an env's args are written.

Rules:

- an arg that is both a constructor parameter and a knob is the constructor's (reasoning_gym's
  ``dataset``, textarena's ``game``);
- a knob given at the top level overrides the same knob inside ``knobs={...}``;
- the knobs are those the env's ``describe()`` lists once built from its constructor args, so
  envs whose knobs depend on an arg (reasoning_gym's config fields depend on ``dataset``) fold
  the right ones;
- an unknown name is a :class:`UserError` with "did you mean" over the arguments and the
  knobs, and the list of both (:func:`sharpen.core.discovery.check_arguments`).
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from sharpen.core import discovery

KNOB_PARAMETERS = ("knobs", "config")
"""Constructor parameters that take knob overrides, first match wins (``config`` is
reasoning_gym's: its knobs are the dataset's config fields)."""


class Argument(BaseModel):
    """One constructor argument of an environment, read from its signature."""

    name: str
    """Parameter name (what ``-E name=value`` sets)."""
    type: str
    """The annotation as written (``"int"``, ``"Literal['full', 'binary']"``), or ``""``."""
    default: Any = None
    """Default value (JSON-ready; an object JSON cannot hold is shown as its ``repr``)."""
    required: bool = False
    """No default: the env cannot be built without it."""
    help: str = ""
    """The line the class docstring gives it (``- ``name``: text``), if any."""


def knob_parameter(factory: Callable[..., Any]) -> str | None:
    """The constructor parameter that takes knob overrides (:data:`KNOB_PARAMETERS`), or
    ``None`` when the env takes none."""
    names = discovery.Parameters(factory).names
    if names is None:
        return None
    return next((p for p in KNOB_PARAMETERS if p in names), None)


def fold_knobs(factory: Callable[..., Any], name: str, args: dict[str, Any],
               extra: dict[str, Any]) -> dict[str, Any]:
    """``args`` with each knob name that is not a constructor parameter moved into the knob
    overrides (``knobs``, or ``config`` for reasoning_gym); see the module doc for the rules.

    The knobs come from ``describe()`` of the env built from its constructor args alone (a
    probe: built, never reset, so it holds nothing to release). An arg that is neither a
    parameter nor a knob is a :class:`UserError` that suggests the closest name and lists the
    arguments and knobs."""
    names = discovery.Parameters(factory).names
    if names is None:  # takes **kwargs: every arg is the constructor's
        return args
    ctor = {k: v for k, v in args.items() if k in names}
    loose = {k: v for k, v in args.items() if k not in names}
    target = knob_parameter(factory)
    if not loose or target is None:
        discovery.check_arguments("env", name, factory, args, extra)
        return args
    discovery.check_arguments("env", name, factory, ctor, extra)
    knobs = [k.name for k in factory(**ctor, **extra).describe().knobs]
    if any(k not in knobs for k in loose):
        discovery.check_arguments("env", name, factory, args, extra, knobs=knobs)
    overrides = ctor.get(target) or {}
    return {**ctor, target: {**overrides, **loose}}


def constructor_arguments(factory: Callable[..., Any]) -> list[Argument]:
    """The keyword parameters of ``factory`` (an env class or function) with their
    annotations, defaults and docstring lines; empty for a signature that cannot be read."""
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return []
    helps = _docstring_lines(inspect.getdoc(factory) or "")
    out = []
    for p in sig.parameters.values():
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            continue
        annotation = "" if p.annotation is p.empty else p.annotation
        out.append(Argument(
            name=p.name,
            type=annotation if isinstance(annotation, str) else inspect.formatannotation(annotation),
            default=None if p.default is p.empty else _plain(p.default),
            required=p.default is p.empty,
            help=helps.get(p.name, ""),
        ))
    return out


_ROLE = re.compile(r":\w+:`~?([^`]+)`")
_ARG_LINE = re.compile(r"^\s*- ``(\w+)``: (.+?)(?=^\s*- ``|\Z)", re.M | re.S)


def _docstring_lines(doc: str) -> dict[str, str]:
    """``{name: text}`` from docstring lines ``- ``name``: text`` (continued lines joined,
    a trailing ``;`` or ``.`` dropped)."""
    return {m[1]: _ROLE.sub(r"\1", " ".join(m[2].split()).rstrip(";.")).replace("``", "")
            for m in _ARG_LINE.finditer(doc)}


def _plain(value: Any) -> Any:
    """``value`` if JSON can hold it, else its ``repr``."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value
