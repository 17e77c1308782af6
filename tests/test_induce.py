"""Induced metrics (AutoLibra): coverage and redundancy on hand-made traits whose answer is
known, clustering, notes from the store and from a file, the rubric ``sharpen judge`` reads —
and ``sharpen induce`` end to end on the reference agent's toolshop run with 32 notes written
for the test (tests/data/induce_notes.yaml), replayed from the embedded model's recording
(tests/cassettes/induce_toolshop.jsonl, by tests/record_induce_cassette.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import sharpen
from record_induce_cassette import CASSETTE, NOTES, build_store, model_flags

from sharpen.core.errors import UserError
from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.diagnose.induce import (
    Induction,
    Metric,
    cluster,
    notes_from_file,
    notes_from_store,
    to_rubric,
    write_rubric,
)
from sharpen.diagnose.metaeval import Aspect, Trait, meta_evaluate
from sharpen.judges.pointwise import RubricJudge
from sharpen.judges.rubric import Rubric
from sharpen.judges.runner import resolve_judge


def _aspect(t: str, metric: str, sign: int, text: str = "x") -> Aspect:
    return Aspect(note=0, trajectory_id=t, behaviour=text, feedback=text, sign=sign,  # type: ignore[arg-type]
                  metric=metric)


# -- coverage and redundancy on known answers -------------------------------------------------


def test_coverage_and_redundancy_on_hand_made_traits() -> None:
    aspects = [
        _aspect("t1", "verify", -1),   # matched: t1 verify -1
        _aspect("t1", "tell", -1),     # not matched: the judge said t1 tell +1 (wrong sign)
        _aspect("t2", "verify", -1),   # not matched: the judge said 0 (n/a)
        _aspect("t2", "exact", 1),     # matched
        _aspect("t3", "exact", 1),     # left out: t3 got no verdict
    ]
    ratings = [
        Trait(trajectory_id="t1", metric="verify", rating=-1),
        Trait(trajectory_id="t1", metric="tell", rating=1),     # a trait nobody asked for
        Trait(trajectory_id="t1", metric="exact", rating=1),    # a trait nobody asked for
        Trait(trajectory_id="t2", metric="verify", rating=0),   # not a trait
        Trait(trajectory_id="t2", metric="tell", rating=0),
        Trait(trajectory_id="t2", metric="exact", rating=1),
    ]
    me = meta_evaluate(aspects, ratings, judged={"t1", "t2"})
    assert (me.aspects, me.matched, me.unjudged_aspects) == (4, 2, 1)
    assert me.coverage == pytest.approx(2 / 4)
    assert (me.traits, me.unmatched_traits) == (4, 2)
    assert me.redundancy == pytest.approx(2 / 4)
    assert me.uncovered == [1, 2]
    # Two aspects asking for the same trait are both matched by it; the trait counts once.
    twice = [_aspect("t1", "verify", -1), _aspect("t1", "verify", -1)]
    me = meta_evaluate(twice, ratings[:1])
    assert (me.coverage, me.redundancy) == (1.0, 0.0)


def test_meta_metrics_with_nothing_to_count_are_none() -> None:
    me = meta_evaluate([], [Trait(trajectory_id="t", metric="m", rating=0)])
    assert me.coverage is None and me.redundancy is None
    me = meta_evaluate([_aspect("t", "m", 1)], [Trait(trajectory_id="t", metric="m", rating=0)])
    assert me.coverage == 0.0 and me.redundancy is None


# -- clustering, notes, the rubric ---------------------------------------------------------------


def test_aspects_about_two_things_fall_in_two_clusters() -> None:
    look = ["never looked up the order before cancelling", "did not look up the order first",
            "no look-up of the order before acting", "cancelled without looking up the order"]
    tell = ["did not tell the customer the refund amount", "told the customer nothing about the "
            "refund", "finished without telling the customer the refund", "customer never told "
            "of refund"]
    aspects = [_aspect("t", "", -1, text) for text in look + tell]
    labels, terms = cluster(aspects)
    assert labels[:4] == [0] * 4 and labels[4:] == [1] * 4
    assert "looked" in " ".join(terms[0]) or "look" in " ".join(terms[0])
    assert "refund" in terms[1]
    labels, _ = cluster(aspects, k=1)
    assert set(labels) == {0}
    labels, terms = cluster([_aspect("t", "", 1, "the a an"), _aspect("t", "", 1, "of to")])
    assert labels == [0, 0] and terms == [[]]  # nothing but stop words: one cluster


def test_a_rubric_of_induced_metrics_is_what_sharpen_judge_reads(tmp_path: Path) -> None:
    metrics = [Metric(name="verifies_first", definition="Looks the order up before acting.",
                      good=["[S0] looked up the order"], bad=["[S0] cancelled blind"]),
               Metric(name="tells_result", definition="Tells the customer the result.",
                      bad=["finished silently"])]
    rubric = to_rubric(metrics, "induced-x", "From notes.")
    ind = Induction(run_id="r", model="m", notes=[], grounding_errors=[], aspects=[],
                    metrics=metrics, ratings=[], judge_errors=[], meta=None,
                    rubric=rubric.model_dump(mode="json"))
    path = write_rubric(ind, tmp_path / "rubric.yaml")
    loaded = Rubric.load(path)
    assert loaded == rubric
    assert [c.choices() for c in loaded.criteria] == [[-1, 0, 1]] * 2
    assert [(e.text, e.value) for e in loaded.criteria[0].examples] == [
        ("[S0] looked up the order", 1), ("[S0] cancelled blind", -1)]
    ref = resolve_judge(str(path))  # what `sharpen judge RUN --judge rubric.yaml` does
    assert ref.name == "rubric"
    assert RubricJudge(**ref.args).rubric == rubric
    with pytest.raises(UserError, match="no metric was induced"):
        write_rubric(ind.model_copy(update={"rubric": None}), tmp_path / "none.yaml")


@pytest.fixture(scope="module")
def toolshop(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The reference agent's toolshop run with the notes stored as human comments."""
    folder = tmp_path_factory.mktemp("induce")
    store, run_id = asyncio.run(build_store(folder))
    store.close()
    return folder, run_id


