"""sharpen.store: runs, trajectories, steps and feedback in SQL (SQLite by default).

``Store(url)`` opens a database (default ``.sharpen/sharpen.db`` under the cwd), migrating
it with the Alembic revisions shipped in ``sharpen/store/migrations``. See
:class:`~sharpen.store.store.Store` for the contract.
"""

from sharpen.store.engine import default_url
from sharpen.store.records import RUN_STATUSES, RunRecord, RunStatus
from sharpen.store.store import Store

__all__ = ["RUN_STATUSES", "RunRecord", "RunStatus", "Store", "default_url"]
