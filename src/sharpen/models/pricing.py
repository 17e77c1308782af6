"""Token prices from user-editable YAML tables over a vendored copy of LiteLLM's maintained
price map, applied to completions by one wrapper; no price lives in Python source and no
backend prices its own calls.

The table maps a model name (or a shell-style glob such as ``local/*``) to US dollars per
one million input and output tokens::

    "local/*": {input: 0, output: 0}
    "gpt-4o-mini*": {input: 0.15, output: 0.60}

:meth:`PriceTable.load` reads the layers once, first match wins:

1. the file named by ``$SHARPEN_PRICES`` (it must exist when set),
2. ``.sharpen/prices.yaml`` in the working directory,
3. the default table shipped as package data (``sharpen/data/prices.yaml``: ``local/*`` is
   free),
4. LiteLLM's price map for chat models (``sharpen/data/prices_litellm.json``, a pinned copy
   made by ``scripts/update_prices.py``; its version is in the file's ``_source``): a model
   as LiteLLM names it (``gpt-4o``, ``gpt-4o-2024-08-06``, ``deepseek/deepseek-chat``) or,
   for a model LiteLLM lists under provider ``P`` without that prefix, ``P/model``
   (``openai/gpt-4o``, ``anthropic/claude-sonnet-4-5``). Nothing else is guessed: a dated
   snapshot LiteLLM does not list is not priced as its undated alias (snapshots' prices
   differ: ``gpt-4o-2024-05-13`` costs twice ``gpt-4o``).

Within one YAML layer an exact name beats a glob and a longer glob beats a shorter one. A
model that matches no entry has an *unknown* cost: :meth:`PriceTable.cost` returns ``None``,
never ``0``.

Backends report tokens only (``Usage.cost_usd`` is ``None``: not priced). Whoever builds a
model for a run wraps it in a :class:`PricedModel` with the table it loaded — the runner for
its model, an improvement experiment for its shared models — so every completion is priced
once, by one table, however many calls a run makes.
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sharpen.core.errors import UserError
from sharpen.core.messages import Message, ToolSpec, Usage
from sharpen.models.base import ChatModel, Completion, ModelWrapper
from sharpen.models.structured import ResponseSchema

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


class DeferredLayer:
    """A layer read on the first lookup that reaches it. LiteLLM's map (3,000 models) takes
    ~15 ms to parse, which a run of the embedded model, priced by the default layer, should
    not pay at every start."""

    def __init__(self, load: Callable[[], PriceLayer], source: str) -> None:
        self._load = load
        self._layer: PriceLayer | None = None
        self.source = source

    def lookup(self, name: str) -> Price | None:
        """The price for ``name`` in the layer, reading it first if need be."""
        if self._layer is None:
            self._layer = self._load()
            self.source = self._layer.source
        return self._layer.lookup(name)


class PriceTable:
    """Layers of prices, highest priority first. Immutable once built: load it once (a run
    or an experiment does) and pass it to whoever prices."""

    def __init__(self, layers: list[PriceLayer | DeferredLayer]) -> None:
        self.layers = layers

    @classmethod
    def load(cls, cwd: Path | None = None, environ: Mapping[str, str] | None = None) -> PriceTable:
        """The layered table in force: ``$SHARPEN_PRICES`` (from ``environ``, default
        ``os.environ``), then ``.sharpen/prices.yaml`` under ``cwd`` (default: the working
        directory), then the shipped default, then LiteLLM's map. Each file is read once (LiteLLM's
        when a lookup first reaches it); a missing
        ``$SHARPEN_PRICES`` file or a malformed table is a :class:`UserError`."""
        layers = [parse_table(path.read_text(encoding="utf-8"), str(path))
                  for path in _user_paths(cwd, os.environ if environ is None else environ)]
        return cls([*layers, _default_layer(),
                    DeferredLayer(_litellm_layer, "sharpen/data/prices_litellm.json")])

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


class PricedModel(ModelWrapper):
    """A ChatModel that sets each completion's ``usage.cost_usd`` from ``prices`` by its
    ``name`` — a routed completion's by its ``route`` — the one place a cost is computed. A
    completion that counted no tokens at all (a server that sent no usage) keeps an unknown
    cost: there is nothing to price. Retries and everything else are ``inner``'s."""

    def __init__(self, inner: ChatModel, prices: PriceTable) -> None:
        super().__init__(inner)
        self.prices = prices

    async def complete(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | None = None,
        params: dict[str, Any] | None = None,
        *,
        response_schema: ResponseSchema | None = None,
    ) -> Completion:
        completion = await super().complete(messages, tools, params,
                                            response_schema=response_schema)
        usage = completion.usage
        counted = usage.input_tokens or usage.output_tokens
        # A routed call is priced as the model that served it, not as the router.
        usage.cost_usd = self.prices.cost(completion.route or self.name, usage) if counted else None
        return completion


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


def _user_paths(cwd: Path | None, environ: Mapping[str, str]) -> list[Path]:
    paths: list[Path] = []
    env = environ.get(ENV_VAR)
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


def parse_litellm(text: str, source: str) -> PriceLayer:
    """Parse the vendored LiteLLM table (``{"providers": {P: {model: [input, output]}}}``, USD
    per 1M tokens) into a layer of exact names: each model, and ``P/model`` for a model
    listed under ``P`` without that prefix (a name LiteLLM itself lists wins)."""
    data = json.loads(text)
    entries: dict[str, Price] = {}
    aliases: dict[str, Price] = {}
    for provider, models in data["providers"].items():
        for name, (inp, out) in models.items():
            entries[name] = price = Price(input=inp, output=out)
            if provider and not name.startswith(f"{provider}/"):
                aliases[f"{provider}/{name}"] = price
    layer = PriceLayer({}, source)
    layer.exact = {**aliases, **entries}  # no globs: LiteLLM's names are literal
    return layer


def _litellm_layer() -> PriceLayer:
    ref = resources.files("sharpen") / "data" / "prices_litellm.json"
    text = ref.read_text(encoding="utf-8")
    origin = json.loads(text)["_source"]["from"].split(" (")[0]
    return parse_litellm(text, f"sharpen/data/prices_litellm.json ({origin})")
