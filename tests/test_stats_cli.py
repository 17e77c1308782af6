"""`sharpen report` and `sharpen compare` on real stored runs, no model weights needed:
the `null` and `reference` baseline agents, and the embedded model's recorded replies
through the replay cassette of benchmarks/harness_overhead.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import sharpen

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.manifest import RunManifest
from sharpen.core.outcome import Outcome
from sharpen.core.registry import PluginRef
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Trajectory
from sharpen.store import Store

ROOT = Path(__file__).resolve().parent.parent
CASSETTE = ROOT / "benchmarks" / "cassettes" / "harness_overhead.jsonl"
AGENT = ROOT / "benchmarks" / "cassettes" / "harness_overhead.agent.yaml"
ENV = ["-E", "source=generated", "-E", "difficulty=easy", "-E", "max_submissions=2"]
TASKS = ["--tasks", "16", "--seed", "0", "--no-progress"]


def has_row(out: str, *cells: str) -> bool:
    """Whether one printed line holds every cell, in order (table padding aside)."""
    for line in out.splitlines():
        rest = line
        for cell in cells:
            i = rest.find(cell)
            if i < 0:
                break
            rest = rest[i + len(cell):]
        else:
            return True
    return False


def run_id(stdout: str) -> str:
    line = next(x for x in stdout.splitlines() if "run id" in x)
    return line.split("│")[2].strip()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A store with, on the same 16 generated tasks: the replay run (the embedded model's
    recorded replies: 4 of 16 solved), a run before any baseline existed, then null and
    reference runs."""
    cwd = tmp_path_factory.mktemp("stats-cli")
    replay = sharpen("run", "code", *ENV, *TASKS, "--agent", str(AGENT), "--model", "replay",
                     "--model-arg", f"cassette={CASSETTE}", cwd=cwd)
    assert replay.returncode == 0, replay.stderr
    early = sharpen("report", "latest", cwd=cwd)
    null = sharpen("run", "code", *ENV, *TASKS, "--agent-name", "null", cwd=cwd)
    assert null.returncode == 0, null.stderr
    ref = sharpen("run", "code", *ENV, *TASKS, "--agent-name", "reference", "--target-effect", "0.2",
                  cwd=cwd)
    assert ref.returncode == 0, ref.stderr
    return {"cwd": cwd, "replay": run_id(replay.stdout), "null": run_id(null.stdout),
            "reference": run_id(ref.stdout), "early": early, "ref_out": ref.stdout}


def test_baseline_agents_need_no_model_and_score_0_and_100(runs) -> None:
    store = Store(f"sqlite:///{runs['cwd'] / '.sharpen' / 'sharpen.db'}")
    null, ref = store.get_run(runs["null"]), store.get_run(runs["reference"])
    assert null.agent.model.name == "none" and null.agent.agent.name == "null"
    assert (null.n_counted, null.n_success) == (16, 0)
    assert ref.agent.model.name == "none" and (ref.n_counted, ref.n_success) == (16, 16)
    traj = next(store.iter_trajectories(runs["null"]))
    assert traj.usage.calls == 0 and traj.outcome is not None and traj.outcome.error_kind is None


def test_report_without_baselines_says_how_to_store_them(runs) -> None:
    out = runs["early"]
    assert out.returncode == 0, out.stderr
    assert ("no null run stored for env 'code'; run `sharpen run code -E source=generated "
            "-E difficulty=easy -E max_submissions=2 --agent-name null --tasks 16`") in out.stdout
    assert "no reference run stored" in out.stdout


def test_report_prints_readable_sections(runs) -> None:
    res = sharpen("report", runs["replay"], cwd=runs["cwd"])
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert has_row(out, "success", "25.0%", "[10.1, 49.5]", "wilson", "16")  # 10.18: low end rounded down
    assert "excluded (errors) 0 of 16 attempts" in out
    assert "per success" in out and "consistency" in out
    assert has_row(out, "robustness", "not declared by this environment")
    assert "not available (no outcome states a confidence)" in out
    assert "16 tasks × 1 epoch: smallest detectable effect" in out
    assert f"✓ null agent scores 0.0% (ceiling 5%) in run {runs['null']}" in out
    assert f"✓ reference agent scores 100.0% (floor 95%) in run {runs['reference']}" in out
    assert "NOT TRUSTWORTHY" not in out


