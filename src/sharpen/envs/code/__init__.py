"""The ``code`` environment: write a Python function that passes hidden unit tests.

Importing this package registers ``env`` ``"code"`` (:class:`CodeEnv`) and ``verifier``
``"code"`` (:class:`CodeVerifier`).
"""

from sharpen.envs.code.env import CodeEnv
from sharpen.envs.code.generator import PRESETS, FunctionTaskGenerator
from sharpen.envs.code.humaneval import humaneval_problem, humaneval_tasks
from sharpen.envs.code.problem import CodeProblem
from sharpen.envs.code.program import SUBMIT, assemble_program, extract_code, submit_error
from sharpen.envs.code.score import CodeVerifier, outcome_from_report
from sharpen.envs.code.tasks import materialize, task_source

__all__ = [
    "PRESETS", "SUBMIT", "CodeEnv", "CodeProblem", "CodeVerifier", "FunctionTaskGenerator",
    "assemble_program", "extract_code", "humaneval_problem", "humaneval_tasks", "materialize",
    "outcome_from_report", "submit_error", "task_source",
]
