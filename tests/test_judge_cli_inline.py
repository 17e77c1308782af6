"""``sharpen run ... --judge J``: the finished run is judged in the same command, with the real
embedded model as judge, and the judge's records are stored like ``sharpen judge``'s."""

from __future__ import annotations

from pathlib import Path

from conftest import sharpen

from sharpen.store import Store


def test_run_with_judge_stores_a_judgement_and_a_score_per_trajectory(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'sharpen.db'}")
    env = {"SHARPEN_STORE": store.url}
    res = sharpen("run", "sql", "--agent-name", "reference", "--tasks", "2", "--judge",
                  "rubric:solved", "--judge-model", "local", "--no-progress", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    [run] = store.list_runs()
    run_id = run.manifest.run_id
    assert "judged run " + run_id[:12] in res.stdout and "rubric:solved" in res.stdout
    assert "Judge scores" in res.stdout and "solved" in res.stdout
    trajectories = list(store.iter_trajectories(run_id, with_steps=False))
    judgements = store.judgements(run_id)
    assert len(trajectories) == 2 and len(judgements) == 2
    assert {j.trajectory_id for j in judgements} == {t.id for t in trajectories}
    assert all(j.judge == "rubric:solved" and j.calls == [] for j in judgements)
    for t in trajectories:
        records = [f for f in t.feedback if f.source == "judge"]
        judgement = next(j for j in judgements if j.trajectory_id == t.id)
        if judgement.status == "ok":  # a reply that never parsed is a judge error, no record
            [fb] = records
            assert fb.name == "solved" and isinstance(fb.value, bool)
            assert fb.call_id == judgement.id and fb.author.startswith("rubric:solved@")
    assert any(j.status == "ok" for j in judgements)


def test_bad_judge_flags_fail_before_any_episode(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'sharpen.db'}")
    env = {"SHARPEN_STORE": store.url}
    pairwise = sharpen("run", "sql", "--agent-name", "reference", "--tasks", "1", "--judge",
                       "pairwise", "--judge-model", "local", cwd=tmp_path, env=env)
    assert pairwise.returncode == 2 and "--versus B" in pairwise.stderr
    no_model = sharpen("run", "sql", "--agent-name", "reference", "--tasks", "1", "--judge",
                       "rubric:solved", cwd=tmp_path, env=env)
    assert no_model.returncode == 2 and "--judge-model" in no_model.stderr
    assert "Traceback" not in pairwise.stderr + no_model.stderr
    assert store.list_runs() == []
