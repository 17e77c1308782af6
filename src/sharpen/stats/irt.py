"""Item response theory over stored outcomes: task difficulty and discrimination, agent ability.

The 2PL model says agent ``i`` solves task ``j`` with probability
``sigmoid(a_j * (theta_i - b_j))``: ``theta`` is the agent's ability, ``b`` the task's
difficulty (the ability at which it is solved half the time) and ``a`` its discrimination (how
sharply it separates weaker from stronger agents; 1PL, the Rasch model, fixes ``a = 1``).
Repeated attempts count as binomial trials of the same pair.

Fitted by maximum a posteriori with weak priors — ``theta ~ N(0, 1)`` (which also fixes the
scale's origin and unit), ``b ~ N(0, 2^2)``, ``log a ~ N(0, 0.5^2)`` — so that a task every
agent solved (or none did) gets a finite difficulty instead of an infinite one; L-BFGS with
the analytic gradient (``scipy.optimize``). Standard errors are the Laplace approximation: the
square roots of the diagonal of the inverse Hessian of the negative log posterior at the fit
(every parameter's uncertainty, cross-terms included), computed blockwise (see
:func:`_covariance`); intervals are estimate ± 1.96 SE.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import BaseModel

if TYPE_CHECKING:
    from sharpen.stats.taskdata import TaskTable

IRTModel = Literal["1pl", "2pl"]

Z95 = 1.959963984540054
THETA_SD = 1.0
B_SD = 2.0
LOG_A_SD = 0.5


class Ability(BaseModel):
    """One agent's estimated ability."""

    agent: str
    theta: float
    se: float
    low: float
    high: float
    attempts: int
    """Attempts of this agent in the matrix."""


class TaskParams(BaseModel):
    """One task's estimated difficulty and discrimination."""

    task: str
    difficulty: float
    difficulty_se: float
    discrimination: float
    """1.0 in the 1PL model."""
    attempts: int
    solved: int


class IRTFit(BaseModel):
    """A fitted IRT model: abilities and task parameters with intervals."""

    model: IRTModel
    abilities: list[Ability]
    tasks: list[TaskParams]
    log_likelihood: float
    converged: bool
    ability_cov: list[list[float]] = []
    """The abilities' Laplace covariance (agents × agents, in ``abilities`` order): what
    :func:`ability_difference` needs, since abilities fitted on the same tasks covary."""


class Responses(BaseModel):
    """Successes and attempts per (agent, task) pair; pairs never attempted are absent."""

    agents: list[str]
    tasks: list[str]
    successes: list[list[int]]
    attempts: list[list[int]]

    @classmethod
    def of(cls, outcomes: Iterable[tuple[str, str, bool]]) -> Responses:
        """From ``(agent, task, success)`` triples, one per attempt."""
        cells: dict[tuple[str, str], list[int]] = {}
        agents: dict[str, None] = {}
        tasks: dict[str, None] = {}
        for agent, task, ok in outcomes:
            agents.setdefault(agent)
            tasks.setdefault(task)
            cell = cells.setdefault((agent, task), [0, 0])
            cell[0] += int(ok)
            cell[1] += 1
        a, t = list(agents), list(tasks)
        succ = [[cells.get((x, y), [0, 0])[0] for y in t] for x in a]
        att = [[cells.get((x, y), [0, 0])[1] for y in t] for x in a]
        return cls(agents=a, tasks=t, successes=succ, attempts=att)

    @classmethod
    def from_tables(cls, tables: Mapping[str, TaskTable]) -> Responses:
        """From stored runs, one :class:`~sharpen.stats.taskdata.TaskTable` per agent label:
        a task's valid trials and successes (errored attempts are not the agent's and are
        left out, as in every rate). Tasks are matched by id across runs."""
        outcomes: list[tuple[str, str, bool]] = []
        for agent, table in tables.items():
            for task, n, c in zip(table.task_id, table.n, table.c, strict=True):
                outcomes += [(agent, task, True)] * int(c) + [(agent, task, False)] * int(n - c)
        return cls.of(outcomes)


