"""What an episode in flight is doing, told to whoever counts it (the run's progress bar).

Code deep inside an episode — a sandbox running untrusted code, a model call — marks its
span with :func:`doing`; the reporter is found through a context variable that the runner
sets in each episode's task (:mod:`sharpen.runner.progress`), so nothing is passed through
the environment or agent APIs. Without a reporter (no bar shown) :func:`doing` is one
context-variable read and a shared no-op context.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from contextvars import ContextVar
from typing import Literal, Protocol, get_args

Activity = Literal["model", "environment", "sandbox"]
"""``model``: waiting on a completion; ``environment``: anything else in the episode (reset,
step, outcome); ``sandbox``: running code in a sandbox (inside a step)."""

ACTIVITIES: tuple[Activity, ...] = get_args(Activity)
"""Every :data:`Activity`."""


class ActivityReporter(Protocol):
    """Counts one episode's activity."""

    def doing(self, what: Activity) -> AbstractContextManager[None]:
        """The episode does ``what`` until the block ends, then what it did before."""
        ...


REPORTER: ContextVar[ActivityReporter | None] = ContextVar("sharpen_activity", default=None)
"""The current episode's reporter (set per episode task by the runner when a bar is shown)."""

_NULL: AbstractContextManager[None] = nullcontext()


def doing(what: Activity) -> AbstractContextManager[None]:
    """Mark the current episode as doing ``what`` for the block; a no-op without a reporter."""
    reporter = REPORTER.get()
    return _NULL if reporter is None else reporter.doing(what)
