"""Checks of environment constructor args, each failing with one message that names the fix."""

from __future__ import annotations

from typing import Any

from sharpen.core.errors import UserError


def positive_int(name: str, value: Any) -> int:
    """``value`` if it is an integer ≥ 1, else a :class:`UserError`."""
    if not isinstance(value, int) or value < 1:
        raise UserError(f"{name} must be a positive integer, got {value!r}",
                        f"set {name} to 1 or more")
    return value


def positive_seconds(name: str, value: Any) -> float:
    """``value`` as a float if it is a number above 0, else a :class:`UserError`."""
    if not isinstance(value, int | float) or not value > 0:
        raise UserError(f"{name} must be positive, got {value!r}",
                        f"set {name} to a number of seconds above 0")
    return float(value)
