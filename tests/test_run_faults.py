"""`sharpen run` against a real OpenAI-compatible server on loopback (llama_cpp.server with the
embedded GGUF), directly and behind a fault-injecting proxy."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import sharpen
from fault_proxy import FaultProxy
from servers import llama_server_fixture

from sharpen.store import Store

pytestmark = pytest.mark.slow

llama_server = llama_server_fixture()

RUN = ["run", "code", "--tasks", "4", "--concurrency", "1", "--no-progress"]


def _trajectories(cwd: Path):
    store = Store(f"sqlite:///{cwd / '.sharpen' / 'sharpen.db'}")
    [run] = store.list_runs()
    return run, list(store.iter_trajectories(run.id))


def test_run_against_an_openai_compatible_server(llama_server, tmp_path, small_agent):
    res = sharpen(*RUN, "--agent", str(small_agent), "--model", "openai",
                  "--base-url", llama_server, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    run, trajs = _trajectories(tmp_path)
    assert run.agent.model.name == "openai"
    assert run.agent.model.args["base_url"] == llama_server
    assert len(trajs) == 4
    assert all(t.outcome.error_kind in (None, "agent") for t in trajs)
    assert all(t.usage.calls >= 1 and t.usage.output_tokens > 0 for t in trajs)


def test_every_fault_is_retried_or_recorded_as_infra(llama_server, tmp_path, small_agent):
    clean_dir = tmp_path / "clean"
    clean_dir.mkdir()
    clean = sharpen(*RUN, "--agent", str(small_agent), "--base-url", llama_server,
                    cwd=clean_dir)
    assert clean.returncode == 0, clean.stderr
    _, clean_trajs = _trajectories(clean_dir)
    reference = {t.task.id: (t.outcome.success, t.outcome.reward) for t in clean_trajs}

    # Each fault once, then three 500s in a row: with --retries 2 that call gives up.
    schedule = ["drop", "ok", "429", "ok", "500", "slow", "ok", "truncated", "ok",
                "500", "500", "500"] + ["ok"] * 8
    proxy = FaultProxy(upstream=llama_server.removesuffix("/v1"), schedule=schedule,
                       slow_seconds=25.0).start()
    faulty = [*RUN, "--agent", str(small_agent), "--base-url", proxy.base_url,
              "--model-arg", "timeout=20", "--retries", "2", "--retry-delay", "0.05"]
    faulty_dir = tmp_path / "faulty"
    faulty_dir.mkdir()
    try:
        res = sharpen(*faulty, cwd=faulty_dir)
        injected = proxy.injected()
        assert res.returncode == 0, res.stderr
        assert {"drop", "429", "500", "slow", "truncated"} <= set(injected)
        run, trajs = _trajectories(faulty_dir)
        infra = [t for t in trajs if t.outcome.error_kind == "infra"]
        completed = [t for t in trajs if t.outcome.counts]
        # Every injected fault is accounted for: retried (counted on its trajectory), or the
        # last straw of an episode recorded as infra.
        assert sum(t.infra_retries for t in trajs) + len(infra) == len(injected)
        assert len(infra) == 1 and not infra[0].outcome.success
        assert run.n_counted == len(completed) == len(trajs) - 1
        assert "infra: 1" in res.stdout
        # Completed attempts score as without faults: no fault became an agent result.
        for t in completed:
            assert (t.outcome.success, t.outcome.reward) == reference[t.task.id], t.task.id

        # A resume attempts the infra-errored episode again; the faults are gone now.
        proxy.set_schedule(["ok"])
        again = sharpen(*faulty, "--resume", cwd=faulty_dir)
        assert again.returncode == 0, again.stderr
        run, trajs = _trajectories(faulty_dir)
        assert len(trajs) == 4 and run.n_counted == 4
        assert {t.task.id for t in trajs} == set(reference)
    finally:
        proxy.stop()
