"""What every procedural task generator shares: split seed ranges and knob resolution.

Splits own disjoint seed ranges — split ``i`` (train, val, test) owns
``[i * SPLIT_SPAN, (i + 1) * SPLIT_SPAN)`` — so the seed in a TaskSpec alone says which split
a task belongs to, and no test task can be generated for train. Knobs are resolved in one
order everywhere: the knob defaults, then the named difficulty preset, then explicit
overrides, each override checked against its :class:`~sharpen.envs.base.Knob`.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Protocol

from sharpen.core.errors import UserError
from sharpen.core.messages import ToolSpec
from sharpen.core.task import Split, TaskSpec
from sharpen.envs.base import BaseEnvironment, EnvInfo, Generator, Knob

SPLITS: tuple[Split, ...] = ("train", "val", "test")
SPLIT_SPAN = 1_000_000_000
"""Seeds per split."""


def split_of_seed(seed: int) -> Split:
    """The split a generated task's seed belongs to."""
    return SPLITS[(seed // SPLIT_SPAN) % len(SPLITS)]


def seed_for(split: str, index: int) -> int:
    """The seed of the ``index``-th task of ``split`` (``index`` is taken modulo SPLIT_SPAN)."""
    if split not in SPLITS:
        raise UserError(f"unknown split {split!r}", f"use one of {', '.join(SPLITS)}")
    return SPLITS.index(split) * SPLIT_SPAN + index % SPLIT_SPAN


def check_knob(knob: Knob, value: Any) -> Any:
    """``value`` if it is valid for ``knob`` (floats normalised to ``float``), else a
    :class:`UserError` saying what the knob accepts."""
    low, high = knob.low or 0, knob.high or 0
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if knob.type == "choice":
        ok, allowed = value in (knob.choices or []), f"one of {', '.join(map(str, knob.choices or []))}"
    elif knob.type == "bool":
        ok, allowed = isinstance(value, bool), "true or false"
    elif knob.type == "int":
        ok = number and isinstance(value, int) and low <= value <= high
        allowed = f"an integer from {int(low)} to {int(high)}"
    else:
        ok, allowed = number and low <= value <= high, f"a number from {low} to {high}"
        value = float(value) if ok else value
    if not ok:
        raise UserError(f"bad value {value!r} for knob {knob.name!r}", f"use {allowed}")
    return value


def resolve_knobs(
    schema: Iterable[Knob],
    presets: Mapping[str, Mapping[str, Any]],
    knobs: Mapping[str, Any] | None,
    difficulty: str | None,
    *,
    what: str,
) -> dict[str, Any]:
    """Full, validated knobs: defaults, then the ``difficulty`` preset, then ``knobs``.
    ``what`` names the tasks in error messages (e.g. ``"sql tasks"``)."""
    if difficulty is not None and difficulty not in presets:
        raise UserError(f"unknown difficulty {difficulty!r}", f"use one of {', '.join(presets)}")
    spec = {k.name: k for k in schema}
    out: dict[str, Any] = {k.name: k.default for k in spec.values()}
    out.update(presets[difficulty] if difficulty else {})
    for name, value in (knobs or {}).items():
        if name not in spec:
            raise UserError(f"unknown knob {name!r} for {what}", f"knobs are {', '.join(spec)}")
        out[name] = check_knob(spec[name], value)
    return out


def difficulty_of(presets: Mapping[str, Mapping[str, Any]], knobs: Mapping[str, Any]) -> str:
    """The preset whose knobs equal ``knobs`` exactly, else ``"custom"``."""
    return next((name for name, p in presets.items() if p == knobs), "custom")


DEFAULT_LIMIT = 50
"""Tasks a generated environment lists when no limit is given."""


def check_split(split: str | None) -> None:
    """A :class:`UserError` unless ``split`` is ``None`` or one of :data:`SPLITS`."""
    if split is not None and split not in SPLITS:
        raise UserError(f"unknown split {split!r}", f"use one of {', '.join(SPLITS)}")


def as_split(split: str) -> Split:
    """``split`` as a :data:`~sharpen.core.task.Split`; the :class:`UserError` of
    :func:`check_split` for any other name."""
    for s in SPLITS:
        if s == split:
            return s
    raise UserError(f"unknown split {split!r}", f"use one of {', '.join(SPLITS)}")


def parse_split(split: str | None) -> Split | None:
    """:func:`as_split`, with ``None`` (every split) kept."""
    return None if split is None else as_split(split)


def list_generated(
    generator: Generator, knobs: dict[str, Any], split: str | None, limit: int | None, seed: int
) -> list[TaskSpec]:
    """``limit`` (default :data:`DEFAULT_LIMIT`) tasks from ``generator`` at ``knobs``. The
    ``i``-th task of a split has the ``i``-th distinct index drawn from
    ``random.Random(seed)``, so a shorter list is a prefix of a longer one; ``split=None``
    takes train, val and test tasks in turn."""
    check_split(split)
    n = DEFAULT_LIMIT if limit is None else limit
    splits = SPLITS if split is None else (split,)
    per_split = -(-n // len(splits))
    rng = random.Random(seed)
    indices: dict[int, None] = {}
    while len(indices) < per_split:
        indices.setdefault(rng.randrange(SPLIT_SPAN), None)
    return [generator.sample(knobs, i, s) for i in indices for s in splits][:n]


class PresetKnobs:
    """The knob half of the :class:`~sharpen.envs.base.Generator` protocol, shared by every
    generator: a subclass sets ``KNOB_SCHEMA`` and ``PRESET_TABLE``."""

    KNOB_SCHEMA: tuple[Knob, ...] = ()
    PRESET_TABLE: Mapping[str, Mapping[str, Any]] = {}

    def knobs(self) -> list[Knob]:
        """The knob schema (copies; defaults are the ``easy`` preset)."""
        return [k.model_copy() for k in self.KNOB_SCHEMA]

    def presets(self) -> dict[str, dict[str, Any]]:
        """Named presets (copies)."""
        return {name: dict(p) for name, p in self.PRESET_TABLE.items()}


class PresetGenerator(Generator, Protocol):
    """A :class:`~sharpen.envs.base.Generator` with named presets (as :class:`PresetKnobs`
    gives one)."""

    def presets(self) -> dict[str, dict[str, Any]]: ...


class GeneratedEnv(BaseEnvironment):
    """``describe()`` and ``list_tasks()`` of an environment whose tasks all come from one
    :class:`PresetKnobs` generator. A subclass sets ``ENV_NAME`` and ``DESCRIPTION`` and has
    ``generator``, ``knob_values`` (the resolved knobs of its difficulty) and ``tools``."""

    ENV_NAME: ClassVar[str] = ""
    DESCRIPTION: ClassVar[str] = ""
    generator: PresetGenerator
    knob_values: dict[str, Any]
    tools: list[ToolSpec]

    def describe(self) -> EnvInfo:
        """Name, knobs, presets, task counts, tools."""
        return EnvInfo(
            name=self.ENV_NAME, description=self.DESCRIPTION, knobs=self.generator.knobs(),
            difficulties=list(self.generator.presets()),
            task_counts={s: DEFAULT_LIMIT for s in SPLITS}, tools=[t.name for t in self.tools],
            stages=dict(self.stages), perturbations=dict(self.perturbations),
        )

    def list_tasks(
        self, split: str | None = None, limit: int | None = None, seed: int = 0
    ) -> list[TaskSpec]:
        """``limit`` (default 50) tasks at the env's knobs; the ``i``-th task of a split has
        the ``i``-th distinct index drawn from ``random.Random(seed)`` (a shorter list is a
        prefix of a longer one); ``split=None`` takes train, val and test tasks in turn."""
        return list_generated(self.generator, self.knob_values, split, limit, seed)
