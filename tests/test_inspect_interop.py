"""Inspect AI logs in and out, on logs Inspect itself writes here: a tiny task run by Inspect's
``eval`` with its ``mockllm/model`` (no network, no weights), imported with ``sharpen import
inspect``, reported with ``sharpen report``; sharpen runs exported with ``sharpen export
--format inspect`` and read back with Inspect's own reader."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import sharpen
from fastapi.testclient import TestClient

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.core.trajectory import Action
from sharpen.runner import RunConfig, Runner
from sharpen.store import Store
from sharpen.viewer.app import create_app

inspect_ai = pytest.importorskip("inspect_ai")

from inspect_ai import Task  # noqa: E402
from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.log import EvalLog, read_eval_log, write_eval_log  # noqa: E402
from inspect_ai.model import ChatMessage, ModelOutput, ModelUsage, get_model  # noqa: E402
from inspect_ai.scorer import includes, match, model_graded_qa  # noqa: E402
from inspect_ai.solver import generate, system_message, use_tools  # noqa: E402
from inspect_ai.tool import Tool, tool  # noqa: E402


@tool
def add() -> Tool:
    async def execute(x: int, y: int) -> str:
        """Add two numbers.

        Args:
            x: The first number.
            y: The second number.
        """
        return str(x + y)

    return execute


def mock_model(input: list[ChatMessage], tools: Any, tool_choice: Any, config: Any) -> ModelOutput:
    """The solver's and the grader's model: asked "add A B" it calls ``add`` and then answers
    with the tool's result (a negative A makes it raise, an errored sample); asked to grade
    it grades every answer correct. Usage is set, so mockllm counts no tokens itself (that
    would download a tokenizer)."""
    last = input[-1]
    if "GRADE" in last.text:
        out = ModelOutput.from_content("mockllm/model", "GRADE: C")
    elif last.role == "user":
        a, b = (int(v) for v in last.text.split()[1:3])
        if a < 0:
            raise RuntimeError("model exploded")
        out = ModelOutput.for_tool_call("mockllm/model", "add", {"x": a, "y": b})
    else:
        out = ModelOutput.from_content("mockllm/model", f"The answer is {last.text}")
    out.usage = ModelUsage(input_tokens=10, output_tokens=3, total_tokens=13)
    return out


SYSTEM = "Use the tool to add. " * 40
"""Long: the transcript's model events hold it as an attachment; the messages whole."""


@pytest.fixture(scope="module")
def inspect_log(tmp_path_factory: pytest.TempPathFactory) -> EvalLog:
    """A log Inspect writes: 4 samples × 2 epochs, ``match`` first (b is answered wrongly,
    d errors), then ``includes`` and a model-graded scorer."""
    model = get_model("mockllm/model", custom_outputs=mock_model)
    task = Task(
        dataset=[Sample(input="add 1 2", target="3", id="a"), Sample(input="add 2 2", target="5", id="b"),
                 Sample(input="add 4 4", target="8", id="c"), Sample(input="add -1 4", target="3", id="d")],
        solver=[system_message(SYSTEM), use_tools(add()), generate()],
        scorer=[match(), includes(), model_graded_qa(model=model)], epochs=2, name="tiny_add")
    logs = inspect_eval(task, model=model, log_dir=str(tmp_path_factory.mktemp("logs")),
                        display="none", fail_on_error=False)
    assert logs[0].status == "success", logs[0].error
    return logs[0]


