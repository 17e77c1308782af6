"""Judges: models that score trajectories and write ``Feedback(source="judge")``.

The contract lives in :mod:`sharpen.judges.base`; built-in judges (rubric, pairwise,
reference, checklist) arrive with the judges work (docs/plugins.md says what a judge must do
today)."""

from sharpen.judges.base import JUDGE, BaseJudge, Judge

__all__ = ["JUDGE", "BaseJudge", "Judge"]
