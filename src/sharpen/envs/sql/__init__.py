"""The ``sql`` environment: answer questions about generated SQLite databases with a query.

Importing this package registers ``env`` ``"sql"`` (:class:`SqlEnv`) and ``verifier``
``"sql"`` (:class:`SqlVerifier`).
"""

from sharpen.envs.sql.database import QueryResult, Table, compare, connect, run_query
from sharpen.envs.sql.env import SqlEnv
from sharpen.envs.sql.generator import FAMILIES, PRESETS, SqlProblem, SqlTaskGenerator
from sharpen.envs.sql.score import (
    SUBMIT_SQL,
    SqlVerifier,
    check,
    extract_query,
    outcome_from_check,
    problem_of,
    submit_error,
)

__all__ = [
    "FAMILIES", "PRESETS", "SUBMIT_SQL", "QueryResult", "SqlEnv", "SqlProblem", "SqlTaskGenerator",
    "SqlVerifier", "Table", "check", "compare", "connect", "extract_query", "outcome_from_check",
    "problem_of", "run_query", "submit_error",
]
