"""The end of an agent's play in an episode, told to code that keeps something for it.

A model that keeps a server's place for a conversation's next call (the OpenAI-compatible
model's prefix hold, :class:`~sharpen.models.capacity.EndpointGate`) cannot tell an episode's
last call from the others, so the place it holds after the last one stands idle until the
hold runs out. The runner can tell: it plays each episode's agent inside :func:`playing`, and
code deep inside the episode registers with :func:`at_episode_end` what to do once the agent
is done (give the held place back). Found through a context variable that the runner sets in
each episode's task, like :mod:`sharpen.core.activity`, so nothing is passed through the
agent, environment or model APIs. Outside :func:`playing` (a judge's calls, a proposer's, a
test's) nothing is registered and nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_ENDINGS: ContextVar[dict[Hashable, Callable[[], None]] | None] = ContextVar(
    "sharpen_episode_end", default=None)
"""What to run when the current episode's agent is done, by key (set by :func:`playing`)."""


@contextmanager
def playing() -> Iterator[None]:
    """The block in which an agent plays one episode. When it ends — returned, raised or
    cancelled — every callable registered inside it with :func:`at_episode_end` runs once, in
    the order registered. Tasks that the agent starts inside the block share it (a task copies
    the context, and with it the same registry)."""
    endings: dict[Hashable, Callable[[], None]] = {}
    token = _ENDINGS.set(endings)
    try:
        yield
    finally:
        _ENDINGS.reset(token)
        for end in endings.values():
            end()


def at_episode_end(key: Hashable, end: Callable[[], None]) -> bool:
    """Run ``end`` (synchronous, quick, not raising) when the current :func:`playing` block
    ends; registering another under the same ``key`` keeps the first. ``False``, and nothing
    registered, outside such a block."""
    endings = _ENDINGS.get()
    if endings is None:
        return False
    endings.setdefault(key, end)
    return True
