"""sharpen: close the feedback loop for LLM agents."""

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

__version__ = "0.1.0"

__all__ = [
    "Action", "AgentSpec", "Feedback", "FeedbackTarget", "Limits", "Message", "Outcome",
    "PluginRef", "RunManifest", "Step", "TaskSpec", "ToolCall", "ToolSpec", "Trajectory",
    "Usage", "UserError", "__version__", "register",
]
