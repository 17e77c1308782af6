"""The viewer in a real browser: Debian's Chromium driven by Playwright against the real app
served by uvicorn on a loopback port, over a real SQLite store filled through the Store API
with fixture records (``sharpen.viewer.demo``; no model ran).

Set ``SHARPEN_SCREENSHOTS=1`` to (re)write the screenshots in ``docs/img/``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the viewer extra is not installed: pip install 'sharpen[viewer]'")
playwright_sync = pytest.importorskip("playwright.sync_api", reason="pip install playwright")

import uvicorn  # noqa: E402

from sharpen.core.hashing import content_hash  # noqa: E402
from sharpen.core.manifest import RunManifest  # noqa: E402
from sharpen.core.registry import PluginRef  # noqa: E402
from sharpen.improvement.experiment import Experiment  # noqa: E402
from sharpen.improvement.folder import experiment_folder  # noqa: E402
from sharpen.stats.rounding import interval_text, p_cell  # noqa: E402
from sharpen.store.store import Store  # noqa: E402
from sharpen.viewer import create_app  # noqa: E402
from sharpen.viewer.demo import fill_fixture_store, fixture_spec, fixture_tasks, make_trajectory  # noqa: E402

CHROMIUM = os.environ.get("SHARPEN_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]
SHOTS = Path(__file__).resolve().parent.parent / "docs" / "img"

if not (os.path.exists(CHROMIUM) or shutil.which("chromium")):
    pytest.skip(f"no Chromium at {CHROMIUM}: apt-get install chromium (or set SHARPEN_CHROMIUM)",
                allow_module_level=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(store: Store, **app_args: Any) -> Iterator[str]:
    """The viewer over ``store`` served by uvicorn on a free loopback port; yields its URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(
        create_app(store, allowed_hosts=frozenset({"127.0.0.1", "localhost"}), **app_args),
        host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Store, dict[str, str]]]:
    path = tmp_path_factory.mktemp("viewer") / "viewer.db"
    store = Store(f"sqlite:///{path}")
    ids = fill_fixture_store(store)
    with serving(store) as base:
        yield base, store, ids
    store.close()


@pytest.fixture(scope="module")
def browser(served):  # depends on `served` so the server starts first
    exe = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")
    with playwright_sync.sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.errors = errors
    yield pg
    ctx.close()


def shot(pg, name: str) -> None:
    if os.environ.get("SHARPEN_SCREENSHOTS"):
        SHOTS.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(SHOTS / f"{name}.png"), full_page=False, type="png")


def test_open_run_filter_open_trajectory_annotate_step(served, page) -> None:
    base, store, ids = served
    page.goto(base + "/")
    assert page.locator("tr.run-row").count() == 3
    shot(page, "runs")
    page.locator(f'a.run-link[href="/runs/{ids["baseline"]}"]').click()
    page.wait_for_selector("#task-table")
    assert page.locator("tr.task-row").count() == 6
    shot(page, "run")
    # filter: failed only (HTMX swaps the table and pushes the URL)
    page.check('input[name="failed"]')
    page.wait_for_url(re.compile(r"failed=1"))
    page.wait_for_function("document.querySelectorAll('tr.task-row').length < 6 || "
                           "document.querySelector('#tasks .count').textContent.includes('match')")
    patterns = page.locator("tr.task-row td.pattern").all_inner_texts()
    assert patterns and all(("✗" in p or "E" in p) for p in patterns)
    # full-text search
    page.fill('input[name="q"]', "reverse_words")
    page.press('input[name="q"]', "Enter")
    page.wait_for_url(re.compile(r"q=reverse_words"))
    page.wait_for_function("document.querySelectorAll('tr.task-row').length <= 1")
    # open a trajectory
    page.goto(f"{base}/runs/{ids['baseline']}")
    page.locator("a.traj").first.click()
    page.wait_for_selector("article.step")
    shot(page, "trajectory")
    # keyboard navigation
    page.keyboard.press("j")
    assert page.evaluate("location.hash") == "#step-0"
    if page.locator("article.step").count() > 1:
        page.keyboard.press("j")
        assert page.evaluate("location.hash") == "#step-1"
        page.keyboard.press("k")
        assert page.evaluate("location.hash") == "#step-0"
    tid = page.url.split("/t/")[1].split("?")[0].split("#")[0]
    # annotate step 0 (HTMX post with the CSRF header) and find it in the database
    form = page.locator("#annotate-0")
    form.locator('input[name="text"]').fill("the loop bound is off by one")
    form.locator('input[name="score"]').fill("0.3")
    form.locator('input[name="author"]').fill("grace")
    form.locator('button[type="submit"]').click()
    page.wait_for_selector("#fb-0 li.source-human")
    human = [f for f in store.feedback_for(tid) if f.source == "human"]
    assert len(human) == 1
    assert (human[0].rationale, human[0].value, human[0].author, human[0].target.step_index) == (
        "the loop bound is off by one", 0.3, "grace", 0)
    # select text in the step → a span annotation with its offsets
    page.evaluate("""() => {
        const pre = document.querySelector('#step-0 .calls pre.msg-text');
        const r = document.createRange(); r.setStart(pre.firstChild, 0); r.setEnd(pre.firstChild, 7);
        const s = window.getSelection(); s.removeAllRanges(); s.addRange(r);
        pre.dispatchEvent(new MouseEvent('mouseup', {bubbles: true}));
    }""")
    assert form.locator('input[name="span_end"]').input_value() == "7"
    form.locator('input[name="text"]').fill("vague opener")
    form.locator('button[type="submit"]').click()
    page.wait_for_selector("#fb-0 q.span-quote")
    spans = [f for f in store.feedback_for(tid) if f.target.kind == "span"]
    assert len(spans) == 1 and spans[0].target.span == (0, 7) and spans[0].rationale == "vague opener"
    # edit the first annotation: a new record superseding it, with history shown
    page.locator("#fb-0 li.source-human details.edit summary").first.click()
    edit = page.locator("#fb-0 li.source-human details.edit form").first
    edit.locator('textarea[name="text"]').fill("off by one in the range() end")
    edit.locator('button[type="submit"]').click()
    page.wait_for_selector("#fb-0 details.history")
    human = [f for f in store.feedback_for(tid) if f.source == "human"]
    assert len(human) == 3 and human[-1].supersedes is not None
    page.reload()
    page.wait_for_selector("#fb-0 details.history")
    shot(page, "annotate")
    assert page.errors == []


