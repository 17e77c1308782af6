"""The viewer's data through FastAPI's TestClient on a real SQLite store: the ``.json`` twin of
every page, search across runs, tool-call arguments rendered by type, each trial's prompt, and
the compare page's verdict, spend deltas, changed-only filter and unfinished-run warning."""

from __future__ import annotations

import random
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the viewer extra is not installed: pip install 'sharpen[viewer]'")

from fastapi.testclient import TestClient

from sharpen.core.hashing import content_hash
from sharpen.core.manifest import RunManifest
from sharpen.core.messages import Message
from sharpen.core.registry import PluginRef
from sharpen.core.trajectory import TRIAL, TRIAL_PROMPT
from sharpen.stats.compare import compare_stored
from sharpen.store.store import Store
from sharpen.viewer import create_app
from sharpen.viewer.demo import fill_fixture_store, fixture_spec, fixture_tasks, make_trajectory


@pytest.fixture
def store(tmp_path: Path):
    st = Store(f"sqlite:///{tmp_path / 'viewer.db'}")
    st.ids = fill_fixture_store(st)  # type: ignore[attr-defined]
    yield st
    st.close()


def labelled_run(store: Store, status: str = "finished", **extra: str) -> str:
    """A one-task run of a ``fixture-labelled`` spec with ``extra`` labels in its manifest."""
    spec = fixture_spec("labelled", 0.5)
    tasks = fixture_tasks()[:1]
    run_id = uuid.uuid4().hex
    manifest = RunManifest(run_id=run_id, created_at=datetime(2026, 11, 21, tzinfo=UTC),
                           env=PluginRef(name="code"), agent_hash=spec.hash(),
                           task_ids=[tasks[0].id], epochs=1, seed=3,
                           config_hash=content_hash({"labelled": run_id}), isolation="fixture",
                           extra=extra)
    store.create_run(manifest, spec, tasks)
    store.save_trajectory(make_trajectory(run_id, tasks[0], spec, 0, True, random.Random(3)))
    store.set_run_status(run_id, status, {"wall_seconds": 1.0})  # type: ignore[arg-type]
    return run_id


def test_every_page_has_a_json_twin_with_the_data_it_renders(store: Store) -> None:
    ids = store.ids  # type: ignore[attr-defined]
    client = TestClient(create_app(store))
    runs = client.get("/runs.json")
    assert runs.status_code == 200 and runs.headers["content-type"] == "application/json"
    assert {r["manifest"]["run_id"] for r in runs.json()["rows"]} == {
        ids["baseline"], ids["candidate"], ids["xss_run"]}
    assert "csrf" not in runs.json() and "cost_plot" not in runs.json()  # no markup, no token
    html = client.get("/").text
    assert '<a href="/runs.json" class="json-twin"' in html  # every page links its twin

    run = client.get(f"/runs/{ids['baseline'][:8]}.json").json()
    assert run["run_id"] == ids["baseline"] and run["status"] == "finished"
    assert len(run["result"]["tasks"]) == 6
    tid = run["result"]["tasks"][0]["trajectories"][0]["id"]
    assert f'href="/runs/{ids["baseline"]}.json"' in client.get(f"/runs/{ids['baseline']}").text

    traj = client.get(f"/t/{tid}.json").json()
    assert traj["tp"]["id"] == tid and traj["tp"]["run_id"] == ids["baseline"]
    step0 = traj["steps"][0]
    assert step0["step"]["messages"][0]["tool_calls"][0]["arguments"]["code"].startswith("def ")
    assert step0["calls"][0]["tool_calls"][0]["args"][0] == {"name": "code", "kind": "code",
                                                             "language": "Python"}
    pair = client.get(f"/compare/t.json?a={tid}&b={tid}").json()
    assert [p[0]["id"] for p in pair["pages"]] == [tid, tid]
    assert client.get("/improve.json").json()["rows"] == []
    # errors are JSON too
    missing = client.get("/runs/nosuchrun.json")
    assert missing.status_code == 404 and "no run matches" in missing.json()["message"]
    assert client.get("/t/nosuch.json").json() == {"message": "no trajectory nosuch"}


def test_runs_search_by_id_prefix_env_agent_model_and_label(store: Store) -> None:
    ids = store.ids  # type: ignore[attr-defined]
    labelled = labelled_run(store, experiment="exp-42", role="test")
    client = TestClient(create_app(store))

    def found(q: str) -> set[str]:
        return {r["manifest"]["run_id"] for r in client.get("/runs.json", params={"q": q}).json()["rows"]}

    everything = {ids["baseline"], ids["candidate"], ids["xss_run"], labelled}
    assert found(ids["candidate"][:6]) == {ids["candidate"]}
    assert found("code") == everything  # env
    assert found("CANDIDATE") == {ids["candidate"]}  # agent name, any case
    assert found("untrusted") == {ids["xss_run"]}
    assert found("local") == everything  # model
    assert found("exp-42") == {labelled}  # a label's value
    assert found("role=test") == {labelled}  # key=value
    assert found("no-such-run") == set()
    page = client.get("/", params={"q": "exp-42"}).text
    assert page.count('class="run-row"') == 1 and 'value="exp-42"' in page


