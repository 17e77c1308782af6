"""Tasks of the ``reasoning_gym`` env: any reasoning-gym dataset, its configs, presets, scoring.

reasoning-gym (PyPI ``reasoning-gym``) registers ~100 procedural datasets; each is a
``ProceduralDataset`` built from a config dataclass (``seed``, ``size`` and its own knobs)
whose ``i``-th entry is ``{"question", "answer", "metadata"}`` and whose ``score_answer(answer,
entry)`` returns a score in [0, 1]. Nothing is downloaded: the generators ship in the wheel.

- **Config.** A task's knobs are ``{"dataset": NAME, "config": {...}}``: the dataset's config
  fields without ``seed`` and ``size``, as JSON (tuples become lists). They are resolved in one
  order: the difficulty preset, then the user's ``config`` overrides, then validated by
  building the dataset's config class (a bad field or value is a :class:`UserError`).
- **Presets.** Most datasets declare a curriculum: attributes with ordered levels (e.g.
  ``num_terms`` 2..6). ``easy`` / ``medium`` / ``hard`` put every attribute at its first /
  middle / last level, read in reasoning-gym's ``UPPER_BOUND`` mode (only the range of that
  level, so ``hard`` does not mix in easy items). A dataset without a curriculum has the one
  preset ``default`` (its default config).
- **Determinism.** The entry of a task is regenerated from ``(dataset, config, seed)`` alone:
  the dataset is built with ``seed=task.seed, size=1`` and entry 0 is taken. The seed lies in
  its split's range (:mod:`sharpen.envs.generation`), so splits never share an instance.
- **Scoring.** :func:`score_answer` is the dataset's own ``score_answer`` on the regenerated
  entry; success means a score of 1.0.
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import enum
import json
import types
import typing
from typing import Any

from sharpen.core.errors import UserError
from sharpen.core.task import TaskSpec
from sharpen.envs import generation
from sharpen.envs.adapters.optional import install_hint, require
from sharpen.envs.base import Knob

ENV_NAME = "reasoning_gym"
DEFAULT_DATASET = "basic_arithmetic"
LEVELS = ("easy", "medium", "hard")
NO_CURRICULUM = "default"
"""The one preset of a dataset that declares no curriculum."""
_HIDDEN_FIELDS = ("seed", "size")


def _registry() -> tuple[dict[str, tuple[type, type]], dict[str, Any]]:
    """reasoning-gym's ``(DATASETS, CURRICULA)`` tables (importing the package registers them)."""
    require("reasoning_gym")
    factory = require("reasoning_gym.factory")
    return factory.DATASETS, factory.CURRICULA


def dataset_names() -> list[str]:
    """Every registered reasoning-gym dataset, sorted."""
    return sorted(_registry()[0])


def check_dataset(name: str) -> str:
    """``name`` if reasoning-gym registers it, else a :class:`UserError` with a suggestion."""
    names = dataset_names()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UserError(f"unknown reasoning-gym dataset {name!r}",
                        f"{hint}datasets include {', '.join(names[:8])}, ... ({len(names)} in all)")
    return name


def _plain(value: Any) -> Any:
    """``json.dumps`` fallback: an Enum's value, a date or time in ISO format, any other
    iterable as a list."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    return list(value)


def _as_json(config: Any) -> dict[str, Any]:
    """A config dataclass as a JSON-safe dict without ``seed`` and ``size``."""
    out = {k: v for k, v in dataclasses.asdict(config).items() if k not in _HIDDEN_FIELDS}
    return json.loads(json.dumps(out, default=_plain))


def _typed(value: Any, hint: Any) -> Any:
    """``value`` read back from JSON as ``hint``: nested config dataclasses, enums, dates and
    times, tuples (a config built from plain JSON would otherwise hold dicts and strings where the dataset
    expects objects)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        return _typed(value, options[0]) if value is not None and len(options) == 1 else value
    if isinstance(hint, type) and dataclasses.is_dataclass(hint) and isinstance(value, dict):
        hints = typing.get_type_hints(hint)
        return hint(**{k: _typed(v, hints.get(k)) for k, v in value.items()})
    if isinstance(hint, type) and issubclass(hint, enum.Enum) and not isinstance(value, hint):
        return hint(value)
    if hint in (datetime.date, datetime.time, datetime.datetime) and isinstance(value, str):
        return hint.fromisoformat(value)
    if origin is list and args and isinstance(value, list):
        return [_typed(v, args[0]) for v in value]
    if origin is tuple and args and isinstance(value, list | tuple):
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_typed(v, args[0]) for v in value)
        return tuple(_typed(v, a) for v, a in zip(value, args, strict=False))
    return value