def fit(responses: Responses, model: IRTModel = "2pl", max_iter: int = 500) -> IRTFit:
    """The MAP fit of ``model`` to ``responses`` (see the module docstring). ``ValueError``
    when there is nothing to fit (no agent or no task with an attempt)."""
    # Imported here: scipy takes up to a second to import on a loaded machine, and a report
    # that finds no other run to fit with must not pay for it.
    from scipy.optimize import minimize
    from scipy.special import expit

    s = np.asarray(responses.successes, dtype=float)
    n = np.asarray(responses.attempts, dtype=float)
    n_agents, n_tasks = n.shape if n.size else (0, 0)
    if n_agents == 0 or n_tasks == 0 or n.sum() == 0:
        raise ValueError("IRT needs at least one attempt of one agent on one task")
    two = model == "2pl"

    def unpack(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        theta, b = x[:n_agents], x[n_agents:n_agents + n_tasks]
        log_a = x[n_agents + n_tasks:] if two else np.zeros(n_tasks)
        return theta, b, log_a

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        theta, b, log_a = unpack(x)
        a = np.exp(log_a)
        z = a[None, :] * (theta[:, None] - b[None, :])
        p = expit(z)
        # log-likelihood of binomial cells: s log p + (n - s) log(1 - p), stable form
        ll = np.sum(s * z - n * np.logaddexp(0.0, z))
        prior = (np.sum(theta**2) / THETA_SD**2 + np.sum(b**2) / B_SD**2
                 + (np.sum(log_a**2) / LOG_A_SD**2 if two else 0.0)) / 2
        r = s - n * p  # d ll / d z
        g_theta = (r * a[None, :]).sum(axis=1) - theta / THETA_SD**2
        g_b = -(r * a[None, :]).sum(axis=0) - b / B_SD**2
        grads = [g_theta, g_b]
        if two:
            g_log_a = (r * (theta[:, None] - b[None, :])).sum(axis=0) * a - log_a / LOG_A_SD**2
            grads.append(g_log_a)
        return -(ll - prior), -np.concatenate(grads)

    x0 = np.zeros(n_agents + n_tasks + (n_tasks if two else 0))
    result = minimize(objective, x0, jac=True, method="L-BFGS-B", options={"maxiter": max_iter})
    theta, b, log_a = unpack(result.x)
    a = np.exp(log_a)
    z = a[None, :] * (theta[:, None] - b[None, :])
    ll = float(np.sum(s * z - n * np.logaddexp(0.0, z)))
    cov, var_b = _covariance(s, n, theta, b, a, two)
    se_theta, se_b = np.sqrt(np.diag(cov)), np.sqrt(var_b)
    abilities = [
        Ability(agent=name, theta=float(t), se=float(e), low=float(t - Z95 * e),
                high=float(t + Z95 * e), attempts=int(n[i].sum()))
        for i, (name, t, e) in enumerate(zip(responses.agents, theta, se_theta, strict=True))
    ]
    tasks = [
        TaskParams(task=name, difficulty=float(bj), difficulty_se=float(e),
                   discrimination=float(aj), attempts=int(n[:, j].sum()), solved=int(s[:, j].sum()))
        for j, (name, bj, e, aj) in enumerate(zip(responses.tasks, b, se_b, a, strict=True))
    ]
    return IRTFit(model=model, abilities=abilities, tasks=tasks, log_likelihood=ll,
                  converged=bool(result.success),
                  ability_cov=cov.tolist())


def ability_difference(result: IRTFit, a: int, b: int) -> tuple[float, float]:
    """``theta_b - theta_a`` of agents at positions ``a`` and ``b`` of ``result.abilities``,
    and its standard error by the delta method (exact here: the difference is linear),
    ``sqrt(var_a + var_b - 2 cov_ab)`` from the fit's Laplace covariance."""
    cov = result.ability_cov
    diff = result.abilities[b].theta - result.abilities[a].theta
    var = cov[a][a] + cov[b][b] - 2 * cov[a][b]
    return diff, float(np.sqrt(max(var, 0.0)))


def _covariance(s: np.ndarray, n: np.ndarray, theta: np.ndarray, b: np.ndarray, a: np.ndarray,
                two: bool) -> tuple[np.ndarray, np.ndarray]:
    """The abilities' covariance (agents × agents) and the difficulties' variances: those
    blocks of the inverse of :func:`_hessian`, by the Schur complement of its task block.
    Abilities do not interact with each other and tasks only within a task (``b_j``, and
    ``log a_j`` under the 2PL), so with ``H = [[D, C], [C^T, K]]`` (``D`` diagonal, ``K``
    block-diagonal) the abilities' covariance is ``S^-1`` with ``S = D - C K^-1 C^T`` and a
    task's block is ``K_j^-1 + K_j^-1 C_j^T S^-1 C_j K_j^-1``: O(agents² × tasks), where
    inverting the whole Hessian is O((agents + 2 tasks)³)."""
    from scipy.special import expit

    z = a[None, :] * (theta[:, None] - b[None, :])
    p = expit(z)
    w, r = n * p * (1 - p), s - n * p
    wa2 = w * a[None, :] ** 2
    d = wa2.sum(axis=1) + 1 / THETA_SD**2
    k_bb = wa2.sum(axis=0) + 1 / B_SD**2
    if two:
        k_ll = (w * z**2 - r * z).sum(axis=0) + 1 / LOG_A_SD**2
        k_bl = ((r - w * z) * a[None, :]).sum(axis=0)
        k = np.stack([np.stack([k_bb, k_bl], -1), np.stack([k_bl, k_ll], -1)], -2)  # (T, 2, 2)
        c = np.stack([-wa2, (w * z - r) * a[None, :]], -1)  # (A, T, 2)
    else:
        k, c = k_bb[:, None, None], -wa2[..., None]
    k_inv = np.linalg.inv(k)
    m = np.einsum("atk,tkl->atl", c, k_inv)  # C_j K_j^-1
    cov = np.linalg.inv(np.diag(d) - np.einsum("atk,btk->ab", m, c))
    m0 = m[:, :, 0]
    var_b = k_inv[:, 0, 0] + (m0 * (cov @ m0)).sum(axis=0)
    return cov, var_b


def _hessian(s: np.ndarray, n: np.ndarray, theta: np.ndarray, b: np.ndarray, a: np.ndarray,
             two: bool) -> np.ndarray:
    """The whole Hessian (what :func:`_covariance` inverts blockwise; tests check it against
    this). The Hessian of the negative log posterior in (theta, b[, log a]), from the cells'
    ``z = a (theta - b)``: ``-sum(-w grad z grad z^T + r hess z)`` with ``w = n p (1 - p)``
    and ``r = s - n p``, plus the priors' precisions."""
    from scipy.special import expit

    n_agents, n_tasks = n.shape
    z = a[None, :] * (theta[:, None] - b[None, :])
    p = expit(z)
    w, r = n * p * (1 - p), s - n * p
    a2 = a[None, :] ** 2
    size = n_agents + n_tasks + (n_tasks if two else 0)
    h = np.zeros((size, size))
    ti, bj = np.arange(n_agents), n_agents + np.arange(n_tasks)
    h[ti, ti] = (w * a2).sum(axis=1) + 1 / THETA_SD**2
    h[bj, bj] = (w * a2).sum(axis=0) + 1 / B_SD**2
    h[:n_agents, n_agents:n_agents + n_tasks] = -(w * a2)
    if two:
        lj = n_agents + n_tasks + np.arange(n_tasks)
        h[lj, lj] = (w * z**2 - r * z).sum(axis=0) + 1 / LOG_A_SD**2
        h[:n_agents, n_agents + n_tasks:] = (w * z - r) * a[None, :]
        h[bj, lj] = ((r - w * z) * a[None, :]).sum(axis=0)
    upper = np.triu(h, 1)
    return h + upper.T
