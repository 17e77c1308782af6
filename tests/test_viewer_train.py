"""The viewer's training pages over folders the training engine wrote: one from a method that
reports a curve and returns a scalar head (no chat model, so no model runs: fast), damaged and
ambiguous folders. A real ``star`` training, killed and resumed, is checked on its page in
tests/test_train.py."""

from __future__ import annotations

import asyncio
import html
import re
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the viewer extra is not installed: pip install 'sharpen[viewer]'")

from fastapi.testclient import TestClient
from page_text import text

from sharpen.cli.demo_cmd import DEMO_ENV, DEMO_SPEC
from sharpen.core.registry import PluginRef
from sharpen.store import Store
from sharpen.train.engine import TrainReport, train
from sharpen.train.method import BaseTrainMethod, TrainContext, TrainEvent, TrainResult
from sharpen.viewer import create_app


class CurveMethod(BaseTrainMethod):
    """Reports three steps of a curve (loss falling, reward and a metric rising) and returns a
    scalar-head checkpoint with a held-out measure of its own."""

    async def train(self, ctx: TrainContext) -> TrainResult:
        events = [TrainEvent(step=s, samples=4 * s, loss=1.0 / s, reward=0.25 * s, seconds=2.0 * s,
                             metrics={"val_success": 0.1 * s}) for s in (1, 2, 3)]
        for e in events:
            ctx.report(e)
        out = ctx.workdir / "head"
        out.mkdir()
        (out / "model.safetensors").write_bytes(b"a scalar head")
        return TrainResult(checkpoint=out, policy=False, events=events, samples=12, seconds=6.0,
                           extra={"val_accuracy": 0.75})


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, Path, TrainReport]:
    root = tmp_path_factory.mktemp("trained")
    store = Store(f"sqlite:///{root / 'sharpen.db'}")
    start = root / "start"
    start.mkdir()
    (start / "model.safetensors").write_bytes(b"start weights")
    report = asyncio.run(train(PluginRef(name=f"{__file__}:CurveMethod"), DEMO_ENV, DEMO_SPEC, store,
                               train=2, val=1, test=2, base=(start, root / "never-read.gguf")))
    return store, root / "train", report


def test_the_list_finds_the_training_next_to_the_store(trained) -> None:
    store, _base, report = trained
    page = text(TestClient(create_app(store)).get("/train").text)
    assert report.train_id in page and "finished · stopped by done" in page
    assert report.verdict_text in page


def test_the_page_draws_each_curve_and_states_method_lineage_and_guard(trained) -> None:
    store, _base, report = trained
    src = TestClient(create_app(store)).get(f"/train/{report.train_id[:5]}").text
    charts = [html.unescape(c) for c in re.findall(r'<svg [^>]*aria-label="([^"]+)"', src)]
    assert charts == ["training loss", "mean reward of the step's samples", "val_success"]
    points = re.findall(r"<title>step (\d): loss ([\d.]+)</title>", src)
    assert [(int(s), float(y)) for s, y in points] == [(1, 1), (2, 0.5), (3, pytest.approx(1 / 3, abs=1e-3))]
    assert len(re.findall(r'<tr class="event-row">', src)) == 3
    page = text(src)
    assert "none: not a chat model" in page and report.lineage.checkpoint_hash in page
    assert '"val_accuracy": 0.75' in page and "Test tasks among them: 0 of 2" in page
    assert "None of its runs are in this store" in page  # a scalar head runs no verdict
    twin = TestClient(create_app(store)).get(f"/train/{report.train_id}.json").json()
    assert twin["report"]["lineage"] == report.lineage.model_dump(mode="json")
    assert [e["loss"] for e in twin["events"]] == [1.0, 0.5, pytest.approx(1 / 3)]


def test_damaged_ambiguous_unknown_and_empty_are_explained(trained, tmp_path: Path) -> None:
    store, _base, _report = trained
    base = tmp_path / "train"
    (base / "broken").mkdir(parents=True)
    (base / "broken" / "config.json").write_text("{not json")
    client = TestClient(create_app(store, train_dir=base))
    page = text(client.get("/train/broken").text)
    assert "unreadable: config.json" in page and "No verdict yet" in page
    assert "1 unreadable" in text(client.get("/train").text)
    (base / "brokenly").mkdir()
    (base / "brokenly" / "result.json").write_text("[]")
    ambiguous = client.get("/train/broke")
    assert ambiguous.status_code == 404 and "matches 2 trainings" in text(ambiguous.text)
    missing = client.get("/train/nope")
    assert missing.status_code == 404 and "no training 'nope'" in text(missing.text)
    empty = TestClient(create_app(store, train_dir=tmp_path / "none"))
    assert "No trainings here" in text(empty.get("/train").text)
