"""The diagnosis a proposer may see: what the built-in detectors find in the failures of its
minibatch, and one rendering of it for every proposer's prompt.

:func:`diagnose_minibatch` runs the detectors (every built-in of
:data:`sharpen.diagnose.run.BUILTIN` by default) in memory over the parent's trajectories on
the training minibatch — pure, nothing stored — and keeps, for the failed attempts only, how
many of them each detector found something in and each failed trajectory's findings
(detector, step, rationale). The engine puts it on every
:class:`~sharpen.improvement.proposal.ProposalContext`; it reads no task the context does
not already hold, so it never carries validation or test data.

A proposer built with ``diagnosis: true`` (``guidelines``, ``evolve``, ``opro``) puts
:func:`render_diagnosis` into its prompt; with the default ``false`` the prompt is the one it
was before this module existed, byte for byte, so experiments, their ids and their replay
cassettes are unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from sharpen.core.registry import PluginRef
from sharpen.core.text import clip
from sharpen.core.trajectory import Trajectory
from sharpen.diagnose.run import build_detectors, detect_all

LIMIT_CHARS = 700
"""Default length of the rendered diagnosis (it shares the prompt with the traces)."""

RATIONALE_CHARS = 140
"""Longest rationale of one finding in the rendering."""


class Finding(BaseModel):
    """One detector finding on a failed trajectory."""

    detector: str
    """The detector's registered name."""
    step: int | None
    """The step it is about (``None``: the whole trajectory)."""
    rationale: str
    """What the detector saw."""


class DetectorCount(BaseModel):
    """How many failed attempts of the minibatch one detector found something in."""

    detector: str
    failed: int


class MinibatchDiagnosis(BaseModel):
    """The detectors' view of a minibatch's failed attempts."""

    failed: int
    """Failed attempts in the minibatch (counted toward success, not solved)."""
    counts: list[DetectorCount]
    """Per detector, in the order built, the failed attempts with at least one finding."""
    findings: dict[str, list[Finding]] = Field(default_factory=dict)
    """Failed trajectory id → its findings, by step (every failed attempt has an entry)."""

    def of(self, trajectory: Trajectory) -> list[Finding]:
        """The findings on ``trajectory`` (empty for a solved one or one not diagnosed)."""
        return self.findings.get(trajectory.id, [])


def _failed(t: Trajectory) -> bool:
    return t.outcome is not None and t.outcome.counts and not t.outcome.success


def diagnose_minibatch(trajectories: Sequence[Trajectory],
                       detectors: Sequence[PluginRef | dict | str] | None = None) -> MinibatchDiagnosis:
    """The findings of ``detectors`` (every built-in by default) on the failed attempts among
    ``trajectories``, computed in memory."""
    built = build_detectors(detectors)
    keyed = [(ref.hash(), ref, det) for ref, det in built]
    counts = {ref.hash(): 0 for ref, _ in built}
    findings: dict[str, list[Finding]] = {}
    failed = [t for t in trajectories if _failed(t)]
    for t in failed:
        found = detect_all(keyed, t)
        own: list[Finding] = []
        for key, records in found.items():
            counts[key] += bool(records)
            own += [Finding(detector=fb.name, step=fb.target.step_index,
                            rationale=" ".join(fb.rationale.split())) for fb in records]
        findings[t.id] = sorted(own, key=lambda f: (-1 if f.step is None else f.step))
    return MinibatchDiagnosis(
        failed=len(failed), findings=findings,
        counts=[DetectorCount(detector=ref.name, failed=counts[ref.hash()]) for ref, _ in built])


def render_diagnosis(diagnosis: MinibatchDiagnosis, shown: Sequence[tuple[str, Trajectory]] = (),
                     limit_chars: int = LIMIT_CHARS) -> str:
    """The diagnosis for a prompt: the detectors that fired among the minibatch's failed
    attempts with their counts (most common first), then the findings on each failed
    trajectory the prompt shows (``shown``: ``(label, trajectory)``, e.g. ``("Example 1",
    t)``), in whole lines within about ``limit_chars``. Empty when the minibatch has no failure."""
    if not diagnosis.failed:
        return ""
    n = diagnosis.failed
    fired = sorted((c for c in diagnosis.counts if c.failed), key=lambda c: -c.failed)
    head = f"Automatic checks of the {n} failed attempt{'s' if n != 1 else ''} on these tasks:"
    lines = [head] + ([f"- {c.detector}: in {c.failed} of {n}" for c in fired] if fired else
                      ["- no check found a loop, stall, invalid-action burst, ignored error, "
                       "limit hit, context overflow or reward hacking"])
    for label, t in shown:
        if not _failed(t):
            continue
        found = diagnosis.of(t)
        what = "; ".join(
            f"{f.detector}{'' if f.step is None else f' at step {f.step}'}: "
            f"{clip(f.rationale, RATIONALE_CHARS)}" for f in found) or "no finding"
        lines.append(f"{label}: {what}")
    kept: list[str] = []
    for line in lines:  # whole lines, so the counts (first) survive a tight limit
        if kept and sum(len(k) + 1 for k in kept) + len(line) > limit_chars:
            kept.append(f"({len(lines) - len(kept)} more lines left out)")
            break
        kept.append(clip(line, limit_chars))
    return "\n".join(kept)