def test_tool_call_code_is_highlighted_code_not_escaped_json(store: Store) -> None:
    ids = store.ids  # type: ignore[attr-defined]
    client = TestClient(create_app(store))
    tid = client.get(f"/runs/{ids['baseline']}.json").json()["result"]["tasks"][0]["trajectories"][0]["id"]
    html = client.get(f"/t/{tid}").text
    call = html[html.index('<div class="call">'):]
    call = call[:call.index("</div>")]
    assert '<dd class="arg arg-code"><pre class="hl"><span class="hl-k">def</span>' in call
    assert "\\n" not in call and "&#34;code&#34;" not in call and '"code":' not in call
    # a structure is pretty-printed JSON, a short string stays a value
    from sharpen.viewer.render_args import arg_views

    views = {v.name: v for v in arg_views({"query": "x", "options": {"k": [1, 2]}, "n": 3,
                                           "note": "short", "patch": "-a\n+b\n"})}
    assert views["options"].kind == "json" and "\n" in views["options"].html
    assert (views["n"].kind, str(views["n"].html)) == ("scalar", "3")
    assert (views["note"].kind, str(views["note"].html)) == ("scalar", "&#34;short&#34;")
    assert views["patch"].language == "Diff"
    hostile = arg_views({"code": "</pre><script>alert(1)</script>"})[0]
    assert "<script" not in str(hostile.html) and "</pre>" not in str(hostile.html)
    assert "&lt;/</span>" in str(hostile.html)  # escaped by Pygments


def _trials_trajectory(store: Store, with_prompts: bool) -> str:
    """A two-trial trajectory (as reflexion writes it): trial 0 ran with the plain prompt,
    trial 1 with the reflections appended; ``messages`` is the last trial's conversation."""
    run_id = labelled_run(store)
    spec = fixture_spec("labelled", 0.5)
    task = fixture_tasks()[0]
    t = make_trajectory(run_id, task, spec, 1, False, random.Random(5), n_steps=2)
    plain = [Message(role="system", content="PLAIN SYSTEM PROMPT"), Message(role="user", content="task")]
    retry = [Message(role="system", content="PLAIN SYSTEM PROMPT\n\nREFLECTIONS: try sorted()"),
             Message(role="user", content="task")]
    for trial, (step, prompt) in enumerate(zip(t.steps, (plain, retry), strict=True)):
        step.info[TRIAL] = trial
        if with_prompts:
            step.info[TRIAL_PROMPT] = [m.model_dump(mode="json") for m in prompt]
    t.messages = [*retry, *t.steps[1].messages]
    store.save_trajectory(t)
    return t.id


def test_each_trial_shows_the_prompt_it_ran_with(store: Store) -> None:
    client = TestClient(create_app(store))
    html = client.get(f"/t/{_trials_trajectory(store, with_prompts=True)}").text
    assert '<h2>Prompt</h2>' not in html  # no prompt above step 0 that belongs to a later trial
    t0, t1 = html.index('id="trial-0"'), html.index('id="trial-1"')
    step0, step1 = html.index('id="step-0"'), html.index('id="step-1"')
    assert t0 < step0 < t1 < step1
    assert "PLAIN SYSTEM PROMPT" in html[t0:step0] and "REFLECTIONS" not in html[t0:step0]
    assert "REFLECTIONS: try sorted()" in html[t1:step1]
    assert "trial_prompt" not in html  # shown as the prompt, not again in the step's info
    # recorded before trials kept their prompts: the stored (last) prompt goes to the last trial
    old = client.get(f"/t/{_trials_trajectory(store, with_prompts=False)}").text
    t0, t1, step1 = old.index('id="trial-0"'), old.index('id="trial-1"'), old.index('id="step-1"')
    assert "was not stored" in old[t0:t1] and "PLAIN SYSTEM PROMPT" not in old[t0:t1]
    assert "REFLECTIONS: try sorted()" in old[t1:step1]


def test_compare_page_verdict_spend_changed_filter_and_unfinished_warning(store: Store) -> None:
    ids = store.ids  # type: ignore[attr-defined]
    a, b = ids["baseline"], ids["candidate"]
    client = TestClient(create_app(store))
    data = client.get("/compare.json", params={"a": a[:10], "b": b}).json()
    expected = compare_stored([(store, a), (store, b)]).model_dump(mode="json")
    assert data["report"] == expected and data["comparison"] == expected["comparisons"][0]
    spend = {r["name"]: r for r in data["spend"]}
    cost_a, cost_b = expected["runs"][0]["cost"], expected["runs"][1]["cost"]
    assert spend["tokens"]["delta"] == (cost_b["input_tokens"] + cost_b["output_tokens"]
                                        - cost_a["input_tokens"] - cost_a["output_tokens"])
    assert spend["cost"]["delta"] == pytest.approx(cost_b["cost_usd"] - cost_a["cost_usd"])
    assert data["unfinished"] == []
    html = client.get("/compare", params={"a": a, "b": b}).text
    assert expected["comparisons"][0]["verdict"] in html.replace("&#39;", "'")
    assert 'id="spend"' in html and "warning:" not in html.split('id="verdict"')[0]
    n_changed = len(re.findall(r'class="delta-row (?:worse|better)"', html))
    changed = client.get("/compare", params={"a": a, "b": b, "changed": "1"}).text
    assert n_changed and changed.count('class="delta-row') == n_changed
    same_a, same_b = labelled_run(store), labelled_run(store)  # one task, solved by both
    same = client.get("/compare", params={"a": same_a, "b": same_b}).text
    assert same.count('class="delta-row same"') == 1
    hidden = client.get("/compare", params={"a": same_a, "b": same_b, "changed": "1"}).text
    assert 'class="delta-row' not in hidden and "No shared task changed." in hidden
    running = labelled_run(store, status="running")
    warned = client.get("/compare", params={"a": a, "b": running}).text
    assert f"B ({running}) is running, not finished" in warned
