"""The viewer's judge pages on a real SQLite store: a judge's scores and explanations beside
people's annotations on the trajectory page (citations as links to the steps), a page per
judgement (its model calls, usage, status and error), judge–human agreement per criterion
with the confusion matrix, a run's judge scores with intervals and its judge errors — and,
in a real browser, a citation that takes the reader to the step it names.

The records are written through the Store API as ``sharpen judge`` writes them
(``save_judgement`` with the feedback naming the judgement as ``call_id``) and as the
viewer's annotation form writes people's (``add_feedback``); no model runs.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the viewer extra is not installed: pip install 'sharpen[viewer]'")

from fastapi.testclient import TestClient

from sharpen.cli.report_cmd import judge_rows
from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.core.judgement import JudgeCall, Judgement
from sharpen.core.messages import Message, Usage
from sharpen.core.trajectory import Trajectory
from sharpen.judges.agreement import human_agreement
from sharpen.stats.intervals import Interval
from sharpen.stats.judged import CriterionScore, judge_scores
from sharpen.store.store import Store
from sharpen.viewer import create_app
from sharpen.viewer.citations import cite_links
from sharpen.viewer.demo import fill_fixture_store, judge_fixture_run
from sharpen.viewer.judged import score_cells

JUDGE = "rubric:quality"
HASH = "0123456789abcdef" * 4
AUTHOR = f"{JUDGE}@{HASH[:8]} (local)"
PAYLOAD = "<script>window.__pwned = 1</script>"
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def on(t: Trajectory, step: int | None = None) -> FeedbackTarget:
    return FeedbackTarget(kind="trajectory" if step is None else "step", run_id=t.run_id,
                          trajectory_id=t.id, step_index=step)


def judged_store(path: Path) -> tuple[Store, dict[str, Any]]:
    """The fixture runs, with the baseline run judged on ``solved`` (each trajectory's
    verdict, flipped on the first two), people's ``solved`` annotations on the first twelve
    (one of them on a step), one failed judgement and one pairwise verdict."""
    store = Store(f"sqlite:///{path}")
    ids: dict[str, Any] = dict(fill_fixture_store(store))
    run = ids["baseline"]
    ts = list(store.iter_trajectories(run, with_steps=False))
    ok = [t for t in ts if t.outcome.error_kind is None]
    many = next(t for t in ok if store_steps(store, t.id) >= 2)  # some step is on page 2
    judgements = {}
    for i, t in enumerate(ok):
        verdict = bool(t.outcome.success) != (i < 2)
        j = Judgement(run_id=run, trajectory_id=t.id, judge=JUDGE, judge_hash=HASH, model="local",
                      status="ok", created_at=T0 + timedelta(seconds=i),
                      calls=[JudgeCall(messages=[Message(role="system", content="You judge."),
                                                 Message(role="user", content=f"Transcript {PAYLOAD}")],
                                       reply='{"solved": {"explanation": "see [S0]", "value": true}}')],
                      usage=Usage(input_tokens=300 + i, output_tokens=40, calls=1), seconds=1.5)
        why = f"[S0] submits code; [S1] tests it; [S9] is no step {PAYLOAD}"
        store.save_judgement(j, [Feedback(source="judge", target=on(t), name="solved", value=verdict,
                                          rationale=why, author=AUTHOR, call_id=j.id,
                                          created_at=T0 + timedelta(seconds=i))])
        judgements[t.id] = j
        if i < 12:
            store.add_feedback(Feedback(source="human", target=on(t, 0 if i == 3 else None),
                                        name="solved", value=bool(t.outcome.success),
                                        rationale="checked by hand", author="ada",
                                        created_at=T0 + timedelta(minutes=5, seconds=i)))
    bad = next(t for t in ts if t.outcome.error_kind is not None)
    failed = Judgement(run_id=run, trajectory_id=bad.id, judge=JUDGE, judge_hash=HASH, model="local",
                       status="error", error=f"reply was not JSON: {PAYLOAD}", created_at=T0)
    store.save_judgement(failed)
    other = next(t for t in store.iter_trajectories(ids["candidate"], with_steps=False)
                 if t.task.id == ok[0].task.id)
    pair = Judgement(run_id=run, trajectory_id=ok[0].id, versus=other.id, judge="pairwise:preference",
                     judge_hash=HASH[::-1], model="local", status="ok", detail={"ab": "A", "ba": "B"})
    store.save_judgement(pair, [Feedback(source="judge", target=on(ok[0]), name="preference",
                                         value=1.0, versus=other.id, rationale="A first: A [S0]",
                                         author="pairwise:preference@fedcba98 (local)",
                                         call_id=pair.id)])
    ids.update(run=run, ok=ok, many=many, judgements=judgements, failed=failed, pair=pair,
               other=other)
    return store, ids


def store_steps(store: Store, tid: str) -> int:
    from sharpen.store import browse

    head = browse.trajectory_page(store, tid, per_page=1, prompt=False)
    assert head is not None
    return head.n_steps


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, dict[str, Any]]]:
    store, ids = judged_store(tmp_path_factory.mktemp("judged") / "viewer.db")
    yield store, ids
    store.close()


def test_citations_are_links_and_the_text_around_them_is_escaped() -> None:
    html = str(cite_links(f"ok [S0], <b>[S2]</b> and [S7] {PAYLOAD}", "t1", n_steps=3,
                          per_page=2, page=1))
    assert '<a class="cite" href="#step-0">[S0]</a>' in html  # on the page shown: its anchor
    assert '<a class="cite" href="/t/t1?page=2#step-2">[S2]</a>' in html  # on the next page
    assert "[S7]" in html and "step-7" not in html  # a step the trajectory lacks stays text
    assert "<script>" not in html and "<b>" not in html and "&lt;script&gt;" in html
    # without a page (the judgement page) every link names the trajectory page
    assert 'href="/t/t1?page=1#step-0"' in str(cite_links("[S0]", "t1", 3, 50))


def test_score_cells_are_the_reports() -> None:
    def score(mean: float | None, low: float, high: float, boolean: bool) -> CriterionScore:
        ci = None if mean is None else Interval(low=low, high=high, method="clustered-t")
        return CriterionScore(author="j", name="c", n=4, n_tasks=4, mean=mean, ci=ci,
                              boolean=boolean, counts={})

    for c in (score(3.456, 2.111, 4.789, False), score(0.4567, 0.2111, 0.6789, True),
              score(None, 0, 0, False)):
        assert list(score_cells(c)) == judge_rows([c])[0][2:4]


def test_trajectory_page_puts_the_judge_beside_people_with_step_links(judged) -> None:
    store, ids = judged
    t = ids["ok"][3]  # its human annotation is on step 0
    j = ids["judgements"][t.id]
    client = TestClient(create_app(store))
    html = client.get(f"/t/{t.id}").text
    table = html[html.index('id="judged"'):html.index('id="steps"')]
    assert 'data-criterion="solved"' in table
    judge_value = str(bool(t.outcome.success) != (3 < 2))
    assert f'<b class="value">{judge_value}</b>' in table and "ada" in table
    assert 'on <a href="#step-0">step 0</a>' in table and "checked by hand" in table
    assert f'href="/judgements/{j.id}"' in table
    assert '<a class="cite" href="#step-0">[S0]</a>' in table
    assert PAYLOAD not in html and "&lt;script&gt;window.__pwned" in html
    # the same explanation in the step-feedback list is linked the same way
    feedback = html[html.index('id="feedback"'):html.index('id="judged"')]
    assert '<a class="cite" href="#step-0">[S0]</a>' in feedback and "judgement</a>" in feedback
    # with one step per page a citation of step 1 leads to page 2
    paged = TestClient(create_app(store, per_page=1)).get(f"/t/{ids['many'].id}").text
    assert f'<a class="cite" href="/t/{ids["many"].id}?page=2#step-1">[S1]</a>' in paged
    # the JSON twin carries the rows as records
    rows = client.get(f"/t/{t.id}.json").json()["judged"]
    assert [r["name"] for r in rows] == ["solved"]
    assert rows[0]["judges"][0]["call_id"] == j.id and rows[0]["humans"][0]["author"] == "ada"


def test_a_pairwise_record_names_the_other_trajectory(judged) -> None:
    store, ids = judged
    t, other = ids["ok"][0], ids["other"]
    html = TestClient(create_app(store)).get(f"/t/{t.id}").text
    assert f'vs <a href="/t/{other.id}">{other.id[:12]}</a>' in html
    assert f'href="/compare/t?a={t.id}&amp;b={other.id}"' in html
    # both transcripts number steps from S0: a pairwise explanation's [S0] is not a link
    assert "A first: A [S0]" in html


def test_judgement_page_shows_the_calls_usage_and_what_it_concluded(judged) -> None:
    store, ids = judged
    t = ids["ok"][1]
    j = ids["judgements"][t.id]
    client = TestClient(create_app(store))
    r = client.get(f"/judgements/{j.id}")
    assert r.status_code == 200
    html = r.text
    assert JUDGE in html and "model <b>local</b>" in html and 'id="judgement-status">ok<' in html
    assert "1 model call · tokens 301 in / 40 out" in html
    assert "You judge." in html and "Transcript &lt;script&gt;" in html and PAYLOAD not in html
    assert "&#34;explanation&#34;: &#34;see [S0]&#34;" in html  # the reply, escaped, not linked
    assert f'<a class="cite" href="/t/{t.id}?page=1#step-0">[S0]</a>' in html
    assert f'href="/t/{t.id}"' in html and f'href="/runs/{ids["run"]}"' in html
    twin = client.get(f"/judgements/{j.id}.json").json()
    assert twin["j"]["calls"][0]["reply"].startswith('{"solved"')
    assert [f["call_id"] for f in twin["records"]] == [j.id]
    failed = client.get(f"/judgements/{ids['failed'].id}").text
    assert 'id="judgement-status">error<' in failed and "reply was not JSON: &lt;script&gt;" in failed
    assert "No model call was stored" in failed
    pair = client.get(f"/judgements/{ids['pair'].id}").text
    assert f'vs <a href="/t/{ids["other"].id}">' in pair and '"ab": "A"' in pair
    assert client.get("/judgements/nosuch").status_code == 404


def test_agreement_page_equals_human_agreement_with_its_confusion_matrix(judged) -> None:
    store, ids = judged
    run = ids["run"]
    client = TestClient(create_app(store))
    expected = human_agreement(store.iter_trajectories(run, with_steps=False), "solved")
    assert len(expected) == 1 and expected[0].stats.n == 12
    twin = client.get(f"/runs/{run[:8]}/agreement.json?criterion=solved").json()
    assert twin["found"] == [a.model_dump(mode="json") for a in expected]
    s = expected[0].stats
    # the first two judge verdicts were flipped: two off the diagonal
    assert sum(s.confusion[i][j] for i in range(2) for j in range(2) if i != j) == 2
    html = client.get(f"/runs/{run}/agreement?criterion=solved").text
    section = html[html.index('class="agreement"'):]
    assert f'<b class="n">{s.n}</b> trajectories on {s.n_clusters} tasks' in section
    cells = re.findall(r'<td class="cell(?: diagonal)?">(\d+)</td>', section)
    assert [int(c) for c in cells] == [n for row in s.confusion for n in row]
    assert s.kappa.value is not None
    assert f"{s.kappa.value:.2f}" in section[section.index('class="kappa"'):][:200]
    assert "Spearman" in section and "Krippendorff" in section
    # a criterion nobody annotated says what there is instead
    empty = client.get(f"/runs/{run}/agreement?criterion=clarity").text
    assert "No trajectory of this run has both" in empty and "Judged criteria: solved" in empty


def test_run_page_lists_judge_scores_with_intervals_and_judge_errors(judged) -> None:
    store, ids = judged
    run = ids["run"]
    client = TestClient(create_app(store))
    html = client.get(f"/runs/{run}").text
    section = html[html.index('id="judges"'):html.index('id="tasks"')]
    scores = judge_scores(store.iter_trajectories(run, with_steps=False))
    assert {(c.author, c.name) for c in scores} == {(AUTHOR, "solved"),
                                                    ("pairwise:preference@fedcba98 (local)", "preference")}
    solved = next(c for c in scores if c.name == "solved")
    mean, ci = judge_rows([solved])[0][2:4]  # as `sharpen report` writes them
    assert solved.ci is not None and ci.startswith("[")
    assert f'<td class="mean">{mean}</td>' in section and f'<td class="ci">{ci}</td>' in section
    assert f'href="/runs/{run}/agreement?criterion=solved"' in section
    assert f"<b>{JUDGE}</b> 1 (error kind judge" in section
    assert f'href="/judgements/{ids["failed"].id}"' in section
    assert "reply was not JSON: &lt;script&gt;" in section and PAYLOAD not in html
    twin = client.get(f"/runs/{run}.json").json()["judges"]
    assert twin["errors"] == {JUDGE: 1} and twin["judgements"] == len(ids["ok"]) + 2
    # a run no judge looked at has no such section
    assert 'id="judges"' not in client.get(f"/runs/{ids['candidate']}").text


def test_every_citation_in_the_demo_leads_to_a_step_that_is_there(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'demo.db'}")
    run = fill_fixture_store(store)["baseline"]
    made = judge_fixture_run(store, run)
    client = TestClient(create_app(store, per_page=1))
    assert client.get(f"/runs/{run}").text.count('class="judge-row"') == 1
    assert client.get(f"/runs/{run}/agreement?criterion=solved").status_code == 200
    followed = 0
    for jid in made:
        j = store.get_judgement(jid)
        assert j is not None and client.get(f"/judgements/{jid}").status_code == 200
        html = client.get(f"/t/{j.trajectory_id}").text
        for href in re.findall(r'<a class="cite" href="([^"]+)">', html):
            path, _, anchor = href.partition("#")
            target = client.get(path).text if path else html
            assert f'id="{anchor}"' in target, href
            followed += 1
    assert followed >= len(made)
    store.close()


# -- in a real browser ------------------------------------------------------------------------

CHROMIUM = os.environ.get("SHARPEN_CHROMIUM", "/usr/bin/chromium")


@contextlib.contextmanager
def serving(store: Store, **app_args: Any) -> Iterator[str]:
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(
        create_app(store, allowed_hosts=frozenset({"127.0.0.1"}), **app_args),
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


def test_clicking_a_citation_goes_to_the_step_in_a_browser(judged) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    exe = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")
    if not exe:
        pytest.skip(f"no Chromium at {CHROMIUM}: apt-get install chromium (or set SHARPEN_CHROMIUM)")
    store, ids = judged
    tid = ids["many"].id
    with serving(store, per_page=1) as base, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        page = browser.new_page(viewport={"width": 1280, "height": 700})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{base}/t/{tid}")
        # [S0] is on this page: its anchor — the page scrolls down to the step
        assert page.evaluate("window.scrollY") == 0
        page.locator("#judged a.cite", has_text="[S0]").first.click()
        page.wait_for_function("location.hash === '#step-0'")
        top = page.evaluate("document.getElementById('step-0').getBoundingClientRect().top")
        assert page.evaluate("window.scrollY") > 0 and 0 <= top < 700
        # [S1] is on page 2 (one step per page): the link loads it and marks the step
        page.locator("#judged a.cite", has_text="[S1]").first.click()
        page.wait_for_url(re.compile(r".*\?page=2#step-1$"))
        page.wait_for_selector("#step-1.current")
        assert page.evaluate("window.__pwned === undefined") and errors == []
        browser.close()
