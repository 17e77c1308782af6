"""Conformance checks of plug-ins, like Gymnasium's ``check_env``: :func:`check_env`,
:func:`check_agent`, :func:`check_model`, :func:`check_proposer` and :func:`check_judge` each build a plug-in
through the registry, exercise its contract with real parts and return a
:class:`CheckReport` (``sharpen check KIND NAME`` prints one). The ``a``-prefixed variants
are the same checks for code already inside an event loop. :mod:`sharpen.testing`
re-exports them for a user's own tests."""

from sharpen.checks.agent import acheck_agent, check_agent
from sharpen.checks.env import acheck_env, check_env
from sharpen.checks.judge import acheck_judge, check_judge
from sharpen.checks.model import acheck_model, check_model
from sharpen.checks.proposer import acheck_proposer, check_proposer
from sharpen.checks.report import CheckReport, Problem

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
