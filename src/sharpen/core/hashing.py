"""Stable content hashes for anything JSON-serialisable.

Hashes identify AgentSpecs, TaskSpecs, configs and model requests across processes and
machines, so they must not depend on dict order, Python's hash seed or float formatting
quirks. We hash canonical JSON (sorted keys, no whitespace) with SHA-256.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel


def canonical_json(value: Any) -> str:
    """Canonical JSON text of ``value`` (pydantic models are dumped in JSON mode first)."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def content_hash(value: Any, length: int = 16) -> str:
    """Hex SHA-256 of the canonical JSON of ``value``, truncated to ``length`` characters."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()[:length]
