"""sharpen: close the feedback loop for LLM agents.

The Python API (:mod:`sharpen.api`: ``run``, ``arun``, ``load``, ``report``, ``compare``,
``improve``, ``aimprove``, ``judge``, ``ajudge``, ``Run``) is imported on first use, so that
``import sharpen`` stays as fast as the core types it re-exports.
"""

from typing import TYPE_CHECKING, Any

from sharpen.core import (
    Action,
    AgentSpec,
    Feedback,
    FeedbackTarget,
    Limits,
    Message,
    Outcome,
    PluginRef,
    RunManifest,
    Step,
    TaskSpec,
    ToolCall,
    ToolSpec,
    Trajectory,
    Usage,
    UserError,
    register,
)

if TYPE_CHECKING:
    from sharpen.api import (
        Run,
        aimprove,
        ajudge,
        arun,
        compare,
        improve,
        judge,
        load,
        report,
        run,
    )

__version__ = "0.1.0"

_API = frozenset({"Run", "aimprove", "ajudge", "arun", "compare", "improve", "judge", "load",
                  "report", "run"})
"""Names :func:`__getattr__` takes from :mod:`sharpen.api` when first asked for."""

__all__ = [
    "Action", "AgentSpec", "Feedback", "FeedbackTarget", "Limits", "Message", "Outcome",
    "PluginRef", "Run", "RunManifest", "Step", "TaskSpec", "ToolCall", "ToolSpec", "Trajectory",
    "Usage", "UserError", "__version__", "aimprove", "ajudge", "arun", "compare", "improve",
    "judge", "load", "register", "report", "run",
]


def __getattr__(name: str) -> Any:
    # PEP 562: the API pulls in the runner, stats and the store (SQLAlchemy, numpy), which
    # `import sharpen` should not pay for; Python caches nothing here, sharpen.api does.
    if name in _API:
        from sharpen import api

        return getattr(api, name)
    raise AttributeError(f"module 'sharpen' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
