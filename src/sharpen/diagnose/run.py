"""Diagnosing a stored run: run detectors over its trajectories, store their findings, and
say how often each failure mode occurs — overall, among failed and among solved attempts.

Findings are stored as feedback (``source="detector"``) with a deterministic id — a hash of
the detector's ``{name, args}``, the trajectory, the target (step, span) and the finding's
place among that detector's findings on the same target — so diagnosing a run again stores
nothing twice (the store ignores an id it holds), even where a rationale's wording changed. Rates
are shares of trajectories with at least one finding, with a Wilson 95% interval
(:func:`sharpen.stats.intervals.wilson`); "failed" and "solved" count only attempts that
count toward the success rate (an ``infra``/``env``/... error is neither).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from sharpen.core.feedback import Feedback
from sharpen.core.hashing import content_hash
from sharpen.core.registry import REGISTRY, PluginRef, Registry
from sharpen.core.trajectory import Trajectory
from sharpen.diagnose.base import DETECTOR, Detector, detector_info
from sharpen.diagnose.decisive import DecisiveSteps, DecisiveTally
from sharpen.diagnose.stages import StageReport, stage_collector
from sharpen.diagnose.taxonomy import Choice, Signature, Taxonomy, build_taxonomy, signature
from sharpen.stats.intervals import Interval, wilson
from sharpen.store import Store

BUILTIN = ("loop", "stall", "invalid_burst", "ignored_error", "limit_hit", "context_overflow",
           "reward_hacking")
"""The built-in detectors, in the order they are reported when none is named."""

EXAMPLES = 3
"""Trajectory ids kept per detector as examples."""

WRITE_BATCH = 1000
"""Findings stored per write transaction: one transaction per finding made a first diagnosis
of a large run spend most of its time committing; a killed diagnosis keeps every batch
written, and diagnosing again stores the rest."""


class Share(BaseModel):
    """Trajectories with a finding among ``n``: ``count``, ``rate`` and its interval."""

    count: int
    n: int
    rate: float | None
    """``count / n``; ``None`` when ``n`` is 0."""
    ci: Interval
    """Wilson 95% interval of the rate (``[0, 1]`` when ``n`` is 0)."""


def share(count: int, n: int) -> Share:
    """``count`` of ``n`` as a :class:`Share`."""
    return Share(count=count, n=n, rate=count / n if n else None, ci=wilson(count, n))


class DetectorSummary(BaseModel):
    """What one detector found in a run."""

    detector: PluginRef
    """The detector as built (``{name, args}``)."""
    findings: int
    """Finding records (a trajectory may have several)."""
    all: Share
    """Trajectories with a finding, of every trajectory diagnosed."""
    failed: Share
    """Of the failed attempts (counted, not solved)."""
    solved: Share
    """Of the solved attempts."""
    examples: list[str] = Field(default_factory=list)
    """Ids of trajectories with a finding (failed ones first)."""


class Diagnosis(BaseModel):
    """The diagnosis of one run: per detector, most common among failed attempts first."""

    run_id: str
    trajectories: int
    """Trajectories diagnosed."""
    failed: int
    """Of them, counted attempts that failed."""
    solved: int
    """Of them, solved attempts."""
    errored: int
    """Of them, attempts that ended in a non-agent error (neither failed nor solved)."""
    stored: int
    """Finding records newly stored by this call (0 when the run was diagnosed before)."""
    detectors: list[DetectorSummary]
    stages: StageReport | None = None
    """Per stage of the environment: steps, tokens, time, precision and recall against the
    reference, and a success predictor (:mod:`sharpen.diagnose.stages`); ``None`` when the
    environment declares no stages (or ``stages=False``)."""
    taxonomy: Taxonomy | None = None
    """The failed attempts grouped by their signature (:mod:`sharpen.diagnose.taxonomy`);
    ``None`` when not asked for."""
    decisive: DecisiveSteps | None = None
    """The decisive steps ``sharpen attribute`` stored for the run, by step and by stage
    (:mod:`sharpen.diagnose.decisive`); ``None`` before any was stored."""


def finding_id(detector: PluginRef | str, fb: Feedback, ordinal: int = 0) -> str:
    """The deterministic id of a finding: the same detector (its ref, or the ref's hash),
    trajectory and target (and ``ordinal``, the finding's place among the detector's
    findings on that target) always give the same id."""
    t = fb.target
    key = detector if isinstance(detector, str) else detector.hash()
    return content_hash({"detector": key, "trajectory": t.trajectory_id,
                         "kind": t.kind, "step": t.step_index, "span": t.span,
                         "ordinal": ordinal}, length=32)


def stamped(detector: PluginRef, trajectory: Trajectory,
            found: Sequence[Feedback], ref_hash: str | None = None) -> list[Feedback]:
    """``found`` as stored: named after the detector's ref, aimed at ``trajectory``, each
    with its deterministic id (``ref_hash``: the ref's hash, when the caller has it)."""
    if not found:
        return []
    ref_key = ref_hash or detector.hash()
    out: list[Feedback] = []
    seen: dict[tuple[object, ...], int] = {}
    for fb in found:
        target = fb.target.model_copy(update={"run_id": trajectory.run_id,
                                              "trajectory_id": trajectory.id})
        record = fb.model_copy(update={"source": "detector", "name": detector.name,
                                       "target": target, "author": f"detector:{detector.name}"})
        key = (target.kind, target.step_index, target.span)
        seen[key] = ordinal = seen.get(key, -1) + 1
        out.append(record.model_copy(update={"id": finding_id(ref_key, record, ordinal)}))
    return out


def detect_all(detectors: Sequence[tuple[str, PluginRef, Detector]],
               trajectory: Trajectory) -> dict[str, list[Feedback]]:
    """Each detector's stamped findings on ``trajectory``, keyed by the detector's ref hash
    (``detectors``: ``(ref hash, ref, detector)``, hashed once by the caller)."""
    return {key: stamped(ref, trajectory, det.detect(trajectory), key)
            for key, ref, det in detectors}


def build_detectors(refs: Sequence[PluginRef | dict | str] | None = None,
                    registry: Registry = REGISTRY) -> list[tuple[PluginRef, Detector]]:
    """The named detectors, built (every built-in when ``refs`` is ``None`` or empty)."""
    chosen = [PluginRef(name=r) if isinstance(r, str) else PluginRef.model_validate(r)
              for r in (refs or BUILTIN)]
    return [(ref, registry.create(DETECTOR, ref)) for ref in chosen]


def diagnose_run(store: Store, run_id: str,
                 detectors: Sequence[PluginRef | dict | str] | None = None,
                 registry: Registry = REGISTRY, *, save: bool = True, stages: bool = True,
                 taxonomy: Choice = "tfidf") -> Diagnosis:
    """Run ``detectors`` (every built-in by default) over the stored trajectories of
    ``run_id``, store each finding (idempotently; not with ``save=False``, which writes
    nothing — the viewer's page) and summarise them — with the run's stage metrics unless
    ``stages`` is false."""
    built = build_detectors(detectors, registry)
    hits: dict[str, dict[str, list[str]]] = {ref.hash(): {"all": [], "failed": [], "solved": []}
                                             for ref, _ in built}
    records = {ref.hash(): 0 for ref, _ in built}
    counts = {"all": 0, "failed": 0, "solved": 0}
    stored = 0
    pending: list[Feedback] = []
    signatures: list[Signature] = []
    keyed = [(ref.hash(), ref, det) for ref, det in built]
    messages = any(detector_info(det).needs_messages for _, det in built)
    collector = stage_collector(store, run_id, registry) if stages else None
    decisive = DecisiveTally(collector.env.stage if collector is not None else None)
    for trajectory in store.iter_trajectories(run_id, with_messages=messages):
        group = _group(trajectory)
        counts["all"] += 1
        if group:
            counts[group] += 1
        held = {fb.id for fb in trajectory.feedback}
        if collector is not None:
            collector.add(trajectory)
        decisive.add(trajectory)
        findings = detect_all(keyed, trajectory)
        if group == "failed" and taxonomy != "none":
            signatures.append(signature(trajectory, [fb for f in findings.values() for fb in f]))
        for key, found in findings.items():
            records[key] += len(found)
            if found:
                hits[key]["all"].append(trajectory.id)
                if group:
                    hits[key][group].append(trajectory.id)
            pending.extend(fb for fb in found if fb.id not in held)
        if not save:
            pending.clear()
        elif len(pending) >= WRITE_BATCH:
            stored += store.add_feedbacks(pending)
            pending.clear()
    stored += store.add_feedbacks(pending) if pending else 0
    summaries = [
        DetectorSummary(
            detector=ref, findings=records[ref.hash()],
            all=share(len(hits[ref.hash()]["all"]), counts["all"]),
            failed=share(len(hits[ref.hash()]["failed"]), counts["failed"]),
            solved=share(len(hits[ref.hash()]["solved"]), counts["solved"]),
            examples=_examples(hits[ref.hash()]),
        )
        for ref, _ in built
    ]
    summaries.sort(key=lambda s: (-s.failed.count, -s.all.count))
    staged = collector.report() if collector is not None else None
    return Diagnosis(run_id=run_id, stages=staged,
                     trajectories=counts["all"], failed=counts["failed"],
                     solved=counts["solved"],
                     errored=counts["all"] - counts["failed"] - counts["solved"],
                     stored=stored, detectors=summaries, decisive=decisive.result(),
                     taxonomy=None if taxonomy == "none" else build_taxonomy(signatures, taxonomy))


def _group(t: Trajectory) -> str | None:
    """``"solved"``, ``"failed"`` or ``None`` (no outcome, or an error not the agent's)."""
    if t.outcome is None or not t.outcome.counts:
        return None
    return "solved" if t.outcome.success else "failed"


def _examples(hit: dict[str, list[str]]) -> list[str]:
    seen = list(dict.fromkeys([*hit["failed"], *hit["all"]]))
    return seen[:EXAMPLES]