def presets(name: str) -> dict[str, dict[str, Any]]:
    """Named preset configs of dataset ``name`` (see the module doc)."""
    datasets, curricula = _registry()
    if name not in curricula:
        return {NO_CURRICULUM: _as_json(datasets[name][1]())}
    context_mod = require("reasoning_gym.coaching.base_curriculum")
    context = context_mod.DefaultCurriculumContext(mode=context_mod.RangeAttributeMode.UPPER_BOUND)
    out = {}
    for level in LEVELS:
        curriculum = curricula[name]()
        for attr_name, attr in curriculum.attributes.items():
            last = len(attr.levels) - 1
            curriculum.set_attr_level(attr_name, {"easy": 0, "medium": last // 2, "hard": last}[level])
        out[level] = _as_json(curriculum.generate_configuration({}, context))
    return out


def default_difficulty(name: str) -> str:
    """``easy`` for a dataset with a curriculum, else ``default``."""
    return next(iter(presets(name)))


def config_class(name: str) -> type:
    """The config dataclass of dataset ``name``."""
    return _registry()[0][check_dataset(name)][1]


def build_dataset(name: str, config: dict[str, Any], seed: int, size: int = 1) -> Any:
    """The dataset ``name`` at ``config`` and ``seed``; a bad config is a :class:`UserError`
    listing the config's fields."""
    datasets, _ = _registry()
    dataset_cls, config_cls = datasets[check_dataset(name)]
    try:
        hints = typing.get_type_hints(config_cls)
        typed = {k: _typed(v, hints.get(k)) for k, v in config.items()}
        return dataset_cls(config=config_cls(**typed, seed=seed, size=size))
    except (TypeError, ValueError, AssertionError, KeyError) as exc:
        fields = ", ".join(f.name for f in dataclasses.fields(config_cls) if f.name not in _HIDDEN_FIELDS)
        raise UserError(f"bad config for reasoning-gym dataset {name!r}: {exc or type(exc).__name__}",
                        f"its config fields are: {fields}") from None


def resolve_config(name: str, difficulty: str | None, overrides: dict[str, Any] | None) -> dict:
    """Full, validated config of ``name``: the ``difficulty`` preset (default: the first),
    then ``overrides``."""
    table = presets(check_dataset(name))
    level = difficulty or next(iter(table))
    if level not in table:
        raise UserError(f"unknown difficulty {level!r} for reasoning-gym dataset {name!r}",
                        f"use one of {', '.join(table)} (datasets without a curriculum have "
                        f"only {NO_CURRICULUM!r}), or set config fields directly")
    if overrides is not None and not isinstance(overrides, dict):
        raise UserError(f"config must be a mapping of config fields, got {overrides!r}",
                        "pass e.g. config={min_terms: 3}")
    config = {**table[level], **(overrides or {})}
    config = json.loads(json.dumps(config, default=_plain))
    build_dataset(name, config, seed=0)  # validate now, not at reset
    return config


def difficulty_of(name: str, config: dict[str, Any]) -> str:
    """The preset of ``name`` whose config equals ``config``, else ``"custom"``."""
    return generation.difficulty_of(presets(name), config)


def entry_of(task: TaskSpec) -> dict[str, Any]:
    """The reasoning-gym entry of ``task``, regenerated from its dataset, config and seed."""
    return build_dataset(task.knobs["dataset"], task.knobs["config"], task.seed)[0]


def score_answer(task: TaskSpec, answer: str | None) -> tuple[float, str]:
    """``(score, note)`` of ``answer`` on ``task`` by the dataset's own ``score_answer``; a
    scorer that raises on a malformed answer scores 0 and says so in ``note``."""
    dataset = build_dataset(task.knobs["dataset"], task.knobs["config"], task.seed)
    entry = dataset[0]
    try:
        value = float(dataset.score_answer(answer, entry))
    except Exception as exc:  # noqa: BLE001 — a dataset's scorer choking on garbage is a 0
        return 0.0, f"score_answer raised {type(exc).__name__}: {str(exc)[:200]}"
    return max(0.0, min(1.0, value)), ""


def _knob_type(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin in (list, tuple) or tp in (list, tuple):
        return "list"
    if origin is typing.Literal:
        return "choice"
    return {bool: "bool", int: "int", float: "float", str: "str"}.get(tp, "any")


class ReasoningGymGenerator:
    """The :class:`~sharpen.envs.base.Generator` of one reasoning-gym dataset. Its knobs are
    ``dataset`` and ``config``; :meth:`knobs` lists the config fields one by one for people."""

    def __init__(self, dataset: str = DEFAULT_DATASET) -> None:
        self.dataset = check_dataset(dataset)

    def knobs(self) -> list[Knob]:
        """``dataset`` (a choice), then each config field with its easiest-preset value."""
        first = next(iter(presets(self.dataset).values()))
        hints = typing.get_type_hints(config_class(self.dataset))
        out = [Knob(name="dataset", type="choice", default=DEFAULT_DATASET, choices=dataset_names(),
                    help="the reasoning-gym dataset")]
        for field, value in first.items():
            tp = hints.get(field)
            out.append(Knob(name=field, type=_knob_type(tp), default=value,
                            choices=list(typing.get_args(tp)) if _knob_type(tp) == "choice" else None,
                            help=f"{self.dataset} config field; set it with -E {field}=... "
                                 f"or config={{{field}: ...}}"))
        return out

    def presets(self) -> dict[str, dict[str, Any]]:
        """Preset configs of the dataset."""
        return presets(self.dataset)

    def sample(self, knobs: dict[str, Any], seed: int, split: str = "test") -> TaskSpec:
        """The ``seed``-th task of ``split`` at ``knobs`` (``{"dataset", "config"}``; a
        missing ``config`` is the dataset's first preset)."""
        name = check_dataset(knobs.get("dataset", self.dataset))
        config = resolve_config(name, None, knobs.get("config"))
        task_seed = generation.seed_for(split, seed)
        dataset = build_dataset(name, config, task_seed)
        try:
            entry = dataset[0]
        except Exception as exc:  # noqa: BLE001 — some curricula reach configs their generator fails on
            raise UserError(f"reasoning-gym dataset {name!r} failed to generate a task at config "
                            f"{config}: {type(exc).__name__}: {exc}",
                            "use an easier difficulty or change config") from None
        level = difficulty_of(name, config)
        return TaskSpec(
            env=ENV_NAME, id=f"{name}/{level}/{task_seed}", seed=task_seed,
            knobs={"dataset": name, "config": config}, split=generation.as_split(split),
            metadata={"difficulty": level, "dataset": name, "question": str(entry["question"]),
                      "answer": str(entry["answer"])},
        )

    def reference_answer(self, task: TaskSpec) -> str | None:
        """The entry's gold answer if the dataset's own scorer gives it 1.0, else ``None``
        (datasets with many valid answers may store none)."""
        gold = entry_of(task).get("answer")
        if gold is None:
            return None
        return str(gold) if score_answer(task, str(gold))[0] >= 1.0 else None

    def is_solvable(self, task: TaskSpec) -> bool:
        """Whether the task can be checked: its gold answer scores 1.0."""
        return self.reference_answer(task) is not None


MISSING = f"needs the reasoning-gym package: {install_hint('reasoning_gym')}"
"""What ``describe()`` says when reasoning-gym is not installed."""
