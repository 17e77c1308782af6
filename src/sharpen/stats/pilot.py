"""Which stored run serves as the pilot of a power plan (``sharpen run --target-effect``).

The pilot is the newest stored run on the same environment (name and args) whose agent is
a real one (not the ``null``/``reference`` baselines) and that scored at least two tasks.
Without one, the plan uses :func:`~sharpen.stats.power.conservative_model`.
"""

from __future__ import annotations

from sharpen.core.registry import PluginRef
from sharpen.stats.power import PowerModel, conservative_model, pilot_model
from sharpen.stats.taskdata import TaskTable
from sharpen.store import Store
from sharpen.store.aggregate import run_aggregate

BASELINE_AGENTS = ("null", "reference")
"""Agent plug-ins that are validity baselines, never pilots."""
RECENT_RUNS = 200
"""How many of the newest runs on the environment are considered."""


def find_pilot(store: Store, env: PluginRef) -> PowerModel:
    """The power model from the newest comparable run in ``store``, else the conservative
    one."""
    for rec in store.list_runs(RECENT_RUNS, env=env.name):
        if rec.manifest.env != env or rec.agent.agent.name in BASELINE_AGENTS or rec.n_counted < 2:
            continue
        table = TaskTable.from_aggregate(run_aggregate(store, rec.id))
        if int(table.valid.sum()) >= 2:
            return pilot_model(table)
    return conservative_model()