def test_report_json_is_the_same_content(runs) -> None:
    res = sharpen("report", runs["replay"], "--json", cwd=runs["cwd"])
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["run"]["run_id"] == runs["replay"]
    assert data["accuracy"]["success"]["value"] == 0.25
    assert data["accuracy"]["success"]["ci"]["method"] == "wilson"
    assert [v["status"] for v in data["validity"]] == ["ok", "ok"]
    assert data["power"]["model"]["source"] == f"pilot run {runs['replay']}"
    assert data["cost"]["cost_usd"] == 0.0 and data["errors"]["trustworthy"] is True


def test_run_with_target_effect_prints_the_plan_from_the_newest_comparable_run(runs) -> None:
    out = runs["ref_out"]
    assert "power plan" in out
    assert "16 tasks × 1 epoch: smallest detectable effect" in out and "too few for 20 points" in out
    assert f"pilot run {runs['replay']}" in out  # baselines are never pilots


def test_compare_verdicts_and_regression_gate(runs, tmp_path: Path) -> None:
    cwd = runs["cwd"]
    # 4 of 16 solved against 0 of 16: 4 discordant pairs, exact McNemar p = 2 · 0.5⁴ = 0.125
    unclear = sharpen("compare", runs["null"], runs["replay"], "--fail-if-worse", cwd=cwd)
    assert unclear.returncode == 0, unclear.stderr
    assert ("B vs A: no detectable difference; with these tasks the smallest detectable effect "
            "is 31 points") in unclear.stdout
    assert has_row(unclear.stdout, "B vs A", "16", "0.0%", "25.0%", "+25.0", "0.125", "mcnemar-exact")

    # 16 of 16 against 4 of 16: p = 2 · 0.5¹² = 0.0005
    gate = sharpen("compare", runs["reference"], runs["replay"], "--fail-if-worse", cwd=cwd)
    assert gate.returncode == 1, (gate.stdout, gate.stderr)
    assert "B vs A: B is worse by 75.0 points, 95% CI [" in gate.stdout
    assert gate.stdout.rstrip().endswith("p < 0.001") and "regression:" in gate.stderr
    better = sharpen("compare", runs["replay"], runs["reference"], "--fail-if-worse", cwd=cwd)
    assert better.returncode == 0 and "B vs A: B is better by 75.0 points" in better.stdout

    same = sharpen("compare", runs["replay"], runs["null"], runs["replay"][:6] + "x", cwd=cwd)
    assert same.returncode == 2 and "no run matches" in same.stderr

    three = sharpen("compare", runs["null"], runs["replay"], runs["reference"], "--json",
                    "--plot", str(tmp_path / "plots"), cwd=cwd)
    assert three.returncode == 0, three.stderr
    data = json.loads(three.stdout)
    assert data["holm"] is True and [c["label_b"] for c in data["comparisons"]] == ["B", "C"]
    b, c = data["comparisons"]
    assert c["p_adjusted"] == pytest.approx(2 * c["p_value"])  # Holm: the smaller p doubles,
    assert b["p_adjusted"] == pytest.approx(b["p_value"])  # the larger one stays
    assert c["verdict"].startswith("C is better by 100.0 points") and c["verdict"].endswith("(Holm-adjusted)")
    assert data["frontier"]["axis"] == "tokens"
    png, svg = tmp_path / "plots" / "cost_accuracy.png", tmp_path / "plots" / "cost_accuracy.svg"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert "<svg" in svg.read_text()


def test_report_plot_draws_runs_on_the_same_env(runs, tmp_path: Path) -> None:
    res = sharpen("report", runs["replay"], "--plot", str(tmp_path), cwd=runs["cwd"])
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "cost_accuracy.png").exists() and (tmp_path / "cost_accuracy.svg").exists()
    # A file name is taken as one (its folder is made), with the other format beside it.
    target = tmp_path / "figs" / "frontier.png"
    res = sharpen("report", runs["replay"], "--plot", str(target), cwd=runs["cwd"])
    assert res.returncode == 0, res.stderr
    assert target.read_bytes().startswith(b"\x89PNG")
    assert "<svg" in target.with_suffix(".svg").read_text()
    assert not (target / "cost_accuracy.png").exists()


