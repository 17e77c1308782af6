"""OpenTelemetry out and in, against a real Arize Phoenix launched on loopback for the session:
``sharpen export RUN --format otlp``, live ``sharpen run --otlp``, ``sharpen import otlp`` and
``sharpen import phoenix``. Spans and attributes are asserted through Phoenix's REST API; a run
exported and imported back must give the same ``sharpen report``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import sharpen
from servers import free_port

from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.interop.otel_spans import trace_id_of
from sharpen.store import Store

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "cassettes"
REPLAY = ["code", "-E", "source=generated", "-E", "difficulty=easy", "-E", "max_submissions=2",
          "--tasks", "6", "--seed", "0", "-c", "2", "--agent",
          str(BENCH / "harness_overhead.agent.yaml"), "--model", "replay", "--model-arg",
          f"cassette={BENCH / 'harness_overhead.jsonl'}"]
"""Real SmolLM2 replies replayed on six code tasks: model calls with usage, tool calls,
invalid replies, successes and failures, in a second."""


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Phoenix server on 127.0.0.1 (its SQLite in a temp dir): its base URL."""
    work = tmp_path_factory.mktemp("phoenix")
    port, grpc = free_port(), free_port()
    env = {**os.environ, "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(grpc),
           "PHOENIX_HOST": "127.0.0.1", "PHOENIX_WORKING_DIR": str(work),
           "PHOENIX_TELEMETRY_ENABLED": "false"}
    log = (work / "phoenix.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "phoenix.server.main", "serve"], env=env,
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    try:
        while True:
            if proc.poll() is not None:
                tail = (work / "phoenix.log").read_text()[-2000:]
                raise RuntimeError(f"phoenix exited {proc.returncode}: {tail}")
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("phoenix did not come up in 180 s")
            time.sleep(0.5)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="session")