def _store_url(folder: Path) -> str:
    return f"sqlite:///{folder / '.sharpen' / 'sharpen.db'}"


def test_notes_come_from_the_viewers_comments_or_a_file(toolshop: tuple[Path, str],
                                                        tmp_path: Path) -> None:
    from sharpen.store import Store

    folder, run_id = toolshop
    store = Store(_store_url(folder))
    notes = notes_from_store(store, run_id)
    written = yaml.safe_load(NOTES.read_text(encoding="utf-8"))
    assert len(notes) == len(written) >= 30
    assert sorted(n.text for n in notes) == sorted(w["text"] for w in written)
    assert sum(n.step is not None for n in notes) == sum("step" in w for w in written)
    # An edit replaces the comment it supersedes; a score without a comment is no note.
    first = notes[0]
    target = FeedbackTarget(kind="trajectory", run_id=run_id, trajectory_id=first.trajectory_id)
    edits = [Feedback(source="human", target=target, rationale="edited", supersedes=first.source),
             Feedback(source="human", target=target, value=3.0)]
    ids = [t.id for t in store.iter_trajectories(run_id, with_steps=False)]
    lines = tmp_path / "notes.jsonl"
    lines.write_text(json.dumps({"trajectory_id": ids[0][:10], "text": "Fine.", "step": 1})
                     + "\n\n" + json.dumps({"trajectory_id": ids[1], "text": "ok"}) + "\n")
    from_file = notes_from_file(lines, ids)
    assert [(n.trajectory_id, n.text, n.step) for n in from_file] == [
        (ids[0], "Fine.", 1), (ids[1], "ok", None)]
    (tmp_path / "bad.jsonl").write_text('{"trajectory_id": "nope", "text": "x"}\n')
    with pytest.raises(UserError, match="line 1: trajectory 'nope' is not in the run"):
        notes_from_file(tmp_path / "bad.jsonl", ids)
    (tmp_path / "worse.jsonl").write_text('{"text": "x"}\n')
    with pytest.raises(UserError, match="line 1 is not a note"):
        notes_from_file(tmp_path / "worse.jsonl", ids)
    for fb in edits:  # last: the other tests read the notes as written
        store.add_feedback(fb)
    edited = notes_from_store(store, run_id)
    assert len(edited) == len(notes)
    assert "edited" in [n.text for n in edited] and first.text not in [n.text for n in edited]
    store.close()


