"""Diagnosis: detectors over stored trajectories, their findings stored as
``Feedback(source="detector")`` on the step they are about, and a run's failure modes with
counts and intervals (``sharpen diagnose RUN``; docs/diagnose.md).

The contract lives in :mod:`sharpen.diagnose.base`; the built-in detectors in
:mod:`sharpen.diagnose.detectors` and :mod:`sharpen.diagnose.hacking`; the run-level engine
in :mod:`sharpen.diagnose.run`. Deterministic replay of an episode from its task and actions is
:mod:`sharpen.diagnose.replay`; counterfactual attribution of a failure to its decisive step
(``sharpen attribute RUN``) is :mod:`sharpen.diagnose.attribution`. Metrics induced from
people's free-text comments (``sharpen induce RUN``, AutoLibra) are
:mod:`sharpen.diagnose.induce`, their coverage and redundancy :mod:`sharpen.diagnose.metaeval`."""

from sharpen.diagnose.base import DETECTOR, BaseDetector, Detector

__all__ = ["DETECTOR", "BaseDetector", "Detector"]