def replay_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A stored replay run with a human feedback record added: ``(store url, run id)``."""
    work = tmp_path_factory.mktemp("otlp-run")
    store = f"sqlite:///{work / 's.db'}"
    res = sharpen("run", *REPLAY, "--json", "--store", store, cwd=work, timeout=300)
    assert res.returncode == 0, res.stderr
    run_id = json.loads(res.stdout)["run"]["id"]
    st = Store(store)
    first = next(iter(st.iter_trajectories(run_id, with_steps=False)))
    st.add_feedback(Feedback(source="human", name="verdict", value="good", rationale="clean",
                             author="ana", target=FeedbackTarget(kind="trajectory", run_id=run_id,
                                                                 trajectory_id=first.id)))
    return store, run_id


def phoenix_spans(url: str, project: str, expect: int, timeout: float = 60) -> list[dict[str, Any]]:
    """The project's spans once ``expect`` of them are there (Phoenix ingests in the
    background); fails after ``timeout`` seconds with what arrived."""
    deadline = time.monotonic() + timeout
    spans: list[dict[str, Any]] = []
    while True:
        res = httpx.get(f"{url}/v1/projects/{project}/spans", params={"limit": 1000}, timeout=10)
        if res.status_code == 200:
            spans = res.json()["data"]
            if len(spans) >= expect:
                return spans
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(spans)} of {expect} spans reached Phoenix ({res.status_code})")
        time.sleep(0.5)


def phoenix_annotations(url: str, project: str, span_ids: list[str], expect: int,
                        timeout: float = 60) -> list[dict[str, Any]]:
    """The span annotations on ``span_ids`` once ``expect`` are there (Phoenix inserts them
    in the background)."""
    deadline = time.monotonic() + timeout
    while True:
        res = httpx.get(f"{url}/v1/projects/{project}/span_annotations",
                        params={"span_ids": span_ids, "limit": 1000}, timeout=10)
        notes = res.json()["data"] if res.status_code == 200 else []
        if len(notes) >= expect:
            return notes
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(notes)} of {expect} annotations reached Phoenix")
        time.sleep(0.5)


def report_json(store: str, run_id: str, cwd: Path) -> dict[str, Any]:
    res = sharpen("report", run_id, "--json", "--store", store, cwd=cwd)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def expected_spans(store: str, run_id: str) -> Counter[str]:
    """Spans per OpenInference kind the run must become: a root, an agent span per
    trajectory, a step span per step, an LLM span per model reply, a tool span per action."""
    trajs = list(Store(store).iter_trajectories(run_id))
    steps = [s for t in trajs for s in t.steps]
    replied = [s for s in steps if s.usage.calls or any(m.role == "assistant" for m in s.messages)]
    return Counter({"CHAIN": 1 + len(steps), "AGENT": len(trajs), "LLM": len(replied),
                    "TOOL": sum(1 for s in steps if s.action is not None)})


def stored(store: str, run_id: str) -> list[dict[str, Any]]:
    return [t.model_dump(mode="json") for t in Store(store).iter_trajectories(run_id)]


def test_export_reaches_phoenix_with_genai_attributes_and_imports_back_the_same(
        phoenix: str, replay_run: tuple[str, str], tmp_path: Path) -> None:
    store, run_id = replay_run
    res = sharpen("export", run_id, "--format", "otlp", "--endpoint", phoenix, "--project", "after",
                  "--phoenix-annotations", "--store", store, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    want = expected_spans(store, run_id)
    spans = phoenix_spans(phoenix, "after", sum(want.values()))
    assert Counter(s["span_kind"] for s in spans) == want
    assert {s["context"]["trace_id"] for s in spans} == {f"{trace_id_of(run_id):032x}"}
    trajs = {t.id: t for t in Store(store).iter_trajectories(run_id)}
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for s in spans:
        by_kind.setdefault(s["span_kind"], []).append(s)
    for s in by_kind["AGENT"]:
        a = s["attributes"]
        t = trajs[a["gen_ai.conversation.id"]]
        assert a["gen_ai.operation.name"] == "invoke_agent"
        assert s["name"] == "invoke_agent tool"
        assert a["gen_ai.usage.input_tokens"] == t.usage.input_tokens
        assert a["gen_ai.usage.output_tokens"] == t.usage.output_tokens
        assert a["sharpen.success"] == t.outcome.success
        names = [e["attributes"]["gen_ai.evaluation.name"] for e in s["events"]
                 if e["name"] == "gen_ai.evaluation.result"]
        assert names[0] == "outcome"
        assert ("verdict" in names) == any(f.source == "human" for f in t.feedback)
    assert sum(1 for s in by_kind["AGENT"] for e in s["events"]
               if e["attributes"].get("gen_ai.evaluation.name") == "verdict") == 1
    steps = [st for t in trajs.values() for st in t.steps]
    assert sum(s["attributes"]["gen_ai.usage.input_tokens"] for s in by_kind["LLM"]) == \
        sum(st.usage.input_tokens for st in steps)
    for s in by_kind["LLM"]:
        a = s["attributes"]
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.request.model"]
        assert a["llm.token_count.total"] == a["gen_ai.usage.input_tokens"] + a["gen_ai.usage.output_tokens"]
    agents = [s["context"]["span_id"] for s in by_kind["AGENT"]]
    # One annotation per (span, name, source and author): a later record of the same name by
    # the same author (a second submission's test results) replaces the earlier.
    distinct = {(t.id, f.name, f.source, f.author) for t in trajs.values() for f in t.feedback}
    notes = phoenix_annotations(phoenix, "after", agents, expect=len(agents) + len(distinct))
    assert len(notes) == len(agents) + len(distinct)
    assert Counter(n["name"] for n in notes)["outcome"] == len(agents)
    (human,) = [n for n in notes if n["annotator_kind"] == "HUMAN"]
    assert human["name"] == "verdict" and human["result"]["label"] == "good"
    assert {s["attributes"]["gen_ai.tool.name"] for s in by_kind["TOOL"]} == {"submit"}
    assert all(s["attributes"]["gen_ai.operation.name"] == "execute_tool" for s in by_kind["TOOL"])

    back = f"sqlite:///{tmp_path / 'back.db'}"
    res = sharpen("import", "phoenix", "--endpoint", phoenix, "--project", "after", "--json",
                  "--store", back, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["runs"] == [
        {"run_id": run_id, "source": "sharpen", "trajectories": 6, "written": 6}]
    assert report_json(back, run_id, tmp_path) == report_json(store, run_id, tmp_path)
    assert stored(back, run_id) == stored(store, run_id)


def test_live_otlp_during_a_run(phoenix: str, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'live.db'}"
    res = sharpen("run", *REPLAY, "--otlp", phoenix, "--otlp-project", "live", "--json",
                  "--store", store, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    run_id = json.loads(res.stdout)["run"]["id"]
    want = expected_spans(store, run_id)
    assert f"sent {sum(want.values())} spans" in res.stderr
    spans = phoenix_spans(phoenix, "live", sum(want.values()))
    assert Counter(s["span_kind"] for s in spans) == want
    root = next(s for s in spans if s["parent_id"] is None)
    assert root["attributes"]["sharpen.run.id"] == run_id
    back = f"sqlite:///{tmp_path / 'back.db'}"
    res = sharpen("import", "phoenix", "--endpoint", phoenix, "--project", "live", "--store", back,
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert report_json(back, run_id, tmp_path) == report_json(store, run_id, tmp_path)


def test_otlp_json_file_round_trip_and_reimport_adds_nothing(
        replay_run: tuple[str, str], tmp_path: Path) -> None:
    store, run_id = replay_run
    path = tmp_path / "run.otlp.json"
    res = sharpen("export", run_id, "--format", "otlp", "-o", str(path), "--store", store, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    first = json.loads(path.read_text().splitlines()[0])
    assert first["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] == f"{trace_id_of(run_id):032x}"
    # Spread over two files (a collector's rotated files), the root span in the second.
    lines = path.read_text().splitlines(keepends=True)
    parts = [tmp_path / "a.json", tmp_path / "b.json"]
    parts[0].write_text("".join(lines[:3]))
    parts[1].write_text("".join(lines[3:]))
    back = f"sqlite:///{tmp_path / 'back.db'}"
    for written in (6, 0):
        res = sharpen("import", "otlp", *map(str, parts), "--json", "--store", back, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["runs"][0]["written"] == written
    assert report_json(back, run_id, tmp_path) == report_json(store, run_id, tmp_path)
    assert stored(back, run_id) == stored(store, run_id)


def test_export_otlp_needs_one_destination_and_no_filters(replay_run: tuple[str, str],
                                                          tmp_path: Path) -> None:
    store, run_id = replay_run
    res = sharpen("export", run_id, "--format", "otlp", "--store", store, cwd=tmp_path)
    assert res.returncode != 0 and "--endpoint" in res.stdout + res.stderr
    res = sharpen("export", run_id, "--format", "otlp", "-o", str(tmp_path / "x.json"), "--success",
                  "--store", store, cwd=tmp_path)
    assert res.returncode != 0 and "filters" in res.stdout + res.stderr


def _foreign_spans(exporter: Any, project: str) -> None:
    """Two agent episodes as a GenAI-instrumented program would record them, through the real
    OpenTelemetry SDK: one scored (a passing evaluation event) with two chat calls and a tool
    call, one with a chat call and no evaluation."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": project,
                                                        "openinference.project.name": project}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("their-agent")
    for question, scored in (("What is 2+2?", True), ("Name a prime.", False)):
        with tracer.start_as_current_span("invoke_agent helper") as agent:
            agent.set_attributes({"gen_ai.operation.name": "invoke_agent",
                                  "gen_ai.agent.name": "helper", "input.value": question})
            with tracer.start_as_current_span("chat gpt-4o-mini") as chat:
                chat.set_attributes({"gen_ai.operation.name": "chat",
                                     "gen_ai.request.model": "gpt-4o-mini",
                                     "gen_ai.usage.input_tokens": 30,
                                     "gen_ai.usage.output_tokens": 7, "output.value": "calc"})
            if scored:
                with tracer.start_as_current_span("execute_tool calc") as tool:
                    tool.set_attributes({"gen_ai.operation.name": "execute_tool",
                                         "gen_ai.tool.name": "calc",
                                         "gen_ai.tool.call.arguments": '{"expr": "2+2"}',
                                         "gen_ai.tool.call.result": "4"})
                with tracer.start_as_current_span("chat gpt-4o-mini") as chat:
                    chat.set_attributes({"gen_ai.operation.name": "chat",
                                         "gen_ai.request.model": "gpt-4o-mini",
                                         "gen_ai.usage.input_tokens": 40,
                                         "gen_ai.usage.output_tokens": 3, "output.value": "4"})
                agent.add_event("gen_ai.evaluation.result", {
                    "gen_ai.evaluation.name": "correct", "gen_ai.evaluation.score.value": 1.0,
                    "gen_ai.evaluation.score.label": "pass"})
    provider.shutdown()


