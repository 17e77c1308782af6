"""Which store a command or an API call means: the one it names, else ``$SHARPEN_STORE``,
else the default (``sqlite:///<cwd>/.sharpen/sharpen.db``). The CLI and the Python API both
open stores through :func:`open_store`, so ``SHARPEN_STORE`` means the same to both."""

from __future__ import annotations

import os

from sharpen.store.store import Store

STORE_ENV = "SHARPEN_STORE"
"""Environment variable holding the store URL used when none is given."""


def open_store(store: str | Store | None = None) -> Store:
    """``store`` itself when it is a :class:`Store`; otherwise the store at the URL ``store``,
    or at ``$SHARPEN_STORE`` when ``store`` is ``None`` or empty, or the default store. A bad
    URL raises the :class:`~sharpen.core.errors.UserError` of :class:`Store`."""
    if isinstance(store, Store):
        return store
    return Store(store or os.environ.get(STORE_ENV) or None)