# -- end to end, replayed from the embedded model ------------------------------------------------


@pytest.fixture(scope="module")
def induced(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """``sharpen induce`` on a fresh copy of the run, replayed from the cassette."""
    assert CASSETTE.is_file(), "record it: .venv/bin/python tests/record_induce_cassette.py"
    folder = tmp_path_factory.mktemp("induce_cli")
    asyncio.run(build_store(folder))[0].close()
    out = folder / "rubric.yaml"
    res = sharpen("induce", "latest", "--store", _store_url(folder), *model_flags(),
                  "--out", str(out), "--json", cwd=folder)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout), out


def test_induce_end_to_end_yields_metrics_with_coverage_and_redundancy(
        induced: tuple[dict[str, Any], Path]) -> None:
    data, out = induced
    ind = Induction.model_validate(data)
    assert len(ind.notes) == 32
    assert len(ind.aspects) >= 1 and len(ind.metrics) >= 1
    names = [m.name for m in ind.metrics]
    # The metrics partition the aspects, and each aspect names its metric.
    assert sorted(i for m in ind.metrics for i in m.aspects) == list(range(len(ind.aspects)))
    for m in ind.metrics:
        assert all(ind.aspects[i].metric == m.name for i in m.aspects)
        assert m.good == [ind.aspects[i].behaviour for i in m.aspects if ind.aspects[i].sign > 0]
    # Every metric is rated on every judged trajectory.
    judged = {r.trajectory_id for r in ind.ratings}
    assert sorted((r.trajectory_id, r.metric) for r in ind.ratings) == sorted(
        (t, n) for t in judged for n in names)
    # Coverage and redundancy, recomputed by hand from the aspects and the stored ratings.
    me = ind.meta
    assert me is not None
    traits = {(r.trajectory_id, r.metric, r.rating) for r in ind.ratings if r.rating != 0}
    counted = [a for a in ind.aspects if a.trajectory_id in judged]
    hits = [a for a in counted if (a.trajectory_id, a.metric, a.sign) in traits]
    asked = {(a.trajectory_id, a.metric, a.sign) for a in ind.aspects}
    assert me.aspects == len(counted) > 0
    assert me.coverage == pytest.approx(len(hits) / len(counted))
    assert me.traits == len(traits)
    if traits:
        assert me.redundancy == pytest.approx(len(traits - asked) / len(traits))
    for share in (me.coverage, me.redundancy):
        assert share is None or 0.0 <= share <= 1.0
    # The rubric written is the one reported, and sharpen judge reads it.
    rubric = Rubric.load(out)
    assert [c.name for c in rubric.criteria] == names
    assert rubric == Rubric.parse(ind.rubric)
    assert "why:" not in out.read_text()  # defaults left out of the file
    assert resolve_judge(str(out)).args["rubric"] == ind.rubric


def test_induce_prints_a_table_and_refuses_a_run_with_no_notes(
        induced: tuple[dict[str, Any], Path], tmp_path: Path) -> None:
    folder = induced[1].parent  # its notes as written (the notes test edits the other store)
    res = sharpen("induce", "latest", "--store", _store_url(folder), *model_flags(), "--no-evaluate",
                  cwd=folder)
    assert res.returncode == 0, res.stderr
    assert "Induced metrics" in res.stdout and "32 notes" in res.stdout
    assert "coverage" not in res.stdout  # not judged
    res = sharpen("run", "toolshop", "--tasks", "1", "--agent-name", "null", "--no-progress",
                  "--store", _store_url(tmp_path), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    res = sharpen("induce", "latest", "--store", _store_url(tmp_path), *model_flags(),
                  cwd=tmp_path)
    assert res.returncode == 2
    assert "has no human comment" in res.stderr and "--notes FILE" in res.stderr
