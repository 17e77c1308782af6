"""Rubrics: the criteria a judge scores, each on a scale, read from YAML.

A rubric file::

    name: helpfulness
    description: Is the agent useful to the person who asked?   # optional
    criteria:
      - name: solved
        description: The final answer does what the task asks.
        scale: bool                       # true / false
      - name: clarity
        description: The answer is easy to follow.
        scale: 1-5                        # any LOW-HIGH integer range
        examples:                         # optional, shown to the judge
          - {text: "A bare number with no words.", value: 2}
      - name: tone
        description: How the agent speaks to the user.
        scale: [rude, neutral, friendly]  # labels, worst first

A criterion's scale fixes the reply the judge may give (a JSON Schema enum, so a constraining
backend cannot give anything else) and how its values are read as numbers for statistics:
``bool`` as 0/1, a range as itself, labels by their position (worst first).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sharpen.core.errors import UserError
from sharpen.core.hashing import content_hash

_RANGE = re.compile(r"^\s*(-?\d+)\s*-\s*(-?\d+)\s*$")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,99}$")
SCALE_FIX = ("use bool, an integer range such as 1-5, or a list of two or more labels "
             "(worst first)")


class Example(BaseModel):
    """A worked example shown to the judge: a piece of behaviour and the value it earns."""

    model_config = ConfigDict(extra="forbid")
    text: str
    value: bool | int | str
    why: str = ""


class Criterion(BaseModel):
    """One thing a judge scores."""

    model_config = ConfigDict(extra="forbid")
    name: str
    """Feedback name of the scores (``judge:NAME>=4`` filters on it)."""
    description: str
    """What the judge is to look for."""
    scale: str | list[str] = "1-5"
    """``bool``, an integer range ``LOW-HIGH``, or labels (worst first)."""
    examples: list[Example] = Field(default_factory=list)
    """Worked examples, shown to the judge."""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError(f"criterion name {v!r} must be a word (letters, digits, _ . -)")
        return v

    @field_validator("scale")
    @classmethod
    def _scale(cls, v: str | list[str]) -> str | list[str]:
        if isinstance(v, list):
            if len(v) < 2 or len(set(v)) != len(v):
                raise ValueError(f"labels {v!r} must be two or more distinct labels; "
                                 + SCALE_FIX)
            return v
        if v == "bool":
            return v
        m = _RANGE.match(v)
        if m is None or int(m[1]) >= int(m[2]):
            raise ValueError(f"unknown scale {v!r}; {SCALE_FIX}")
        return f"{int(m[1])}-{int(m[2])}"

    def choices(self) -> list[Any]:
        """Every value the judge may give, worst first."""
        if isinstance(self.scale, list):
            return list(self.scale)
        if self.scale == "bool":
            return [False, True]
        low, high = _bounds(self.scale)
        return list(range(low, high + 1))

    def value_schema(self) -> dict[str, Any]:
        """The JSON Schema of one value: an enum, so that a constraining backend can give
        nothing outside the scale (numeric bounds are not enforceable by every backend)."""
        if self.scale == "bool":
            return {"type": "boolean"}
        if isinstance(self.scale, list):
            return {"type": "string", "enum": self.choices()}
        return {"type": "integer", "enum": self.choices()}

    def as_number(self, value: Any) -> float | None:
        """``value`` read as a number for statistics (bool 0/1, range itself, label by its
        position); ``None`` for a value off the scale."""
        choices = self.choices()
        if self.scale == "bool":
            return float(value) if isinstance(value, bool) else None
        if value not in choices or isinstance(value, bool):
            return None
        return float(choices.index(value)) if isinstance(self.scale, list) else float(value)

    def describe(self) -> str:
        """The criterion as the judge reads it."""
        scale = (" / ".join(self.scale) if isinstance(self.scale, list)
                 else "true or false" if self.scale == "bool"
                 else f"an integer from {self.choices()[0]} (worst) to {self.choices()[-1]} (best)")
        lines = [f"- {self.name}: {self.description} Answer {scale}."]
        lines += [f"  Example: {e.text} -> {e.value}" + (f" ({e.why})" if e.why else "")
                  for e in self.examples]
        return "\n".join(lines)


def _bounds(scale: str) -> tuple[int, int]:
    """``(low, high)`` of a validated range scale."""
    m = _RANGE.match(scale)
    assert m is not None, scale
    return int(m[1]), int(m[2])


class Rubric(BaseModel):
    """A named set of criteria."""

    model_config = ConfigDict(extra="forbid")
    name: str
    description: str = ""
    criteria: list[Criterion] = Field(min_length=1)

    @field_validator("criteria")
    @classmethod
    def _unique(cls, v: list[Criterion]) -> list[Criterion]:
        names = [c.name for c in v]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"criteria names must be unique; repeated: {', '.join(dup)}")
        return v

    def hash(self) -> str:
        """Content hash: a judge with another rubric is another judge."""
        return content_hash(self.model_dump(mode="json"))

    def criterion(self, name: str) -> Criterion:
        return next(c for c in self.criteria if c.name == name)

    @classmethod
    def parse(cls, data: Any, where: str = "the rubric") -> Rubric:
        """A rubric from its YAML/JSON data; one :class:`UserError` naming every problem."""
        if not isinstance(data, dict):
            raise UserError(f"{where} is not a mapping with name and criteria",
                            "write name: ..., criteria: [{name, description, scale}, ...]")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'rubric'}: "
                + (e["msg"].removeprefix("Value error, ") if e["type"] != "too_short"
                   else "has no criteria")
                for e in exc.errors())
            raise UserError(f"{where} is not a valid rubric: {problems}",
                            "each criterion needs a name, a description and a scale ("
                            + SCALE_FIX + "); see docs/judges.md") from None

    @classmethod
    def load(cls, path: str | Path) -> Rubric:
        """Read a rubric file (YAML)."""
        p = Path(path)
        try:
            data = yaml.safe_load(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError(f"rubric file {p} does not exist", "check the path") from None
        except yaml.YAMLError as exc:
            raise UserError(f"rubric file {p} is not valid YAML: {exc}",
                            "fix the YAML (docs/judges.md has an example)") from None
        return cls.parse(data, f"rubric file {p}")