def _fake_run(store: Store, run_id: str, agent: str, outcomes: list[Outcome]) -> None:
    """A stored run written through the Store API (what the runner would have stored)."""
    spec = AgentSpec(name=agent, agent=PluginRef(name=agent), model=PluginRef(name="none"))
    tasks = [TaskSpec(env="code", id=f"HumanEval/{i}") for i in range(len(outcomes))]
    store.create_run(RunManifest(run_id=run_id, env=PluginRef(name="code"), agent_hash=spec.hash(),
                                 task_ids=[t.id for t in tasks], epochs=1, seed=0,
                                 config_hash=run_id), spec, tasks)
    for t, o in zip(tasks, outcomes, strict=True):
        store.save_trajectory(Trajectory(run_id=run_id, task=t, agent_hash=spec.hash(), outcome=o))
    store.set_run_status(run_id, "finished")


def test_report_warns_loudly_on_failed_validity_and_many_errors(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / '.sharpen' / 'sharpen.db'}")
    ok, bad = Outcome(success=True), Outcome(success=False)
    infra = Outcome(success=False, error_kind="infra", error="503")
    _fake_run(store, "nullrun", "null", [ok, bad, bad, bad])  # the checker passes empty answers
    _fake_run(store, "refrun", "reference", [ok, ok, ok, bad])
    _fake_run(store, "agentrun", "tool", [ok, bad, infra, infra])
    res = sharpen("report", "agentrun", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "NOT TRUSTWORTHY" in out
    assert "NULL AGENT SCORES 25.0%, ABOVE THE 5% CEILING (run nullrun)" in out
    assert "REFERENCE AGENT SCORES 75.0%, BELOW THE 95% FLOOR (run refrun)" in out
    assert "50.0% of attempts errored (infra 2), more than 10%: these numbers are not trustworthy" in out
    data = json.loads(sharpen("report", "agentrun", "--json", cwd=tmp_path).stdout)
    assert data["errors"]["trustworthy"] is False and data["trustworthy"] is False
    assert len(data["alarms"]) == 3
    assert [v["status"] for v in data["validity"]] == ["failed", "failed"]


@pytest.mark.parametrize(
    ("args", "message", "fix"),
    [
        (["compare", "latest"], "compare needs at least two runs", "sharpen compare BASE NEW"),
        (["report", "nope"], "no run matches 'nope'", "sharpen runs"),
        (["run", "code", "--agent-name", "nul"], "unknown agent 'nul'", "did you mean 'null'"),
    ],
)
def test_user_errors_are_one_clear_message(tmp_path: Path, args, message, fix) -> None:
    res = sharpen(*args, cwd=tmp_path, timeout=120)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert message in res.stderr and fix in res.stderr and "Traceback" not in res.stderr


def test_run_report_compare_export_and_resume_on_a_postgresql_store(postgres, tmp_path: Path) -> None:
    """The same commands with ``--store`` (here ``SHARPEN_STORE``) naming a real PostgreSQL
    database: the same numbers as on SQLite, and no SQLite file made on the side."""
    env = {"SHARPEN_STORE": postgres.new_database()}
    replay_args = ["run", "code", *ENV, *TASKS, "--agent", str(AGENT), "--model", "replay",
                   "--model-arg", f"cassette={CASSETTE}"]
    replay = sharpen(*replay_args, cwd=tmp_path, env=env)
    assert replay.returncode == 0, replay.stderr
    ref = sharpen("run", "code", *ENV, *TASKS, "--agent-name", "reference", cwd=tmp_path, env=env)
    assert ref.returncode == 0, ref.stderr
    rid, ref_id = run_id(replay.stdout), run_id(ref.stdout)

    report = sharpen("report", rid, cwd=tmp_path, env=env)
    assert report.returncode == 0, report.stderr
    assert has_row(report.stdout, "success", "25.0%", "[10.1, 49.5]", "wilson", "16")
    assert f"✓ reference agent scores 100.0% (floor 95%) in run {ref_id}" in report.stdout
    better = sharpen("compare", rid, ref_id, cwd=tmp_path, env=env)
    assert better.returncode == 0 and "B vs A: B is better by 75.0 points" in better.stdout

    out = tmp_path / "replay.jsonl"
    exported = sharpen("export", rid, "--format", "jsonl", "-o", str(out), cwd=tmp_path, env=env)
    assert exported.returncode == 0, exported.stderr
    assert len(out.read_text().splitlines()) == 16

    again = sharpen(*replay_args, "--resume", cwd=tmp_path, env=env)
    assert again.returncode == 0, again.stderr
    assert run_id(again.stdout) == rid
    with Store(env["SHARPEN_STORE"]) as store:
        assert store.get_run(rid).n_trajectories == 16
        assert len(store.list_runs()) == 2
    assert not (tmp_path / ".sharpen").exists()
