"""The viewer's diagnosis page on a real SQLite store: the same numbers as
``diagnose_run`` (what ``sharpen diagnose`` prints), a chart, example links — and nothing
written to the store by the page.

The store is filled with trajectories a real run of the code environment left (the null agent
gives up on every task: ``limit_hit``) and the viewer's fixture runs; no model runs.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the viewer extra is not installed: pip install 'sharpen[viewer]'")

from fastapi.testclient import TestClient
from test_detectors import run_agent

from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.diagnose.run import diagnose_run
from sharpen.store.store import Store
from sharpen.viewer import create_app


def test_diagnosis_page_matches_the_command_and_writes_nothing(tmp_path: Path) -> None:
    env = PluginRef(name="code", args={"source": "generated"})
    tasks = REGISTRY.create("env", env).list_tasks("test", limit=4)
    [*_, last] = asyncio.run(run_agent(tmp_path / "s.db", env, "null", tasks))
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    run_id = last.run_id
    client = TestClient(create_app(store))
    page = client.get(f"/runs/{run_id[:8]}/diagnose.json")
    assert page.status_code == 200, page.text
    assert not store.has_feedback(run_id, "detector")  # the page wrote nothing
    d = diagnose_run(store, run_id, save=False)
    shown = page.json()
    assert shown["d"]["trajectories"] == d.trajectories == 4 and shown["d"]["failed"] == 4
    assert [s["detector"]["name"] for s in shown["d"]["detectors"]] == \
        [s.detector.name for s in d.detectors]
    hit = next(s for s in shown["d"]["detectors"] if s["detector"]["name"] == "limit_hit")
    assert hit["failed"]["count"] == 4 and len(hit["examples"]) == 3

    html = client.get(f"/runs/{run_id}/diagnose").text
    assert "<svg" in html and 'data-detector="limit_hit"' in html
    assert all(f'href="/t/{tid}"' in html for tid in hit["examples"])
    assert "4/4 = 100" in html
    only = client.get(f"/runs/{run_id}/diagnose.json?detector=loop").json()
    assert [s["detector"]["name"] for s in only["d"]["detectors"]] == ["loop"]
    assert 'id="diagnose-link"' in client.get(f"/runs/{run_id}").text
    # The stage funnel (code declares its stages), the taxonomy of the 4 failures, and no
    # decisive step until one is stored.
    assert shown["d"]["stages"]["env"] == "code" and 'class="stages"' in html
    assert shown["d"]["taxonomy"]["failures"] == 4 and 'class="taxonomy"' in html
    assert shown["d"]["decisive"] is None and "No decisive step stored" in html
    t = next(iter(store.iter_trajectories(run_id, with_steps=False)))
    store.add_feedback(Feedback(source="detector", name="decisive_step", value=0, rationale="r",
                                target=FeedbackTarget(kind="step", run_id=run_id,
                                                      trajectory_id=t.id, step_index=0)))
    html = client.get(f"/runs/{run_id}/diagnose").text
    assert "No decisive step stored" not in html and "decisive steps by step index" in html
    # The trajectory page marks the step a finding is on, and only that step.
    page = client.get(f"/t/{t.id}").text
    assert page.count("has-finding") == 1 and 'data-findings="decisive_step"' in page
    assert 'id="step-0"' in page.split("has-finding")[1][:80]
    bad = client.get(f"/runs/{run_id}/diagnose?detector=lop")
    assert bad.status_code == 404 and "did you mean" in bad.text and "loop" in bad.text
    # Only the record stored above: the page itself wrote no finding.
    assert [fb.name for t in store.iter_trajectories(run_id, with_steps=False)
            for fb in t.feedback if fb.source == "detector"] == ["decisive_step"]
