"""Item response theory (sharpen.stats.irt): recovery of simulated parameters, and the edges."""

from __future__ import annotations

import numpy as np
import pytest

from sharpen.stats.irt import Responses, fit


def simulate(model: str, tasks: int = 200, agents: int = 20, epochs: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, agents)
    b = rng.normal(0, 1.2, tasks)
    a = np.exp(rng.normal(0, 0.3, tasks)) if model == "2pl" else np.ones(tasks)
    p = 1 / (1 + np.exp(-a[None, :] * (theta[:, None] - b[None, :])))
    n = np.full((agents, tasks), epochs)
    s = rng.binomial(n, p)
    responses = Responses(agents=[f"agent{i}" for i in range(agents)],
                          tasks=[f"task{j}" for j in range(tasks)],
                          successes=s.tolist(), attempts=n.tolist())
    return responses, theta, b, a


@pytest.mark.parametrize(("model", "epochs"), [("1pl", 3), ("2pl", 8)])
def test_recovers_simulated_difficulties_and_abilities(model: str, epochs: int) -> None:
    # 200 tasks x 20 agents. With one attempt each a task's difficulty rests on 20 coin flips,
    # and the fit reaches a correlation of about 0.90; at 3 attempts 0.96 (1PL, 8 seeds:
    # 0.958 at worst), and the 2PL, with 200 discriminations more to fit, needs about 8.
    responses, theta, b, a = simulate(model, epochs=epochs)
    result = fit(responses, model)  # type: ignore[arg-type]
    assert result.converged
    est_theta = np.array([x.theta for x in result.abilities])
    est_b = np.array([t.difficulty for t in result.tasks])
    assert np.corrcoef(est_theta, theta)[0, 1] >= 0.95
    assert np.corrcoef(est_b, b)[0, 1] >= 0.95
    if model == "2pl":
        est_a = np.array([t.discrimination for t in result.tasks])
        assert np.corrcoef(est_a, a)[0, 1] > 0.3  # weakly identified from 60 trials per task
    else:
        assert all(t.discrimination == 1.0 for t in result.tasks)
    covered = np.mean([x.low <= t <= x.high for x, t in zip(result.abilities, theta, strict=True)])
    assert covered >= 0.85  # 95% Laplace intervals over 20 agents


def test_from_outcomes_with_missing_pairs_and_all_or_nothing_tasks() -> None:
    outcomes = [("strong", "easy", True), ("strong", "easy", True), ("strong", "hard", True),
                ("weak", "easy", True), ("weak", "hard", False), ("weak", "never", False),
                ("strong", "never", False)]
    responses = Responses.of(outcomes)
    assert responses.agents == ["strong", "weak"] and responses.tasks == ["easy", "hard", "never"]
    assert responses.attempts == [[2, 1, 1], [1, 1, 1]]
    result = fit(responses, "1pl")
    ability = {x.agent: x for x in result.abilities}
    difficulty = {t.task: t.difficulty for t in result.tasks}
    assert ability["strong"].theta > ability["weak"].theta
    assert difficulty["easy"] < difficulty["hard"] < difficulty["never"]
    assert all(np.isfinite(t.difficulty) for t in result.tasks)  # the prior keeps them finite
    assert ability["strong"].low < ability["strong"].theta < ability["strong"].high


def test_nothing_to_fit_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="at least one attempt"):
        fit(Responses(agents=[], tasks=[], successes=[], attempts=[]))


