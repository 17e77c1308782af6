"""Running untrusted code: the :class:`Sandbox` protocol and its local implementation."""

from sharpen.sandbox.base import ExecResult, Sandbox
from sharpen.sandbox.isolation import detect_isolation
from sharpen.sandbox.local import LocalSandbox

__all__ = ["ExecResult", "LocalSandbox", "Sandbox", "detect_isolation"]
