"""What a reader of a viewer page sees, for tests that assert on it."""

from __future__ import annotations

import html
import re


def text(page: str) -> str:
    """``page``'s text: tags dropped, entities decoded, whitespace collapsed."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))