def test_from_stored_runs_counts_valid_trials_only() -> None:
    from sharpen.core.outcome import Outcome
    from sharpen.core.task import TaskSpec
    from sharpen.core.trajectory import Trajectory
    from sharpen.stats.taskdata import TaskTable, aggregate_trajectories

    def run(name: str, results: dict[str, list[Outcome]]) -> TaskTable:
        trajs = [Trajectory(task=TaskSpec(env="code", id=task), agent_hash=name, epoch=e, outcome=o)
                 for task, outs in results.items() for e, o in enumerate(outs)]
        return TaskTable.from_aggregate(aggregate_trajectories(name, trajs))

    ok, bad = Outcome(success=True), Outcome(success=False)
    infra = Outcome(success=False, error_kind="infra")  # not the agent's: left out
    tables = {"a": run("a", {"t1": [ok, ok], "t2": [ok, infra]}),
              "b": run("b", {"t1": [ok, bad], "t2": [bad, bad]})}
    responses = Responses.from_tables(tables)
    assert responses.agents == ["a", "b"] and sorted(responses.tasks) == ["t1", "t2"]
    row = dict(zip(responses.tasks, zip(responses.successes[0], responses.attempts[0], strict=True),
                   strict=True))
    assert row == {"t1": (2, 2), "t2": (1, 1)}
    ability = {x.agent: x.theta for x in fit(responses, "1pl").abilities}
    assert ability["a"] > ability["b"]


def test_ability_differences_have_delta_method_intervals_that_cover() -> None:
    from sharpen.stats.irt import Z95, ability_difference

    responses, theta, _, _ = simulate("1pl", epochs=3, seed=1)
    result = fit(responses, "1pl")
    cov = np.array(result.ability_cov)
    assert cov.shape == (20, 20) and np.allclose(cov, cov.T)
    assert np.allclose(np.sqrt(np.diag(cov)), [x.se for x in result.abilities])
    covered = 0
    for k in range(1, 20):
        d, se = ability_difference(result, 0, k)
        assert d == result.abilities[k].theta - result.abilities[0].theta
        # abilities fitted on the same tasks covary positively (they share the difficulties'
        # uncertainty), so their difference is surer than their SEs in quadrature say
        assert se < 0.8 * np.hypot(result.abilities[0].se, result.abilities[k].se)
        covered += d - Z95 * se <= theta[k] - theta[0] <= d + Z95 * se
    assert covered >= 16  # of 19 pairs, at 95%


@pytest.mark.parametrize("model", ["1pl", "2pl"])
def test_blockwise_covariance_equals_the_inverse_of_the_whole_hessian(model: str) -> None:
    from sharpen.stats.irt import _covariance, _hessian

    responses, _, _, _ = simulate(model, tasks=30, agents=6, epochs=3, seed=2)
    result = fit(responses, model)  # type: ignore[arg-type]
    theta = np.array([x.theta for x in result.abilities])
    b = np.array([t.difficulty for t in result.tasks])
    a = np.array([t.discrimination for t in result.tasks])
    s, n = np.array(responses.successes, float), np.array(responses.attempts, float)
    full = np.linalg.inv(_hessian(s, n, theta, b, a, model == "2pl"))
    cov, var_b = _covariance(s, n, theta, b, a, model == "2pl")
    assert np.allclose(cov, full[:6, :6], rtol=1e-9, atol=1e-12)
    assert np.allclose(var_b, np.diag(full)[6:36], rtol=1e-9, atol=1e-12)
    assert np.allclose([t.difficulty_se for t in result.tasks], np.sqrt(var_b))


def test_compare_abilities_skips_a_run_with_no_scored_task() -> None:
    from sharpen.core.outcome import Outcome
    from sharpen.core.task import TaskSpec
    from sharpen.core.trajectory import Trajectory
    from sharpen.stats.irt_runs import compare_abilities
    from sharpen.stats.taskdata import TaskTable, aggregate_trajectories

    def run(name: str, outcomes: list[Outcome]) -> TaskTable:
        trajs = [Trajectory(task=TaskSpec(env="code", id=f"t{i}"), agent_hash=name, outcome=o)
                 for i, o in enumerate(outcomes)]
        return TaskTable.from_aggregate(aggregate_trajectories(name, trajs))

    ok, bad, infra = Outcome(success=True), Outcome(success=False), Outcome(success=False,
                                                                             error_kind="infra")
    a, b = run("a", [ok, bad, bad, bad]), run("b", [ok, ok, ok, bad])
    rep = compare_abilities(["A", "B"], [a, b])
    assert rep is not None and rep.model == "1pl" and rep.tasks == 4
    assert rep.differences[0].difference > 0
    assert compare_abilities(["A", "B"], [a, run("b", [infra] * 4)]) is None