def test_foreign_genai_spans_from_phoenix_become_a_run(phoenix: str, tmp_path: Path) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    _foreign_spans(OTLPSpanExporter(endpoint=f"{phoenix}/v1/traces"), "foreign")
    phoenix_spans(phoenix, "foreign", 6)
    back = f"sqlite:///{tmp_path / 'f.db'}"
    res = sharpen("import", "phoenix", "--endpoint", phoenix, "--project", "foreign", "--json",
                  "--store", back, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    (run,) = json.loads(res.stdout)["runs"]
    assert run["source"] == "foreign" and run["trajectories"] == 2
    trajs = sorted(Store(back).iter_trajectories(run["run_id"]), key=lambda t: t.started_at)
    assert [len(t.steps) for t in trajs] == [2, 1]
    assert trajs[0].steps[0].action is not None and trajs[0].steps[0].action.arguments == {"expr": "2+2"}
    assert trajs[0].usage.input_tokens == 70 and trajs[0].usage.output_tokens == 10
    assert trajs[0].outcome is not None and trajs[0].outcome.success
    assert trajs[1].outcome is None  # no evaluation: unscored
    rep = report_json(back, run["run_id"], tmp_path)
    assert rep["errors"]["counted"] == 1 and rep["errors"]["excluded"] == {"unscored": 1}


def test_foreign_spans_from_an_otlp_json_file(tmp_path: Path) -> None:
    """The protobuf JSON mapping (base64 ids) of what the SDK sends, read as a file."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    lines: list[str] = []

    class FileExporter(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            lines.append(json.dumps(MessageToDict(encode_spans(spans))))
            return SpanExportResult.SUCCESS

    _foreign_spans(FileExporter(), "file-agent")
    path = tmp_path / "spans.jsonl"
    path.write_text("\n".join(lines) + "\n")
    back = f"sqlite:///{tmp_path / 'f.db'}"
    res = sharpen("import", "otlp", str(path), "--json", "--store", back, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    (run,) = json.loads(res.stdout)["runs"]
    trajs = list(Store(back).iter_trajectories(run["run_id"]))
    assert sorted(t.usage.total_tokens for t in trajs) == [37, 80]
    assert Store(back).get_run(run["run_id"]).manifest.env.name == "otel:file-agent"


def test_live_otlp_to_a_receiver_that_is_down_keeps_the_run(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'down.db'}"
    res = sharpen("run", *REPLAY, "--otlp", f"http://127.0.0.1:{free_port()}", "--json",
                  "--store", store, cwd=tmp_path, env={"OTEL_EXPORTER_OTLP_TIMEOUT": "1"})
    assert res.returncode == 0, res.stderr
    run_id = json.loads(res.stdout)["run"]["id"]
    assert "36 of 36 spans could not be sent" in res.stderr
    assert len(list(Store(store).iter_trajectories(run_id, with_steps=False))) == 6
