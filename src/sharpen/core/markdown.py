"""Fenced code blocks in model replies — read the same way by agents and environments."""

from __future__ import annotations

import re
from typing import NamedTuple

_FENCE = re.compile(r"```([^\n`]*)\n(.*?)(```|\Z)", re.DOTALL)


class CodeBlock(NamedTuple):
    """One fenced block: its info string (language), its body, and whether it was closed."""

    lang: str
    body: str
    closed: bool


def code_blocks(text: str) -> list[CodeBlock]:
    """Every ```-fenced block in ``text``, in order. A fence that is never closed (a reply cut
    off mid-block) yields a last block running to the end, with ``closed=False``."""
    return [
        CodeBlock(lang.strip().lower(), body, end == "```")
        for lang, body, end in _FENCE.findall(text)
    ]
