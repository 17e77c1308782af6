"""`sharpen` end to end with the real embedded model: run, runs, show, export, user errors."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from conftest import sharpen
from llama_cpp import Llama
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from sharpen.cli.demo_cmd import DEMO_ENV, DEMO_TASK_SEED
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.registry import REGISTRY
from sharpen.envs.code.env import CodeEnv
from sharpen.models.local import gguf_path
from sharpen.sandbox.forkserver import FORKSERVER_LABEL
from sharpen.sandbox.local import bwrap_usable
from sharpen.store import Store

pytestmark = pytest.mark.slow


def test_run_show_export_with_the_embedded_model(tmp_path: Path, small_agent: Path) -> None:
    res = sharpen("run", "code", "--tasks", "2", "--agent", str(small_agent), "--no-progress",
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "95% Wilson CI" in res.stdout and "run id" in res.stdout
    store = Store(f"sqlite:///{tmp_path / '.sharpen' / 'sharpen.db'}")
    [run] = store.list_runs()
    assert run.status == "finished" and run.manifest.task_ids == ["HumanEval/0", "HumanEval/1"]
    assert run.manifest.isolation == CodeEnv.isolation() != "unknown"
    if os.geteuid() == 0 and bwrap_usable():  # the test runs were the fork server's children
        assert run.manifest.isolation == FORKSERVER_LABEL
    trajs = list(store.iter_trajectories(run.id))
    assert len(trajs) == 2
    for t in trajs:
        assert t.outcome is not None and t.outcome.error_kind in (None, "agent")
        assert t.usage.output_tokens > 0 and t.usage.cost_usd == 0.0
        assert [m.role for m in t.messages[:3]] == ["system", "user", "assistant"]
        assert 1 <= len(t.steps) <= 2

    listing = sharpen("runs", cwd=tmp_path)
    assert run.id in listing.stdout and "finished" in listing.stdout
    shown = sharpen("show", run.id[:6], cwd=tmp_path)
    assert shown.returncode == 0 and "HumanEval/1" in shown.stdout

    out = tmp_path / "export.jsonl"
    exp = sharpen("export", "latest", "--format", "jsonl", "-o", str(out), cwd=tmp_path)
    assert exp.returncode == 0, exp.stderr
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 2
    for line in lines:
        assert line["messages"][0]["role"] == "system"
        assert line["tools"][0]["function"]["name"] == "submit"
        assert line["outcome"]["success"] in (True, False)
        submitted = next(s for s in store.iter_trajectories(run.id)
                     if s.id == line["trajectory_id"])
        if any(s.action for s in submitted.steps):  # a valid submission got test feedback
            assert any(f["source"] == "execution" for f in line["feedback"])

    # Fine-tuning data: the failed attempts as SFT examples, rendered by the model's own chat
    # template (what a trainer's tokenizer applies) with every turn in order.
    sft = tmp_path / "sft.jsonl"
    res = sharpen("export", "latest", "--format", "sft", "--failure", "-o", str(sft), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    examples = [json.loads(x) for x in sft.read_text().splitlines()]
    failed = {t.id for t in trajs if not t.outcome.success}
    assert {x["meta"]["trajectory_id"] for x in examples} == failed
    assert f"wrote {len(failed)} examples from {len(failed)} of 2 trajectories (failure)" in res.stderr
    template = Llama(model_path=str(gguf_path()), vocab_only=True, verbose=False).metadata[
        "tokenizer.chat_template"]
    render = Jinja2ChatFormatter(template=template, eos_token="<|im_end|>", bos_token="")
    for x in examples:
        text = render(messages=x["messages"]).prompt
        at = 0
        for m in x["messages"]:
            at = text.index(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>", at)


@pytest.mark.parametrize(
    ("args", "message", "fix"),
    [
        (["run", "nosuchenv"], "unknown env 'nosuchenv'", "known envs: code"),
        (["run", "cod"], "unknown env 'cod'", "did you mean 'code'"),
        (["run", "code", "--model", "nosuch"], "unknown model 'nosuch'", "known models"),
        (["run", "code", "--agent", "missing.yaml"], "does not exist", "--agent"),
        (["run", "code", "-E", "bogus=1"], "bad arguments for env 'code': unknown argument 'bogus'",
         "it takes: source='humaneval'"),
        (["run", "code", "-E", "novalue"], "is not KEY=VALUE", "key=value"),
        (["show", "nope"], "nope", "sharpen runs"),
        (["runs", "--store", "notaurl"], "notaurl", "--store"),
        (["export", "latest", "--format", "csv"], "unknown export format", "jsonl"),
        (["checkpoint", "out", "--gguf", "missing.gguf"], "does not exist", "path of a .gguf"),
        (["gguf", "nockpt", "out.gguf"], "does not exist", "folder a trainer saved"),
        (["gguf", ".", "out.gguf", "--dtype", "q8"], "unknown dtype", "f32 or f16"),
    ],
)
def test_user_errors_are_one_clear_message(tmp_path: Path, args, message, fix) -> None:
    res = sharpen(*args, cwd=tmp_path, timeout=120)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert message in res.stderr and fix in res.stderr
    assert "Traceback" not in res.stderr


def test_bad_agent_yaml_names_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("limits: {max_steps: many}\n")
    res = sharpen("run", "code", "--agent", str(bad), cwd=tmp_path, timeout=120)
    assert res.returncode == 2 and "limits.max_steps" in res.stderr
    assert "Traceback" not in res.stderr


def test_a_dead_endpoint_stops_the_run_with_one_message(tmp_path: Path) -> None:
    from servers import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"
    res = sharpen("run", "code", "--base-url", url, "--tasks", "8", "--retries", "1",
                  "--retry-delay", "0.01", "--no-progress", cwd=tmp_path, timeout=120)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "infra errors" in res.stderr and url in res.stderr and "--resume" in res.stderr
    assert "Traceback" not in res.stderr
    store = Store(f"sqlite:///{tmp_path / '.sharpen' / 'sharpen.db'}")
    [run] = store.list_runs()
    assert run.status == "failed"
    kept = list(store.iter_trajectories(run.id, with_steps=False))
    assert kept and all(t.outcome.error_kind == "infra" for t in kept)


def test_demo_end_to_end_at_a_small_size(tmp_path: Path) -> None:
    """`sharpen demo` as `make demo` runs it, shrunk by its own flags: the embedded model, the
    feedback retry offered first, a verdict, and a winner `sharpen run --agent` can load."""
    res = sharpen("demo", "--test", "3", "--train", "3", "--val", "2", "--budget-rollouts", "24",
                  "--minibatch", "3", cwd=tmp_path)
    assert res.returncode == 0, (res.stdout, res.stderr)
    out = " ".join(res.stdout.split())  # Rich wraps long lines
    assert "#1: reflexion with 4 trials per task, memory result" in out
    assert "Held-out test (3 tasks, same seeds for every spec)" in out
    assert re.search(r"verdict: (held-out gain|held-out loss|no detectable gain on held-out tasks): ", out)
    winner = AgentSpec.load(tmp_path / "improved.yaml")
    assert winner.model.name == "local"
    store = Store(f"sqlite:///{tmp_path / '.sharpen' / 'sharpen.db'}")
    task_ids = {t.task.id for r in store.list_runs() for t in store.iter_trajectories(r.id, with_steps=False)}
    demo_env = REGISTRY.create("env", DEMO_ENV)
    assert task_ids <= {t.id for split in ("train", "val", "test")
                        for t in demo_env.list_tasks(split=split, limit=3, seed=DEMO_TASK_SEED)}
