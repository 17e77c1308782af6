"""The viewer through FastAPI's TestClient on a real SQLite store: CSRF, tokens, Host check,
escaping, annotation with edit history, export, filters and comparison."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the viewer extra is not installed: pip install 'sharpen[viewer]'")

from fastapi.testclient import TestClient

from sharpen.store.store import Store
from sharpen.viewer import create_app
from sharpen.viewer.demo import fill_fixture_store
from sharpen.viewer.security import CSP, resolve_token


@pytest.fixture
def store(tmp_path: Path):
    st = Store(f"sqlite:///{tmp_path / 'viewer.db'}")
    st.ids = fill_fixture_store(st)  # type: ignore[attr-defined]
    yield st
    st.close()


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match, "page has no CSRF field"
    return match.group(1)


def first_step_post(client: TestClient, tid: str) -> tuple[str, dict[str, str]]:
    page = client.get(f"/t/{tid}")
    assert page.status_code == 200
    return csrf_of(page.text), {"kind": "step", "step_index": "0", "text": "wrong loop bound",
                                "score": "0.25", "author": "ada", "name": "note"}


def test_post_without_csrf_token_is_refused(store: Store) -> None:
    tid = store.ids["xss_trajectory"]
    client = TestClient(create_app(store))
    _, form = first_step_post(client, tid)
    assert client.post(f"/t/{tid}/feedback", data=form).status_code == 403
    assert client.post(f"/t/{tid}/feedback", data={**form, "csrf": "forged"}).status_code == 403
    fresh = TestClient(create_app(store))  # no cookie at all
    assert fresh.post(f"/t/{tid}/feedback", data={**form, "csrf": "x"}).status_code == 403
    assert [f for f in store.feedback_for(tid) if f.source == "human"] == []


def test_annotation_with_csrf_is_stored_and_edits_keep_history(store: Store) -> None:
    tid = store.ids["xss_trajectory"]
    client = TestClient(create_app(store))
    token, form = first_step_post(client, tid)
    r = client.post(f"/t/{tid}/feedback", data={**form, "csrf": token}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].endswith("#step-0")
    human = [f for f in store.feedback_for(tid) if f.source == "human"]
    assert len(human) == 1
    fb = human[0]
    assert (fb.author, fb.value, fb.rationale, fb.target.kind, fb.target.step_index) == (
        "ada", 0.25, "wrong loop bound", "step", 0)
    # an edit is a new record that supersedes the old one; both are kept and shown
    edit = {"supersedes": fb.id, "kind": "step", "step_index": "0", "text": "off by one",
            "score": "0.5", "name": "note", "csrf": token}
    r = client.post(f"/t/{tid}/feedback", data=edit, headers={"HX-Request": "true"})
    assert r.status_code == 200 and "off by one" in r.text and "history (1 earlier)" in r.text
    human = [f for f in store.feedback_for(tid) if f.source == "human"]
    assert len(human) == 2 and human[1].supersedes == fb.id and human[1].author == "ada"
    # a span annotation through the CSRF header, as HTMX sends it
    span = {"kind": "step", "step_index": "1", "span_start": "0", "span_end": "7", "text": "hedging"}
    r = client.post(f"/t/{tid}/feedback", data=span, headers={"X-CSRF-Token": token, "HX-Request": "true"})
    assert r.status_code == 200 and "Attempt" in r.text
    last = store.feedback_for(tid)[-1]
    assert last.target.kind == "span" and last.target.span == (0, 7)
    lines = client.get("/feedback/human.jsonl").text.strip().splitlines()
    assert [json.loads(x)["rationale"] for x in lines] == ["wrong loop bound", "off by one", "hedging"]


def test_bad_annotations_are_rejected(store: Store) -> None:
    tid = store.ids["xss_trajectory"]
    client = TestClient(create_app(store))
    token, form = first_step_post(client, tid)
    for bad in ({"step_index": "99"}, {"score": "high"}, {"text": "", "score": ""},
                {"kind": "span", "span_start": "5", "span_end": "2"}, {"kind": "run"}):
        assert client.post(f"/t/{tid}/feedback", data={**form, **bad, "csrf": token}).status_code == 400
    assert client.post("/t/nope/feedback", data={**form, "csrf": token}).status_code == 404


def test_token_is_required_when_configured(store: Store) -> None:
    client = TestClient(create_app(store, token="s3cret"))
    assert client.get("/").status_code == 401
    assert client.get("/static/viewer.js").status_code == 401
    assert client.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 401
    r = client.get("/?token=s3cret&env=code", follow_redirects=False)
    assert r.status_code == 303 and "token" not in r.headers["location"]
    assert client.get("/").status_code == 200  # the cookie now carries it
    assert TestClient(create_app(store, token="s3cret")).get(
        "/", headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_non_local_host_gets_a_token() -> None:
    assert resolve_token("127.0.0.1", None) == (None, False)
    assert resolve_token("localhost", None) == (None, False)
    assert resolve_token("::1", None) == (None, False)
    token, generated = resolve_token("0.0.0.0", None)
    assert generated and token and len(token) >= 20
    assert resolve_token("192.168.1.5", "mine") == ("mine", False)


def test_loopback_viewer_answers_only_loopback_host_names(store: Store) -> None:
    app = create_app(store, allowed_hosts=frozenset({"127.0.0.1", "localhost", "::1"}))
    assert TestClient(app, base_url="http://127.0.0.1:8321").get("/").status_code == 200
    assert TestClient(app, base_url="http://evil.example:8321").get("/").status_code == 421


def test_model_output_is_escaped_and_csp_is_strict(store: Store) -> None:
    client = TestClient(create_app(store))
    r = client.get(f"/t/{store.ids['xss_trajectory']}")
    assert r.status_code == 200
    assert r.headers["content-security-policy"] == CSP and "script-src 'self'" in CSP
    assert "<script>window" not in r.text and "<img src=x" not in r.text
    assert "&lt;script&gt;window.__pwned = 1" in r.text
    assert "&lt;img src=x onerror=" in r.text
    # the only script tags are the two static files
    assert re.findall(r"<script[^>]*>", r.text) == [
        '<script src="/static/htmx.min.js" defer>', '<script src="/static/viewer.js" defer>']


def test_run_page_filters_search_and_pages(store: Store) -> None:
    client = TestClient(create_app(store, per_page=4))
    run = store.ids["baseline"]
    whole = client.get(f"/runs/{run}")
    assert whole.status_code == 200 and "6 tasks match" in whole.text and "page 1 of 2" in whole.text
    assert "fixture/add_digits" in whole.text and "fixture/kth_prime" not in whole.text
    page2 = client.get(f"/runs/{run}?page=2")
    assert "fixture/kth_prime" in page2.text
    infra = client.get(f"/runs/{run}?error_kind=infra")
    assert "1 task match" in infra.text and "fixture/rle" in infra.text
    nothing = client.get(f"/runs/{run}?q=no-such-text-anywhere")
    assert "0 tasks match" in nothing.text
    found = client.get(f"/runs/{run}?q=ADD_DIGITS")  # case-insensitive, over message JSON
    assert "1 task match" in found.text
    partial = client.get(f"/runs/{run}?failed=1", headers={"HX-Request": "true"})
    assert partial.text.lstrip().startswith('<section id="tasks"') and "<html" not in partial.text
    assert client.get("/runs/nonexistent").status_code == 404


def test_run_page_draws_each_verdict_with_its_mark(store: Store) -> None:
    client = TestClient(create_app(store, per_page=50))
    page = client.get(f"/runs/{store.ids['baseline']}").text
    patterns = re.findall(r'<td class="pattern">([^<]*)</td>', page)
    assert len(patterns) == 6 and all(p and set(p) <= {"✓", "✗", "E"} for p in patterns)
    assert any("E" in p for p in patterns)  # the fixture's infra error is excluded
    links = re.findall(r'class="traj mark-(\w+)"[^>]*>e\d+ (.)</a>', page)
    assert links and {(c, m) for c, m in links} <= {("ok", "✓"), ("fail", "✗"), ("err", "E")}
    assert "".join(m for _, m in links) == "".join(patterns)


def test_runs_page_filters_and_compare(store: Store) -> None:
    client = TestClient(create_app(store))
    page = client.get("/")
    assert "fixture-baseline" in page.text and "fixture-candidate" in page.text
    assert "cost vs accuracy" in page.text and "improvement over generations" in page.text
    only = client.get("/?status=running")
    assert "No runs match" in only.text
    by_model = client.get("/?model=nosuchmodel")
    assert "No runs match" in by_model.text
    a, b = store.ids["baseline"], store.ids["candidate"]
    cmp = client.get(f"/compare?a={a}&b={b}")
    assert cmp.status_code == 200 and "6 shared tasks" in cmp.text
    rows = re.findall(r'<tr class="delta-row (\w+)">', cmp.text)
    order = {"worse": 0, "same": 1, "better": 2}
    assert rows == sorted(rows, key=order.__getitem__), "regressions come first"
    link = re.search(r'href="(/compare/t\?a=\w+&amp;b=\w+)"', cmp.text)
    assert link
    side = client.get(link.group(1).replace("&amp;", "&"))
    assert side.status_code == 200 and "Two trajectories of task" in side.text


def test_sharpen_view_on_a_non_local_host_prints_a_token_url_and_enforces_it(tmp_path: Path) -> None:
    import os
    import socket
    import subprocess
    import sys
    import time

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    Store(db).close()
    proc = subprocess.Popen(
        [sys.executable, "-m", "sharpen.cli.main", "view", "--store", db, "--host", "0.0.0.0",
         "--port", str(port)], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
        env={**os.environ, "COLUMNS": "300"})
    try:
        assert proc.stderr is not None
        line = ""
        deadline = time.monotonic() + 30
        while "token=" not in line and time.monotonic() < deadline:
            line = proc.stderr.readline()
        token = re.search(r"token=([\w-]+)", line)
        assert token, "sharpen view did not print a URL with a token"
        url = f"http://127.0.0.1:{port}/"
        for _ in range(100):
            try:
                r = httpx.get(url)
                break
            except httpx.ConnectError:
                time.sleep(0.1)
        assert r.status_code == 401
        assert httpx.get(url, params={"token": token.group(1)}, follow_redirects=True).status_code == 200
    finally:
        proc.terminate()
        proc.wait(10)


def test_run_page_exports_training_data(store: Store) -> None:
    from sharpen.train import Where, export

    client = TestClient(create_app(store))
    run = store.ids["baseline"]
    page = client.get(f"/runs/{run}")
    assert f'action="/runs/{run}/export"' in page.text
    r = client.get(f"/runs/{run}/export", params={"format": "sft", "outcome": "success"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
    assert f'filename="{run[:12]}-sft.jsonl"' in r.headers["content-disposition"]
    got = [json.loads(x) for x in r.text.splitlines()]
    lines, _ = export(store, [run], "sft", Where(success=True))
    assert got == list(lines) and got  # the same lines as `sharpen export RUN -f sft --success`
    bad = client.get(f"/runs/{run}/export", params={"format": "sft", "feedback": "judge:>=4"})
    assert bad.status_code == 400 and "[source:]name[op value]" in bad.text
    assert client.get(f"/runs/{run}/export", params={"format": "csv"}).status_code == 400
    assert client.get(f"/runs/{run}/export", params={"outcome": "maybe"}).status_code == 400
    assert client.get(f"/runs/{run}/export", params={"split": "tset"}).status_code == 400
