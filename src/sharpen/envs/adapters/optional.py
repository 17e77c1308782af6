"""Optional dependencies of the adapters: imported on use, never at module import.

The registry imports every environment module when ``sharpen envs`` runs, so an adapter
module must import without its third-party package. Each adapter calls :func:`require` where
it first needs the package; a missing one ends in a :class:`UserError` that names the extra
to install, and :func:`available` lets ``describe()`` say so instead of failing.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from sharpen.core.errors import UserError

EXTRAS: dict[str, str] = {
    "reasoning_gym": "reasoning",
    "textarena": "textarena",
    "gymnasium": "gym",
}
"""Importable module -> the sharpen extra that installs it."""


def install_hint(module: str) -> str:
    """``pip install 'sharpen[EXTRA]'`` for ``module``."""
    return f"pip install 'sharpen[{EXTRAS.get(module, module)}]'"


def available(module: str) -> bool:
    """Whether ``module`` can be imported (without importing it)."""
    return importlib.util.find_spec(module) is not None


def require(module: str) -> ModuleType:
    """``module``, imported; a :class:`UserError` naming the extra if it is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise UserError(f"this environment needs the Python package {module!r} ({exc})",
                        install_hint(module)) from None
