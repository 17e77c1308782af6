"""The ``shell`` environment: tasks in a sandboxed temporary directory, checked after the
episode by hidden checks generated with the task.

Importing this package registers ``env`` ``"shell"`` (:class:`ShellEnv`) and ``verifier``
``"shell"`` (:class:`ShellVerifier`).
"""

from sharpen.envs.shell.check import CheckResult, run_checks
from sharpen.envs.shell.env import DONE, RUN, ShellEnv, ShellTaskGenerator, ShellVerifier
from sharpen.envs.shell.tasks import PRESETS, ShellProblem, build, materialize

__all__ = [
    "DONE", "PRESETS", "RUN", "CheckResult", "ShellEnv", "ShellProblem", "ShellTaskGenerator",
    "ShellVerifier", "build", "materialize", "run_checks",
]
