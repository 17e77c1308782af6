"""``sharpen check judge``: the built-in judges keep the contract with the embedded model; a
judge that raises something other than JudgeError, or writes records of another source, is
named with the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import sharpen

from sharpen.testing import check_judge

BROKEN = '''
from sharpen import Feedback, FeedbackTarget
from sharpen.judges.base import BaseJudge


class Crashes(BaseJudge):
    async def judge(self, trajectory, model):
        raise ValueError("no idea")


class WrongSource(BaseJudge):
    async def judge(self, trajectory, model):
        return [Feedback(source="human", name="x", value=1,
                         target=FeedbackTarget(kind="trajectory", trajectory_id="other"))]


class Silent(BaseJudge):
    async def judge(self, trajectory, model):
        return []
'''


@pytest.mark.slow
@pytest.mark.parametrize("name", ["rubric:solved", "reference", "checklist", "pairwise"])
def test_built_in_judges_pass_the_check_with_the_embedded_model(name: str) -> None:
    report = check_judge(name, args={"token_budget": 300})
    assert report.ok, report.problems
    assert {p.split(":")[0] for p in report.passed} >= {"build", "members", "judge"}


def test_a_judge_that_breaks_the_contract_is_named_with_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text(BROKEN)
    crash = check_judge(f"{path}:Crashes")
    assert not crash.ok
    assert any("raise sharpen.judges.base.JudgeError" in p.message for p in crash.problems)
    wrong = check_judge(f"{path}:WrongSource")
    messages = " ".join(p.message for p in wrong.problems)
    assert "use source='judge'" in messages and "not the one judged" in messages
    silent = check_judge(f"{path}:Silent")
    assert any("returned no feedback" in p.message for p in silent.problems)
    res = sharpen("check", "judge", f"{path}:Crashes", cwd=tmp_path)
    assert res.returncode == 1 and "JudgeError" in res.stdout