def test_compare_two_runs_and_two_trajectories(served, page) -> None:
    base, _store, ids = served
    page.goto(base + "/")
    page.check(f'input[name="a"][value="{ids["baseline"]}"]')
    page.check(f'input[name="b"][value="{ids["candidate"]}"]')
    page.click("#compare-btn")
    page.wait_for_selector("#deltas")
    classes = [c.split()[-1] for c in page.locator("tr.delta-row").evaluate_all(
        "rows => rows.map(r => r.className)")]
    assert len(classes) == 6
    rank = {"worse": 0, "same": 1, "better": 2}
    assert classes == sorted(classes, key=rank.__getitem__)
    shot(page, "compare")
    page.locator("#deltas a").first.click()
    page.wait_for_selector(".side-by-side .column")
    assert page.locator(".side-by-side .column").count() == 2
    shot(page, "compare-trajectories")
    assert page.errors == []


def test_script_in_model_output_does_not_execute(served, page) -> None:
    base, _store, ids = served
    page.goto(f"{base}/t/{ids['xss_trajectory']}")
    page.wait_for_selector("article.step")
    page.keyboard.press("j")  # our own script does run
    assert page.evaluate("location.hash") == "#step-0"
    page.locator("#step-0 .calls pre.msg-text").hover()
    page.wait_for_timeout(300)  # give an onerror / onload handler time to fire
    assert page.evaluate("window.__pwned === undefined")
    assert "pwned" not in page.title()
    text = page.locator("#step-0 .calls pre.msg-text").inner_text()
    assert "<script>window.__pwned = 1" in text and "<img src=x onerror=" in text
    assert page.locator("#step-0 img, #step-0 script, #step-0 svg[onload]").count() == 0
    page.locator("#step-0").scroll_into_view_if_needed()
    shot(page, "escaped-output")
    # the run page search over the same text stays text too
    page.goto(f"{base}/runs/{ids['xss_run']}?q=%3Cscript%3E")
    assert page.locator("tr.task-row").count() == 1
    assert page.evaluate("window.__pwned === undefined")


def test_improvement_experiment_archive_and_candidate_diff(tmp_path: Path, browser, page) -> None:
    """A Reflexion experiment replayed from the cassette recorded from the embedded model
    (tests/record_improve_cassette.py): list → experiment → candidate, in the browser."""
    from record_improve_cassette import config

    store = Store(f"sqlite:///{tmp_path / 'sharpen.db'}")
    cfg = config("replay")
    experiment = Experiment(cfg, store, experiment_folder(store.url, cfg.experiment_id()))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # Playwright's loop runs in this thread
        result = pool.submit(asyncio.run, experiment.run()).result()
    with serving(store) as base:
        page.goto(base + "/")
        page.click("nav.top >> text=improvement")
        page.wait_for_selector("#experiments")
        assert page.locator("tr.experiment-row").count() == 1
        page.click(f"text={result.experiment_id}")
        page.wait_for_selector("#held-out")
        assert page.locator("tr.winner-row").count() == 1
        assert page.locator("tr.candidate-row").count() == len(result.results[0].lineage)
        assert page.locator("section.engine svg.chart").count() == 1  # the anytime curve
        shot(page, "improve")
        # every link on the experiment page answers 200 (no id leads to a 404)
        hrefs = sorted(set(page.locator("main a[href], nav a[href]").evaluate_all(
            "links => links.map(a => a.getAttribute('href'))")))
        assert len(hrefs) > 10
        for href in hrefs:
            response = page.request.get(base + href)
            assert response.status == 200, f"{href} answered {response.status}"
        hashes = page.locator("main code").evaluate_all(
            "cs => cs.filter(c => /^[0-9a-f]{8}$/.test(c.textContent)).map(c => c.parentElement.tagName)")
        assert hashes and set(hashes) == {"A"}, "every candidate hash shown is a link"
        child = result.results[0].lineage[-1]
        page.locator(f'tr.candidate-row a[href$="/{child.hash}"]').click()
        page.wait_for_selector("pre.diff")
        assert page.locator("pre.diff .diff-add").first.inner_text().startswith("+agent: reflexion")
        shot(page, "improve-candidate")
        page.locator("a.traj").first.click()  # a validation episode of the candidate
        page.wait_for_selector("article.step")
        assert page.errors == []
    store.close()


