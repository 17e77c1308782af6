"""AgentSpec: what improvement changes, as data."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError

from sharpen.core.errors import UserError
from sharpen.core.hashing import content_hash
from sharpen.core.registry import PluginRef

DEFAULT_INSTRUCTIONS = (
    "You are a careful programmer. Solve the task. When you are ready, give your answer "
    "exactly as the task asks."
)


class Limits(BaseModel):
    """Per-episode limits; hitting one ends the episode as the agent's failure."""

    max_steps: int = 8
    """Maximum model turns."""
    max_tokens: int = 8192
    """Maximum total (input + output) tokens over the episode."""
    max_seconds: float = 300.0
    """Maximum wall-clock seconds."""
    max_cost_usd: float | None = None
    """Maximum dollars; ``None`` for no limit."""


Decoding = Literal["auto", "free", "constrained"]
"""How the agent's replies are decoded: ``constrained`` — every reply is JSON valid against the
environment's action schema (grammar-constrained on models that can, validated on others);
``free`` — the model writes what it likes and the text protocol (or native tool calls) reads
an action from it; ``auto`` — constrained when the model constrains sampling in-process (the
embedded ``local`` model), free otherwise."""


class AgentSpec(BaseModel):
    """Model ref, sampling params and named text components. Its content hash identifies it;
    ``parents`` record lineage and are not part of the hash."""

    name: str = "default"
    """Human label."""
    model: PluginRef = Field(default_factory=lambda: PluginRef(name="local"))
    """Which ChatModel to use, as ``{name, args}``."""
    agent: PluginRef = Field(default_factory=lambda: PluginRef(name="tool"))
    """Which agent loop runs it."""
    params: dict[str, Any] = Field(default_factory=lambda: {"temperature": 0.0, "max_tokens": 512})
    """Sampling params passed to the model (temperature, max_tokens, top_p, ...)."""
    components: dict[str, str] = Field(
        default_factory=lambda: {"instructions": DEFAULT_INSTRUCTIONS}
    )
    """Named text components: instructions, guidelines, skills, examples, ..."""
    limits: Limits = Field(default_factory=Limits)
    """Per-episode limits."""
    decoding: Decoding = "auto"
    """How replies are decoded (see :data:`Decoding`); the run manifest records what ``auto``
    resolved to."""
    parents: list[str] = Field(default_factory=list)
    """Hashes of the specs this one was derived from."""

    def hash(self) -> str:
        """Content hash over everything that changes behaviour (not name, not parents).
        ``decoding`` counts only when set to other than ``auto``, so that specs written before
        it existed keep their hashes (what ``auto`` resolved to is in each run's manifest)."""
        exclude = {"name", "parents"} | ({"decoding"} if self.decoding == "auto" else set())
        return content_hash(self.model_dump(mode="json", exclude=exclude))

    @classmethod
    def load(cls, path: str | Path) -> AgentSpec:
        """Load from a YAML (or JSON) file; errors name the file and the fix."""
        p = Path(path)
        if not p.exists():
            raise UserError(f"agent spec file {p} does not exist", "check the --agent path")
        try:
            data = yaml.safe_load(p.read_text()) or {}
            return cls.model_validate(data)
        except yaml.YAMLError as exc:
            raise UserError(f"{p} is not valid YAML: {exc}", "fix the YAML syntax") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            raise UserError(
                f"{p}: field {where!r}: {first['msg']}",
                "see docs/agent-spec.md for the fields an AgentSpec accepts",
            ) from None

    def dump(self, path: str | Path) -> None:
        """Write as YAML that :meth:`load` reads back."""
        Path(path).write_text(yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False))
