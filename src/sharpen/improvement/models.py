"""One model instance per ``{name, args}`` for a whole experiment.

The runner normally builds (and closes) a model per run; an experiment makes hundreds of
small runs, so it shares one instance per model ref across them and closes them once.
"""

from __future__ import annotations

from collections.abc import Callable

from sharpen.agents.base import needs_model
from sharpen.core.registry import REGISTRY, PluginRef, Registry
from sharpen.models.base import MODEL, ChatModel, ModelWrapper
from sharpen.models.pricing import PricedModel, PriceTable
from sharpen.runner.config import RunConfig
from sharpen.runner.runner import NoModel


class _Borrowed(ModelWrapper):
    """A shared model, built on first use, whose ``aclose`` is a no-op (the owner closes it).
    Built lazily so that an experiment whose proposer never writes does not load a model."""

    def __init__(self, build: Callable[[], ChatModel]) -> None:
        self._build = build

    @property
    def inner(self) -> ChatModel:  # type: ignore[override]  # built on first use
        return self._build()

    async def aclose(self) -> None:
        return None


class SharedModels:
    """Builds each model ref once, priced by ``prices`` (default: the table as loaded now, so
    a whole experiment prices by one table). Callable as a runner ``model_factory``."""

    def __init__(self, registry: Registry = REGISTRY, prices: PriceTable | None = None) -> None:
        self.registry = registry
        self.prices = prices or PriceTable.load()
        self._models: dict[str, ChatModel] = {}

    def get(self, ref: PluginRef) -> ChatModel:
        """The shared instance of ``ref`` (borrowed: closing it does nothing)."""
        key = ref.hash()

        def build() -> ChatModel:
            if key not in self._models:
                self._models[key] = PricedModel(self.registry.create(MODEL, ref), self.prices)
            return self._models[key]

        return _Borrowed(build)

    def __call__(self, config: RunConfig) -> ChatModel:
        if not needs_model(self.registry, config.agent.agent):
            return NoModel()
        return self.get(config.agent.model)

    async def aclose(self) -> None:
        """Close every model built."""
        for model in self._models.values():
            await model.aclose()
        self._models.clear()