def test_tool_call_code_renders_as_highlighted_code(served, page) -> None:
    base, _store, ids = served
    page.goto(f"{base}/runs/{ids['baseline']}")
    page.locator("a.traj").first.click()
    page.wait_for_selector("article.step")
    code = page.locator("#step-0 .call dd.arg-code pre.hl").first
    text = code.inner_text()
    assert text.startswith("def ") and "\n" in text and "\\n" not in text and '"code"' not in text
    assert code.locator("span.hl-k").first.inner_text() == "def"  # a keyword, coloured by class
    colour = code.locator("span.hl-k").first.evaluate("e => getComputedStyle(e).color")
    assert colour != code.evaluate("e => getComputedStyle(e).color")  # the stylesheet applies
    assert page.locator("#step-0 .call dt").first.inner_text().startswith("code")
    assert page.errors == []


def test_compare_page_verdict_equals_sharpen_compare_json(served, page) -> None:
    base, store, ids = served
    a, b = ids["baseline"], ids["candidate"]
    cli = Path(sys.executable).with_name("sharpen")
    out = subprocess.run([str(cli), "compare", a, b, "--json", "--store", store.url],
                         capture_output=True, text=True, timeout=120, check=True)
    expected = json.loads(out.stdout)["comparisons"][0]
    page.goto(f"{base}/compare?a={a}&b={b}")
    box = page.locator("#verdict")
    assert box.get_attribute("data-direction") == expected["direction"]
    assert float(box.get_attribute("data-p")) == expected["p_value"]
    assert float(box.get_attribute("data-difference")) == expected["difference"]
    assert box.locator("p.verdict").inner_text() == f"B vs A: {expected['verdict']}"
    diff, ci = expected["difference"], expected["ci"]
    assert box.locator("td.difference").inner_text() == (  # interval ends rounded outward
        f"{100 * diff:+.1f} {interval_text(ci['low'], ci['high'], signed=True)} pts")
    assert box.locator("td.p").inner_text() == p_cell(expected["p_value"])  # rounded up
    assert page.locator("#spend tr.spend-row").count() == 4
    # changed-only filter, from the page's own form
    all_rows = page.locator("tr.delta-row").count()
    page.check('input[name="changed"]')
    page.click("form.filters button[type=submit]")
    page.wait_for_url(re.compile(r"changed=1"))
    assert page.locator("tr.delta-row.same").count() == 0
    assert page.locator("tr.delta-row").count() <= all_rows
    assert page.errors == []


def test_running_run_page_updates_without_reload(tmp_path: Path, browser, page) -> None:
    """A run whose status is ``running``: a trajectory written into the store while its page
    is open appears without a reload, and polling stops once the run has finished."""
    store = Store(f"sqlite:///{tmp_path / 'live.db'}")
    spec, tasks = fixture_spec("live", 0.0), fixture_tasks()[:2]
    run_id = uuid.uuid4().hex
    store.create_run(RunManifest(run_id=run_id, created_at=datetime.now(UTC), env=PluginRef(name="code"),
                                 agent_hash=spec.hash(), task_ids=[t.id for t in tasks], epochs=1,
                                 seed=1, config_hash=content_hash({"live": run_id}), isolation="fixture"),
                     spec, tasks)
    with serving(store, poll_seconds=0.3) as base:
        page.goto(f"{base}/runs/{run_id}")
        page.evaluate("window.__loaded = performance.timeOrigin")  # gone if the page reloads
        assert "0 of 2 attempts stored" in page.locator("p.run-progress").inner_text()
        assert page.locator("h1 #run-status").inner_text() == "running"
        assert page.locator("a.traj").count() == 0
        store.save_trajectory(make_trajectory(run_id, tasks[0], spec, 0, True, random.Random(1)))
        page.wait_for_selector("a.traj", timeout=10_000)
        assert "1 of 2 attempts stored" in page.locator("p.run-progress").inner_text()
        store.save_trajectory(make_trajectory(run_id, tasks[1], spec, 0, False, random.Random(2)))
        store.set_run_status(run_id, "finished", {"wall_seconds": 1.0})
        page.wait_for_selector('#tasks[data-status="finished"]', timeout=10_000)
        assert page.locator("h1 #run-status").inner_text() == "finished"  # the header too
        assert page.locator("a.traj").count() == 2
        assert page.evaluate("window.__loaded") is not None  # the same document throughout
        polls: list[str] = []
        page.on("request", lambda r: polls.append(r.url) if "/runs/" in r.url else None)
        page.wait_for_timeout(1000)
        assert polls == [], "polling goes on after the run finished"
        assert page.errors == []
    store.close()
