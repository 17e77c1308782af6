"""What changed between two diagnosed runs (``sharpen diagnose A --against B``): per detector,
over the tasks both runs attempted, the failure modes B *fixed* (some attempt of the task in A
has a finding, none in B) and *introduced* (none in A, some in B), with an exact sign test of
fixed against introduced (a task that keeps the finding, or never has it, carries no evidence
either way), and the share of each run's attempts with a finding.

It reads the findings as stored (``Feedback(source="detector")``): diagnose both runs first.
"""

from __future__ import annotations

from pydantic import BaseModel, Field
from scipy.stats import binomtest

from sharpen.diagnose.run import Diagnosis, Share
from sharpen.store import Store

EXAMPLES = 3
"""Task ids kept per detector as examples of a fixed or introduced failure mode."""


class DetectorChange(BaseModel):
    """One detector from run A to run B."""

    detector: str
    a: Share
    """Run A's attempts with a finding (of all its attempts)."""
    b: Share
    """Run B's."""
    fixed: int
    """Shared tasks with a finding in A and none in B."""
    introduced: int
    """Shared tasks with none in A and a finding in B."""
    kept: int
    """Shared tasks with a finding in both."""
    p_value: float | None
    """Exact two-sided sign test of ``fixed`` against ``introduced`` (``None`` when both are 0)."""
    fixed_examples: list[str] = Field(default_factory=list)
    """Task ids."""
    introduced_examples: list[str] = Field(default_factory=list)


class Changes(BaseModel):
    """What changed between two diagnosed runs, detector by detector."""

    a_run: str
    b_run: str
    shared_tasks: int
    """Tasks (by id; a perturbed variant is a task of its own) both runs attempted."""
    only_a: int
    only_b: int
    detectors: list[DetectorChange]
    """Most fixed-minus-introduced first."""


def _found_by_task(store: Store, run_id: str, names: set[str]) -> dict[str, set[str]]:
    """Task id -> the detectors (of ``names``) with a stored finding on some attempt of it
    (every attempted task is a key)."""
    out: dict[str, set[str]] = {}
    for t in store.iter_trajectories(run_id, with_steps=False):
        hit = out.setdefault(t.task.id, set())
        hit.update(fb.name for fb in t.feedback if fb.source == "detector" and fb.name in names)
    return out


def changes(store: Store, a: Diagnosis, b: Diagnosis) -> Changes:
    """What changed from ``a`` to ``b`` (two diagnoses of stored runs, their findings saved),
    for the detectors both ran."""
    by_name_a = {s.detector.name: s for s in a.detectors}
    by_name_b = {s.detector.name: s for s in b.detectors}
    names = [n for n in by_name_a if n in by_name_b]
    in_a = _found_by_task(store, a.run_id, set(names))
    in_b = _found_by_task(store, b.run_id, set(names))
    shared = sorted(set(in_a) & set(in_b))
    rows: list[DetectorChange] = []
    for name in names:
        fixed = [t for t in shared if name in in_a[t] and name not in in_b[t]]
        introduced = [t for t in shared if name not in in_a[t] and name in in_b[t]]
        kept = sum(name in in_a[t] and name in in_b[t] for t in shared)
        moved = len(fixed) + len(introduced)
        p = float(binomtest(len(fixed), moved, 0.5).pvalue) if moved else None
        rows.append(DetectorChange(
            detector=name, a=by_name_a[name].all, b=by_name_b[name].all, fixed=len(fixed),
            introduced=len(introduced), kept=kept, p_value=p,
            fixed_examples=fixed[:EXAMPLES], introduced_examples=introduced[:EXAMPLES]))
    rows.sort(key=lambda r: (r.introduced - r.fixed, -r.kept))
    return Changes(a_run=a.run_id, b_run=b.run_id, shared_tasks=len(shared),
                   only_a=len(set(in_a) - set(in_b)), only_b=len(set(in_b) - set(in_a)),
                   detectors=rows)