def _json(res: Any) -> Any:
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_import_gives_inspects_accuracy_epochs_steps_and_feedback(
        inspect_log: EvalLog, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    log_path = inspect_log.location
    [imported] = _json(sharpen("import", "inspect", log_path, "--json", "--store", store, cwd=tmp_path))
    assert imported["written"] == 8 and imported["scorer"] == "match"
    report = _json(sharpen("report", imported["run_id"], "--json", "--store", store, cwd=tmp_path))
    inspect_accuracy = inspect_log.results.scores[0].metrics["accuracy"].value
    assert inspect_accuracy == pytest.approx(2 / 3)  # a and c right, b wrong, d errored
    assert report["accuracy"]["success"]["value"] == pytest.approx(inspect_accuracy)
    assert report["run"]["env"]["name"] == "inspect:tiny_add"
    assert report["run"]["model"] == "mockllm/model"
    assert (report["run"]["tasks_planned"], report["run"]["epochs_planned"]) == (4, 2)
    assert report["errors"]["attempts"] == len(inspect_log.samples) == 8
    assert report["errors"]["excluded"] == {"infra": 2}  # Inspect's errored samples

    db = Store(store)
    ts = list(db.iter_trajectories(imported["run_id"]))
    assert sorted((t.task.id, t.epoch) for t in ts) == [(i, e) for i in "abcd" for e in (0, 1)]
    a0 = next(t for t in ts if t.task.id == "a" and t.epoch == 0)
    assert [m.role for m in a0.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert a0.messages[0].content == SYSTEM
    assert a0.steps[0].action == Action(tool="add", arguments={"x": 1, "y": 2})
    assert a0.steps[0].observation == "3" and a0.steps[1].action is None and a0.steps[1].terminated
    assert (a0.steps[0].usage.input_tokens, a0.steps[0].usage.output_tokens) == (10, 3)
    assert (a0.usage.input_tokens, a0.usage.output_tokens, a0.usage.calls) == (20, 6, 2)
    assert a0.task.metadata["target"] == "3" and a0.outcome.success
    by_name = {f.name: f for f in a0.feedback}
    assert by_name["includes"].source == "verifier" and by_name["includes"].value == "C"
    assert by_name["model_graded_qa"].source == "judge"
    d0 = next(t for t in ts if t.task.id == "d")
    assert d0.outcome.error_kind == "infra" and "model exploded" in d0.outcome.error
    manifest = db.get_run(imported["run_id"]).manifest
    assert manifest.extra["eval_id"] == inspect_log.eval.eval_id
    assert manifest.extra["log"] == str(Path(log_path).resolve())
    assert manifest.versions["inspect_ai"] == inspect_log.eval.packages["inspect_ai"]

    again = _json(sharpen("import", "inspect", log_path, "--json", "--store", store, cwd=tmp_path))
    assert again[0]["run_id"] == imported["run_id"] and again[0]["written"] == 0
    assert len(list(db.iter_trajectories(imported["run_id"], with_steps=False))) == 8
    assert sharpen("diagnose", imported["run_id"], "--store", store, cwd=tmp_path).returncode == 0
    viewer = TestClient(create_app(db))
    assert viewer.get(f"/runs/{imported['run_id']}").status_code == 200
    page = viewer.get(f"/t/{a0.id}")
    assert page.status_code == 200 and "The answer is 3" in page.text


def test_a_sharpen_run_exported_reads_back_in_inspect(tmp_path: Path) -> None:
    # Two real runs of toolshop through the Runner, 2 epochs: the reference agent solves every
    # task, the null agent none.
    db = tmp_path / "s.db"
    store = f"sqlite:///{db}"
    env = PluginRef(name="toolshop")
    tasks = REGISTRY.create("env", env).list_tasks("test", limit=3)
    run_ids = []
    for agent in ("reference", "null"):
        config = RunConfig(env=env, agent=AgentSpec(agent=PluginRef(name=agent)), tasks=tasks, epochs=2)
        run_ids.append(asyncio.run(Runner(Store(store), progress=False).run(config)).run_id)
    out = tmp_path / "logs"
    res = sharpen("export", *run_ids, "--format", "inspect", "-o", str(out), "--store", store,
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("wrote ") == 2
    for run_id, expected in zip(run_ids, (1.0, 0.0), strict=True):
        [path] = [p for p in out.glob("*.eval") if read_eval_log(str(p), header_only=True)
                  .eval.metadata["sharpen"]["run_id"] == run_id]
        log = read_eval_log(str(path))
        report = _json(sharpen("report", run_id, "--json", "--store", store, cwd=tmp_path))
        assert log.status == "success" and log.eval.task == "toolshop"
        assert log.eval.config.epochs == 2 and log.eval.dataset.samples == 3
        assert sorted((s.id, s.epoch) for s in log.samples) == sorted(
            (t.id, e) for t in tasks for e in (1, 2))
        assert {s.scores["sharpen"].value for s in log.samples} == {"C" if expected else "I"}
        accuracy = log.results.scores[0].metrics["accuracy"].value
        assert accuracy == expected == report["accuracy"]["success"]["value"]
        stored = {(t.task.id, t.epoch + 1): t for t in Store(store).iter_trajectories(run_id)}
        for s in log.samples:
            assert [m.role for m in s.messages] == [m.role for m in stored[(s.id, s.epoch)].messages]
            assert s.messages[-1].text == (stored[(s.id, s.epoch)].messages[-1].content or "")

    # `inspect view` itself lists both logs and serves them whole.
    served = _served_by_inspect_view(out)
    assert sorted(served) == sorted(p.name for p in out.glob("*.eval"))
    assert {(d["status"], len(d["samples"])) for d in served.values()} == {("success", 6)}

    one = tmp_path / "one.json"  # one run to a named .json file
    res = sharpen("export", run_ids[0], "--format", "inspect", "-o", str(one), "--store", store,
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert len(read_eval_log(str(one)).samples) == 6
    refused = sharpen("export", run_ids[0], "--format", "inspect", "--success", "--store", store,
                      cwd=tmp_path)
    assert refused.returncode == 2 and "filters do not apply" in refused.stderr


def _served_by_inspect_view(log_dir: Path) -> dict[str, Any]:
    """Each log `inspect view --log-dir LOG_DIR` lists, as its API serves it to the viewer."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    inspect_cli = Path(sys.executable).parent / "inspect"
    proc = subprocess.Popen([str(inspect_cli), "view", "--log-dir", str(log_dir), "--host", "127.0.0.1",
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                listing = httpx.get(f"{base}/logs", timeout=5).json()
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.3)
        out = {}
        for f in listing["files"]:
            res = httpx.get(f"{base}/logs/{f['name']}", timeout=30)
            assert res.status_code == 200, res.text
            out[f["name"].rsplit("/", 1)[-1]] = res.json()
        return out
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_import_then_export_keeps_inspects_samples_scores_and_errors(
        inspect_log: EvalLog, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    [imported] = _json(sharpen("import", "inspect", inspect_log.location, "--json", "--store", store,
                               cwd=tmp_path))
    path = tmp_path / "back.eval"
    res = sharpen("export", imported["run_id"], "--format", "inspect", "-o", str(path), "--store",
                  store, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    back = read_eval_log(str(path))
    assert back.eval.task == "tiny_add" and back.eval.model == "mockllm/model"
    assert [s.solver for s in back.plan.steps] == [s.solver for s in inspect_log.plan.steps]
    assert back.results.scores[0].name == "match"
    assert back.results.scores[0].metrics["accuracy"].value == pytest.approx(
        inspect_log.results.scores[0].metrics["accuracy"].value)

    def key(s: Any) -> tuple[str, int]:
        return (str(s.id), s.epoch)

    original = {key(s): s for s in inspect_log.samples}
    assert sorted(key(s) for s in back.samples) == sorted(original)
    for s in back.samples:
        o = original[key(s)]
        assert (s.error is None) == (o.error is None)
        if o.error is None:
            assert s.scores["match"].value == o.scores["match"].value
            assert s.scores["includes"].value == o.scores["includes"].value
            assert [m.role for m in s.messages] == [m.role for m in o.messages]
            assert s.target == o.target


def test_a_json_log_imports_as_the_eval_log_does(inspect_log: EvalLog, tmp_path: Path) -> None:
    as_json = tmp_path / "log.json"
    write_eval_log(inspect_log, str(as_json))
    store = f"sqlite:///{tmp_path / 's.db'}"
    [imported] = _json(sharpen("import", "inspect", str(as_json), "--json", "--store", store, cwd=tmp_path))
    report = _json(sharpen("report", imported["run_id"], "--json", "--store", store, cwd=tmp_path))
    assert imported["written"] == 8
    assert report["accuracy"]["success"]["value"] == pytest.approx(
        inspect_log.results.scores[0].metrics["accuracy"].value)


def test_import_of_a_missing_or_foreign_file_says_what_to_give(tmp_path: Path) -> None:
    missing = sharpen("import", "inspect", str(tmp_path / "nope.eval"), cwd=tmp_path)
    assert missing.returncode == 2 and "no Inspect log" in missing.stderr
    junk = tmp_path / "junk.json"
    junk.write_text('{"hello": 1}')
    foreign = sharpen("import", "inspect", str(junk), cwd=tmp_path)
    assert foreign.returncode == 2 and "not an Inspect log" in foreign.stderr
