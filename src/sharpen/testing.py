"""Conformance checks for your own plug-ins' tests, like Gymnasium's ``check_env``.

Each check builds the plug-in through the registry (a registered name, a ``module:Name`` or
``path/to/file.py:Name`` reference, or ``{name, args}``), exercises its contract with real
parts — a real runner, a temporary SQLite store, real requests to a model — and returns a
:class:`CheckReport`: ``.ok``, ``.passed``, ``.problems`` (each with a ``check`` id and a
message naming the fault and the fix). A failed check never raises;
``raise_for_problems()`` raises one ``AssertionError`` holding every message::

    # tests/test_my_plugins.py
    from sharpen.testing import check_agent, check_env, check_model, check_proposer

    def test_my_env_keeps_the_contract():
        check_env("mypkg.envs:MazeEnv", args={"size": 5}).raise_for_problems()

    def test_my_agent_keeps_the_contract():
        check_agent("mypkg.agents:PlannerAgent",
                    model={"name": "openai", "args": {"base_url": "http://127.0.0.1:8000/v1"}},
                    ).raise_for_problems()

    def test_my_proposer_keeps_the_contract():
        check_proposer("mypkg.proposers:MyProposer").raise_for_problems()

Inside an ``async def`` test use the ``a``-prefixed variants (``await acheck_env(...)``).
The same checks run from the command line: ``sharpen check env mypkg.envs:MazeEnv -E size=5``.
"""

from sharpen.checks import (
    CheckReport,
    Problem,
    acheck_agent,
    acheck_env,
    acheck_judge,
    acheck_model,
    acheck_proposer,
    check_agent,
    check_env,
    check_judge,
    check_model,
    check_proposer,
)

__all__ = [
    "CheckReport",
    "Problem",
    "acheck_agent",
    "acheck_env",
    "acheck_judge",
    "acheck_model",
    "acheck_proposer",
    "check_agent",
    "check_env",
    "check_judge",
    "check_model",
    "check_proposer",
]
