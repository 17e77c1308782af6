"""The viewer's improvement pages over a real experiment folder and store: a Reflexion
experiment replayed from the cassette recorded from the embedded model
(tests/record_improve_cassette.py), one finished and one interrupted."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the viewer extra is not installed: pip install 'sharpen[viewer]'")

from conftest import Interrupt
from fastapi.testclient import TestClient
from page_text import text
from record_improve_cassette import config

from sharpen.improvement.experiment import Experiment, ExperimentResult
from sharpen.improvement.folder import experiments_base, list_experiments
from sharpen.improvement.report import selection_note, verdict_line
from sharpen.store.store import Store
from sharpen.viewer import create_app


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory):
    """A store with one finished and one interrupted experiment, in the default folders."""
    root = tmp_path_factory.mktemp("lab")
    store = Store(f"sqlite:///{root / 'sharpen.db'}")
    base = experiments_base(store.url)
    cfg = config("replay")
    result = asyncio.run(Experiment(cfg, store, base / cfg.experiment_id()).run())
    with pytest.raises(KeyboardInterrupt):  # the same experiment in another folder, cut short
        asyncio.run(Experiment(cfg, store, base / "interrupted", on_event=Interrupt(at=3)).run())
    yield store, base, result
    store.close()


def test_the_folder_holds_config_checkpoint_and_result(lab) -> None:
    _store, base, result = lab
    folders = {f.id: f for f in list_experiments(base)}
    done, stopped = folders[result.experiment_id], folders["interrupted"]
    assert done.finished and done.result == result and done.config == result.config
    assert list(done.states) == ["reflexion"] and done.problems == []
    assert not stopped.finished and stopped.config is not None and "reflexion" in stopped.states
    assert stopped.states["reflexion"].stop_reason is None


def test_experiment_list_shows_state_and_verdict(lab) -> None:
    store, _base, result = lab
    client = TestClient(create_app(store))
    page = text(client.get("/improve").text)
    assert result.experiment_id in page and "interrupted" in page
    assert "finished" in page and "not finished" in page
    assert f"reflexion : {verdict_line(result.results[0])}" in page


def test_experiment_page_links_verdict_archive_grid_and_trajectories(lab) -> None:
    store, base, result = lab
    client = TestClient(create_app(store))
    src = client.get(f"/improve/{result.experiment_id[:6]}").text  # a prefix is enough
    page = text(src)
    r = result.results[0]
    # the held-out table: the seed's and the winner's test runs, linked and comparable
    assert f'href="/runs/{result.baseline_run}"' in src and f'href="/runs/{r.test_run}"' in src
    assert f"/compare?a={result.baseline_run}&amp;b={r.test_run}" in src
    assert f"{100 * r.test_score:.1f}%" in page and f"{r.comparison.p_value:.3f}" in page
    # an 8-task validation split cannot separate the winner from the seed: the page says so
    note = selection_note(r)
    assert note is not None and note in page
    # every archived candidate has a row, and the winner is marked
    for e in r.lineage:
        assert f'/improve/{result.experiment_id}/reflexion/{e.hash}"' in src
    assert re.search(rf"{r.winner.hash()[:8]}</code></a> <b>winner</b>", src)
    # validation cells link to the stored trajectories that scored them, marked by outcome
    rows = re.findall(r'<tr><td title="[0-9a-f]+">([^<]+)</td>(.*?)</tr>', src, flags=re.S)
    assert len(rows) == result.config.val
    state = next(f for f in list_experiments(base) if f.id == result.experiment_id).states["reflexion"]
    runs = {rec.trajectory_id: rec.run_id for rec in state.cache.values()}
    checked = 0
    for task_id, cells in rows:
        for mark, tid in re.findall(r'class="traj (mark-ok|mark-fail)" href="/t/([0-9a-f]+)"', cells):
            t = next(t for t in store.iter_trajectories(runs[tid], with_steps=False) if t.id == tid)
            assert t.task.id == task_id.strip()
            assert (mark == "mark-ok") == bool(t.outcome and t.outcome.success and t.outcome.counts)
            checked += 1
    assert checked == result.config.val * len(state.archive.candidates)
    assert client.get(f"/t/{tid}").status_code == 200
    assert "stopped:" in page and "anytime curve" in page and "<svg" in src
    # every run the experiment made is listed and linked
    listed = re.findall(r'<tr class="experiment-run"><td><a href="/runs/([0-9a-f]+)">', src)
    made = {rec.run_id for rec in state.cache.values()} | {result.baseline_run, r.test_run}
    assert sorted(listed) == sorted(made)
    # a child that lost its gate: its minibatch episodes, as many successes as the log says
    rejections = [r for rs in state.rejected.values() for r in rs]
    assert rejections, "the cassette's experiment gated no child out"
    rows = re.findall(r'<tr class="rejected-row">(.*?)</tr>', src, flags=re.S)
    assert len(rows) == len(rejections)
    for r, row in zip(rejections, rows, strict=True):
        marks = re.findall(r'class="traj (mark-ok|mark-fail)" href="/t/[0-9a-f]+"', row)
        assert len(marks) == r.minibatch and marks.count("mark-ok") == r.child_successes


def test_candidate_page_diffs_the_spec_against_its_parent(lab) -> None:
    store, _base, result = lab
    client = TestClient(create_app(store))
    child = result.results[0].lineage[-1]
    assert child.proposer == "reflexion", "the cassette's experiment accepted no child"
    src = client.get(f"/improve/{result.experiment_id}/reflexion/{child.hash}").text
    assert re.search(r'class="diff-del">-agent: tool', src)
    assert re.search(r'class="diff-add">\+agent: reflexion \{.*&#34;trials&#34;', src)
    assert child.change in text(src)


def test_an_interrupted_experiment_shows_its_checkpoint(lab) -> None:
    store, _base, _result = lab
    page = text(TestClient(create_app(store)).get("/improve/interrupted").text)
    assert "Not scored yet" in page and "--resume" in page
    assert "not stopped" in page and "seed: the starting spec" in page


def test_damaged_files_and_unknown_ids_are_explained(lab, tmp_path: Path) -> None:
    store, _base, _result = lab
    broken = tmp_path / "improve" / "broken"
    (broken / "reflexion").mkdir(parents=True)
    (broken / "reflexion" / "state.json").write_text("{not json")
    client = TestClient(create_app(store, improve_dir=tmp_path / "improve"))
    page = text(client.get("/improve/broken").text)
    assert "unreadable: reflexion/state.json" in page
    for twin in ("twin-a", "twin-b"):
        (tmp_path / "improve" / twin).mkdir()
        (tmp_path / "improve" / twin / "config.json").write_text("[]")
    ambiguous = client.get("/improve/twin")
    assert ambiguous.status_code == 404 and "matches 2 experiments" in text(ambiguous.text)
    assert "unreadable: config.json" in text(client.get("/improve/twin-a").text)
    missing = client.get("/improve/nope")
    assert missing.status_code == 404 and "no experiment 'nope'" in text(missing.text)
    assert client.get(f"/improve/broken/reflexion/{'0' * 16}").status_code == 404
    empty = TestClient(create_app(store, improve_dir=tmp_path / "none"))
    assert "No experiments here" in text(empty.get("/improve").text)


def test_result_json_reads_back(lab) -> None:
    _store, base, result = lab
    again = ExperimentResult.model_validate_json((base / result.experiment_id / "result.json").read_text())
    assert again == result


def test_rejected_child_page_prefix_redirect_and_json_twins(lab) -> None:
    """A gated-out child's hash has a page (its gate and its episodes); a candidate's 8-char
    prefix, as the pages show it, redirects to its full page; each page has a JSON twin."""
    store, _base, result = lab
    client = TestClient(create_app(store))
    exp = result.experiment_id
    state = next(f for f in list_experiments(_base) if f.id == exp).states["reflexion"]
    (parent, rejections), = [(p, rs) for p, rs in state.rejected.items() if rs][:1]
    child = rejections[0]
    page = client.get(f"/improve/{exp}/reflexion/{child.child_hash}")
    assert page.status_code == 200
    seen = text(page.text)
    assert f"{child.child_successes}/{child.minibatch} on the minibatch" in seen and child.change in seen
    assert len(re.findall(r'class="traj (?:mark-ok|mark-fail)" href="/t/', page.text)) == child.minibatch
    assert f'href="/improve/{exp}/reflexion/{parent}"' in page.text
    winner = result.results[0].lineage[-1].hash
    short = client.get(f"/improve/{exp}/reflexion/{winner[:8]}", follow_redirects=False)
    assert short.status_code == 307 and short.headers["location"] == f"/improve/{exp}/reflexion/{winner}"
    assert client.get(f"/improve/{exp}/other-proposer/{winner}").status_code == 200  # redirected
    twin = client.get(f"/improve/{exp}/reflexion/{winner}.json").json()
    assert twin["cand"]["hash"] == winner and twin["proposer"] == "reflexion"
    experiment = client.get(f"/improve/{exp}.json").json()
    assert experiment["exp"]["id"] == exp and experiment["known"][winner] == "reflexion"
    assert experiment["engines"][0]["best"] == state.archive.best().hash
