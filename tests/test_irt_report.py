"""IRT in `sharpen report` and `sharpen compare` on real stored runs, no model weights: the
`null` and `reference` agents and, between them, the embedded model's recorded replies
through the replay cassette of benchmarks/harness_overhead.py (4 of 16 tasks solved)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import sharpen as cli

import sharpen
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.manifest import RunManifest
from sharpen.stats.irt_runs import MIN_2PL_AGENTS, TOP
from sharpen.stats.report import RunReport
from sharpen.store import Store

ROOT = Path(__file__).resolve().parent.parent
CASSETTE = ROOT / "benchmarks" / "cassettes" / "harness_overhead.jsonl"
AGENT = ROOT / "benchmarks" / "cassettes" / "harness_overhead.agent.yaml"
ENV_ARGS = {"source": "generated", "difficulty": "easy", "max_submissions": 2}


def has_row(out: str, *cells: str) -> bool:
    """Whether one printed line holds every cell, in order (table padding aside)."""
    for line in out.splitlines():
        at = 0
        for cell in cells:
            at = line.find(cell, at)
            if at < 0:
                break
            at += len(cell)
        else:
            return True
    return False


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """On the same 16 generated tasks: the replay run (alone at first: its report then has
    no one to fit with), two null runs (the newer stands for the spec), the reference run,
    and a reference run on other environment args (never fitted with the others)."""
    cwd = tmp_path_factory.mktemp("irt-report")
    url = f"sqlite:///{cwd / '.sharpen' / 'sharpen.db'}"
    (cwd / ".sharpen").mkdir()
    replay = sharpen.run("code", agent=AGENT, model={"name": "replay", "args": {"cassette": str(CASSETTE)}},
                         tasks=16, env_args=ENV_ARGS, store=url)
    alone = cli("report", replay.id, cwd=cwd)
    old_null = sharpen.run("code", agent="null", tasks=16, env_args=ENV_ARGS, store=url)
    null = sharpen.run("code", agent="null", tasks=16, env_args=ENV_ARGS, store=url)
    ref = sharpen.run("code", agent="reference", tasks=16, env_args=ENV_ARGS, store=url)
    other = sharpen.run("code", agent="reference", tasks=16,
                        env_args={**ENV_ARGS, "max_submissions": 3}, store=url)
    return {"cwd": cwd, "store": Store(url), "replay": replay.id, "old_null": old_null.id,
            "null": null.id, "reference": ref.id, "other": other.id, "alone": alone}


def test_a_lone_spec_says_in_one_line_what_is_needed(runs) -> None:
    out = runs["alone"]
    assert out.returncode == 0, out.stderr
    lines = [x for x in out.stdout.splitlines() if x.startswith("Ability (IRT)")]
    assert len(lines) == 1 and "needs a finished run of at least one other agent spec" in lines[0]


def test_report_ranks_reference_above_replay_above_null_with_intervals(runs) -> None:
    irt = sharpen.report(runs["replay"], store=runs["store"]).irt
    assert irt is not None and irt.available and irt.converged
    assert irt.model == "2pl" and len(irt.agents) == 3 >= MIN_2PL_AGENTS and irt.tasks == 16
    assert [a.run_id for a in irt.agents] == [runs["reference"], runs["replay"], runs["null"]]
    assert [a.rank for a in irt.agents] == [1, 2, 3]
    assert [a.this_run for a in irt.agents] == [False, True, False]
    assert [a.success for a in irt.agents] == [1.0, 0.25, 0.0]
    for a in irt.agents:
        assert a.low < a.theta < a.high
    # the reference and null abilities are told apart; the other env args' run and the
    # older null run are not in the fit
    assert irt.agents[0].low > irt.agents[2].high
    assert {runs["other"], runs["old_null"]}.isdisjoint(a.run_id for a in irt.agents)
    assert len(irt.hardest) == len(irt.most_discriminating) == TOP
    for t in irt.hardest:
        assert t.low < t.difficulty < t.high
        assert (t.solved, t.attempts) == (1, 3)  # solved by the reference agent alone


def test_report_of_the_null_run_fits_the_same_specs(runs) -> None:
    irt = sharpen.report(runs["null"], store=runs["store"]).irt
    assert irt is not None and irt.available
    assert [a.run_id for a in irt.agents] == [runs["reference"], runs["replay"], runs["null"]]
    assert irt.agents[2].this_run


def test_report_prints_the_section_and_json_holds_it(runs) -> None:
    res = cli("report", runs["replay"], cwd=runs["cwd"])
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "Ability (IRT): 2PL over 3 agent specs on 16 tasks, 95% CI" in out
    assert has_row(out, "1", "reference", runs["reference"], "[+", "100.0%", "16")
    assert has_row(out, "2", "bench-terse", runs["replay"], "(this run)", "[", "25.0%", "16")
    assert has_row(out, "3", "null", runs["null"], "[-", "0.0%", "16")
    assert "Hardest and most discriminating tasks (IRT)" in out and "1 of 3" in out
    res = cli("report", runs["replay"], "--json", cwd=runs["cwd"])
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)["irt"]
    assert [a["agent_name"] for a in data["agents"]] == ["reference", "bench-terse", "null"]
    assert all(a["low"] < a["theta"] < a["high"] for a in data["agents"])
    assert len(data["hardest"]) == TOP


def test_a_run_with_no_scored_task_is_not_placed(runs) -> None:
    store: Store = runs["store"]
    tasks = store.tasks_for(runs["replay"])
    spec = AgentSpec(name="unstarted")
    ref = store.get_run(runs["replay"]).manifest.env
    store.create_run(RunManifest(run_id="unstarted", env=ref, agent_hash=spec.hash(),
                                 task_ids=[t.id for t in tasks], epochs=1, seed=0,
                                 config_hash="unstarted"), spec, tasks)
    irt = sharpen.report("unstarted", store=store).irt
    assert irt is not None and not irt.available and "no scored task" in irt.note


def test_reports_stored_before_irt_still_read(runs) -> None:
    data = json.loads(sharpen.report(runs["replay"], store=runs["store"]).model_dump_json())
    del data["irt"]
    assert RunReport.model_validate(data).irt is None


def test_compare_prints_an_ability_difference_per_run(runs) -> None:
    rep = sharpen.compare(runs["null"], runs["replay"], runs["reference"], store=runs["store"])
    assert rep.irt is not None and rep.irt.model == "2pl" and rep.irt.tasks == 16
    b, c = rep.irt.differences
    assert (b.label_b, c.label_b) == ("B", "C")
    assert 0 < b.difference < c.difference and c.low > 0
    for d in (b, c):
        assert d.low < d.difference < d.high and d.se > 0
        assert d.difference == pytest.approx(d.theta_b - d.theta_a)
    res = cli("compare", runs["null"], runs["replay"], runs["reference"], cwd=runs["cwd"])
    assert res.returncode == 0, res.stderr
    assert "IRT ability (other − A; 2PL fit over the compared runs on 16 tasks" in res.stdout
    assert f"B vs A: {b.difference:+.2f} [{b.low:+.2f}, {b.high:+.2f}]" in res.stdout
    assert f"C vs A: {c.difference:+.2f} [{c.low:+.2f}, {c.high:+.2f}]" in res.stdout
    two = sharpen.compare(runs["null"], runs["reference"], store=runs["store"])
    assert two.irt is not None and two.irt.model == "1pl"  # two agents say little of discrimination
    assert two.irt.differences[0].low > 0
