"""Core types and the plug-in registry. Imports nothing else from sharpen."""

from sharpen.core.agent_spec import AgentSpec, Limits
from sharpen.core.errors import InfraError, SharpenError, UserError
from sharpen.core.feedback import Feedback, FeedbackSource, FeedbackTarget
from sharpen.core.hashing import canonical_json, content_hash
from sharpen.core.manifest import RunManifest
from sharpen.core.messages import Message, ToolCall, ToolSpec, Usage
from sharpen.core.outcome import ErrorKind, Outcome
from sharpen.core.registry import REGISTRY, Kind, PluginRef, Registry, register
from sharpen.core.task import Split, TaskSpec
from sharpen.core.trajectory import Action, Step, Trajectory, trajectory_key

__all__ = [
    "REGISTRY", "Action", "AgentSpec", "ErrorKind", "Feedback", "FeedbackSource",
    "FeedbackTarget", "InfraError", "Kind", "Limits", "Message", "Outcome", "PluginRef", "Registry",
    "RunManifest", "SharpenError", "Split", "Step", "TaskSpec", "ToolCall", "ToolSpec",
    "Trajectory", "Usage", "UserError", "canonical_json", "content_hash", "register",
    "trajectory_key",
]
