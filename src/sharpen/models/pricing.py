"""Token prices from a user-editable YAML table; no price lives in Python source.

The table maps a model name (or a shell-style glob such as ``local/*``) to US dollars per
one million input and output tokens::

    "local/*": {input: 0, output: 0}
    "gpt-4o-mini*": {input: 0.15, output: 0.60}

Tables are layered, first match wins:

1. the file named by ``$SHARPEN_PRICES`` (it must exist when set),
2. ``.sharpen/prices.yaml`` in the current working directory,
3. the default table shipped as package data (``sharpen/data/prices.yaml``).

Within one layer an exact name beats a glob and a longer glob beats a shorter one. A model
that matches no entry has an *unknown* cost: :func:`cost` returns ``None``, never ``0``.
"""

from __future__ import annotations

import fnmatch
import os
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sharpen.core.errors import UserError
from sharpen.core.messages import Usage

ENV_VAR = "SHARPEN_PRICES"
"""Environment variable naming a user price table."""
CWD_TABLE = Path(".sharpen") / "prices.yaml"
"""Per-project price table, relative to the working directory."""

_PER = 1_000_000


class Price(BaseModel):
    """US dollars per one million tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0)
    """Dollars per 1M prompt tokens."""
    output: float = Field(ge=0)
    """Dollars per 1M completion tokens."""

    def cost(self, usage: Usage) -> float:
        """Dollar cost of ``usage`` at this price."""
        return (usage.input_tokens * self.input + usage.output_tokens * self.output) / _PER


class PriceLayer:
    """One parsed table: exact names and globs, with the file it came from."""

    def __init__(self, entries: dict[str, Price], source: str) -> None:
        self.source = source
        self.exact = {k: v for k, v in entries.items() if not _is_glob(k)}
        # Longest (most specific) glob first; ties keep file order.
        globs = [(k, v) for k, v in entries.items() if _is_glob(k)]
        self.globs = sorted(globs, key=lambda kv: -len(kv[0]))

    def lookup(self, name: str) -> Price | None:
        """The price for ``name`` in this layer, or ``None``."""
        hit = self.exact.get(name)
        if hit is not None:
            return hit
        for pattern, price in self.globs:
            if fnmatch.fnmatchcase(name, pattern):
                return price
        return None


class PriceTable:
    """Layers of prices, highest priority first."""

    def __init__(self, layers: list[PriceLayer]) -> None:
        self.layers = layers

    def lookup(self, model_name: str) -> Price | None:
        """The first matching price over all layers, or ``None`` if no entry matches."""
        for layer in self.layers:
            price = layer.lookup(model_name)
            if price is not None:
                return price
        return None

    def cost(self, model_name: str, usage: Usage) -> float | None:
        """Dollar cost of ``usage`` for ``model_name``; ``None`` when the price is unknown."""
        price = self.lookup(model_name)
        return None if price is None else price.cost(usage)


def _is_glob(key: str) -> bool:
    return any(c in key for c in "*?[")


def parse_table(text: str, source: str) -> PriceLayer:
    """Parse one YAML price table. Errors are :class:`UserError` naming ``source``."""
    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UserError(f"price table {source} is not valid YAML: {exc}", "fix its syntax") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UserError(
            f"price table {source} must be a mapping of model name to {{input, output}}",
            'write entries like  "my-model": {input: 0.5, output: 1.5}  (USD per 1M tokens)',
        )
    entries: dict[str, Price] = {}
    for key, value in data.items():
        try:
            entries[str(key)] = Price.model_validate(value)
        except ValidationError as exc:
            raise UserError(
                f"price table {source}: entry {key!r}: {exc.errors()[0]['msg']}",
                "each entry needs non-negative numbers  {input: ..., output: ...}  "
                "(USD per 1M tokens)",
            ) from None
    return PriceLayer(entries, source)


def _user_paths(cwd: Path | None = None) -> list[Path]:
    paths: list[Path] = []
    env = os.environ.get(ENV_VAR)
    if env:
        p = Path(env).expanduser()
        if not p.is_file():
            raise UserError(
                f"${ENV_VAR} points to {p}, which is not a file",
                f"create it or unset {ENV_VAR}",
            )
        paths.append(p)
    local = (cwd or Path.cwd()) / CWD_TABLE
    if local.is_file():
        paths.append(local)
    return paths


def _default_layer() -> PriceLayer:
    ref = resources.files("sharpen") / "data" / "prices.yaml"
    return parse_table(ref.read_text(encoding="utf-8"), "sharpen/data/prices.yaml (default)")


_default_cache: list[PriceLayer] = []
_user_cache: dict[tuple[str, int, int], PriceLayer] = {}


def load_table(cwd: Path | None = None) -> PriceTable:
    """The layered table in force now (re-read when a user file changes; cheap to call)."""
    layers: list[PriceLayer] = []
    for path in _user_paths(cwd):
        st = path.stat()
        key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
        layer = _user_cache.get(key)
        if layer is None:
            layer = parse_table(path.read_text(encoding="utf-8"), str(path))
            _user_cache[key] = layer
        layers.append(layer)
    if not _default_cache:
        _default_cache.append(_default_layer())
    layers.append(_default_cache[0])
    return PriceTable(layers)


def cost(model_name: str, usage: Usage, table: PriceTable | None = None) -> float | None:
    """Dollar cost of ``usage`` for ``model_name``, or ``None`` when no entry matches
    ("cost unknown" — never silently 0). Uses :func:`load_table` unless ``table`` is given."""
    return (table or load_table()).cost(model_name, usage)
