"""``check_env``: does an environment keep the :class:`~sharpen.envs.base.Environment`
contract, the way Gymnasium's ``check_env`` asks of a Gymnasium env?

Checks, in order (a check that cannot run because an earlier one failed is left out):

- ``build`` — the registry builds it from ``{name, args}`` (the contract's members present);
- ``tools`` / ``tool-schema`` — tool names are unique, each ``parameters`` is a valid JSON
  Schema (draft 2020-12) of type object, and a ``text_argument`` is one of its properties;
- ``describe`` — ``describe()`` returns an :class:`~sharpen.envs.base.EnvInfo`;
- ``list-tasks`` — ``list_tasks(limit, seed)`` gives TaskSpecs, at most ``limit``, no
  duplicates, and the same list twice, from the same instance and from a fresh one;
- ``reset`` — ``reset`` returns ``(str, dict)``, and a fresh instance gives a byte-identical
  observation and info for the same task;
- ``null-agent`` / ``reference-agent`` — through the real :class:`~sharpen.runner.Runner`
  into a temporary SQLite store, the ``null`` agent succeeds on at most 5% of the tasks and
  the ``reference`` agent on at least 95% of those the environment gives a reference for;
- ``step`` / ``replay`` — every stored trajectory replays on a fresh instance: each
  ``step`` returns a StepResult, with the stored observation byte for byte, the stored
  reward and flags, and the same final outcome;
- ``verifier`` — the verifier registered under the environment's name re-scores every
  stored trajectory to the outcome the environment gave (success and reward).
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from sharpen.checks.report import CheckReport, explain, plugin_ref
from sharpen.checks.tools import check_tools
from sharpen.core import discovery
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import UserError
from sharpen.core.outcome import Outcome
from sharpen.core.registry import REGISTRY, PluginRef, Registry
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Trajectory
from sharpen.envs.base import ENV, VERIFIER, EnvInfo, Environment, StepResult
from sharpen.runner.config import RunConfig
from sharpen.runner.runner import Runner
from sharpen.store import Store

NULL_MAX = 0.05
"""The most the ``null`` agent (an empty answer) may score."""
REFERENCE_MIN = 0.95
"""The least the ``reference`` agent must score on tasks with a reference."""
DETERMINISM = ("depend only on the task and its seed: draw from a random.Random(task.seed), "
               "never the global random module, the clock or a temporary path")


def first_difference(stored: str, replayed: str) -> str:
    """Where two texts first differ, with a little of each around it."""
    i = next((k for k, (a, b) in enumerate(zip(stored, replayed, strict=False)) if a != b),
             min(len(stored), len(replayed)))
    return (f"at character {i}: stored {stored[max(0, i - 20):i + 30]!r}, "
            f"replayed {replayed[max(0, i - 20):i + 30]!r}")


def _canonical(info: dict[str, Any]) -> str:
    return json.dumps(info, sort_keys=True, default=repr)


def _temp_path(value: Any) -> bool:
    """Whether ``value`` is a path under the temporary folder."""
    return isinstance(value, str) and value.startswith(os.path.join(tempfile.gettempdir(), ""))


class _EnvChecker:
    """The checks of one environment reference (see the module doc)."""

    def __init__(self, ref: PluginRef, registry: Registry, report: CheckReport) -> None:
        self.ref = ref
        self.registry = registry
        self.report = report
        self.described: str | None = None
        """The name ``describe()`` gave."""

    def fresh(self) -> Environment:
        return self.registry.create(ENV, self.ref)

    async def run(self, n_tasks: int, seed: int) -> None:
        r = self.report
        try:
            env = self.fresh()
        except Exception as exc:  # noqa: BLE001 — every failure becomes a problem, not a crash
            r.fail("build", f"cannot build the environment: {explain(exc)}")
            return
        try:
            r.pass_("build", f"{type(env).__qualname__} meets the Environment contract")
            check_tools(env.tools, r)
            self.described = self.describe(env)
            tasks = await self.list_tasks(env, n_tasks, seed)
        finally:
            await env.close()
        if not tasks:
            return
        referenced = await self.resets(tasks)
        if referenced is None:
            return
        with tempfile.TemporaryDirectory(prefix="sharpen-check-") as tmp:
            store = Store(f"sqlite:///{Path(tmp) / 'check.db'}")
            try:
                stored = await self.agents(store, tasks, referenced)
            finally:
                store.close()
        if stored:
            await self.replay(stored)
            await self.verifier(stored)

    # -- static checks ----------------------------------------------------------------------

    def describe(self, env: Environment) -> str | None:
        """The name ``describe()`` gives, ``None`` when it fails."""
        try:
            info = env.describe()
        except Exception as exc:  # noqa: BLE001
            self.report.fail("describe", f"describe() raised {explain(exc)}")
            return None
        if not isinstance(info, EnvInfo):
            self.report.fail("describe", f"describe() returned {type(info).__name__}, not EnvInfo; "
                             "return sharpen.envs.base.EnvInfo (BaseEnvironment gives a default)")
            return None
        self.report.pass_("describe", f"name {info.name!r}")
        return info.name

    async def list_tasks(self, env: Environment, n: int, seed: int) -> list[TaskSpec]:
        r = self.report
        call = f"list_tasks(limit={n}, seed={seed})"
        try:
            first = env.list_tasks(limit=n, seed=seed)
            second = env.list_tasks(limit=n, seed=seed)
            other = self.fresh()
            try:
                third = other.list_tasks(limit=n, seed=seed)
            finally:
                await other.close()
        except Exception as exc:  # noqa: BLE001
            r.fail("list-tasks", f"{call} raised {explain(exc)}")
            return []
        if not isinstance(first, list) or not all(isinstance(t, TaskSpec) for t in first):
            r.fail("list-tasks", f"{call} returned {type(first).__name__} of "
                   f"{sorted({type(t).__name__ for t in first or []})}: return a list of TaskSpec")
            return []
        if not first:
            r.fail("list-tasks", f"{call} returned no tasks: list at least one")
            return []
        if len(first) > n:
            r.fail("list-tasks", f"{call} returned {len(first)} tasks: honour limit")
        hashes = [t.hash() for t in first]
        if len(set(hashes)) != len(hashes):
            dup = next(t.id for t in first if hashes.count(t.hash()) > 1)
            r.fail("list-tasks", f"{call} lists task {dup!r} twice: the runner keys episodes by "
                   "(task, spec, epoch), so each task must differ in id, seed or knobs")
        for label, again in (("a second call", second), ("a fresh instance", third)):
            if [t.model_dump(mode="json") for t in again] != [t.model_dump(mode="json") for t in first]:
                ids = [t.id for t in first][:3], [t.id for t in again][:3]
                r.fail("list-tasks", f"nondeterministic task generator: {call} gave different tasks "
                       f"on {label} (ids {ids[0]} then {ids[1]}); tasks must {DETERMINISM}")
                return []
        if not r.failed("list-tasks"):
            r.pass_("list-tasks", f"{len(first)} task(s), the same on a second call and a fresh "
                    "instance")
        return first[:n]

    # -- episodes ---------------------------------------------------------------------------

    async def _reset(self, task: TaskSpec) -> tuple[str, dict[str, Any], bool]:
        """A fresh instance's reset of ``task``, and whether it gives a reference for it."""
        env = self.fresh()
        try:
            obs, info = await env.reset(task)
            actions = env.reference_actions(task)
            has_ref = actions is not None or env.reference_solution(task) is not None
            return obs, info, has_ref
        finally:
            await env.close()

    async def resets(self, tasks: list[TaskSpec]) -> dict[str, bool] | None:
        """Reset each task on two fresh instances; task hash -> has a reference (``None``
        when reset fails)."""
        r = self.report
        referenced: dict[str, bool] = {}
        faults: list[str] = []
        own_paths: set[str] = set()
        for task in tasks:
            try:
                got = await self._reset(task)
                again = await self._reset(task)
            except Exception as exc:  # noqa: BLE001
                r.fail("reset", f"reset of task {task.id!r} raised {explain(exc)}")
                return None
            obs, info, has_ref = got
            if not isinstance(obs, str) or not isinstance(info, dict):
                r.fail("reset", f"reset of task {task.id!r} returned ({type(obs).__name__}, "
                       f"{type(info).__name__}): return (observation: str, info: dict)")
                return None
            referenced[task.hash()] = has_ref
            if obs != again[0]:
                faults.append(f"task {task.id!r} gets different observations "
                              f"({first_difference(obs, again[0])})")
                continue
            keys = sorted(k for k in {*info, *again[1]}
                          if _canonical({k: info.get(k)}) != _canonical({k: again[1].get(k)}))
            # A temporary file the instance owns (toolshop's database) differs by nature.
            own = [k for k in keys if _temp_path(info.get(k)) and _temp_path(again[1].get(k))]
            own_paths |= set(own)
            if set(keys) - set(own):
                faults.append(f"task {task.id!r} gets different info (keys "
                              f"{sorted(set(keys) - set(own))})")
        if faults:
            r.fail("reset", f"two fresh instances reset {len(faults)} of {len(tasks)} task(s) "
                   f"differently; first, {faults[0]}; the reset must {DETERMINISM}")
        else:
            r.pass_("reset", f"(str, dict), byte-identical on a fresh instance for {len(tasks)} "
                    "task(s)")
        if own_paths:
            r.note("reset", f"info {', '.join(sorted(own_paths))} names a temporary path of the "
                   "instance, which differs per instance; not compared")
        return referenced

    async def _run(self, store: Store, agent: str, tasks: list[TaskSpec]) -> list[Trajectory]:
        spec = AgentSpec(name=f"check-{agent}", agent=PluginRef(name=agent))
        config = RunConfig(env=self.ref, agent=spec, tasks=tasks)
        summary = await Runner(store, progress=False, registry=self.registry).run(config)
        return list(store.iter_trajectories(summary.run_id))

    async def agents(self, store: Store, tasks: list[TaskSpec],
                     referenced: dict[str, bool]) -> list[Trajectory]:
        """The null and reference runs; every trajectory stored (with an outcome)."""
        stored: list[Trajectory] = []
        with_ref = [t for t in tasks if referenced[t.hash()]]
        for agent, todo in (("null", tasks), ("reference", with_ref)):
            check = f"{agent}-agent"
            if not todo:
                self.report.note(check, "no reference: the environment gives neither "
                                 "reference_actions nor reference_solution for these tasks")
                continue
            try:
                trajs = await self._run(store, agent, todo)
            except Exception as exc:  # noqa: BLE001
                self.report.fail(check, f"running the {agent} agent failed: {explain(exc)}")
                continue
            self._score(check, agent, trajs)
            stored += [t for t in trajs if t.outcome is not None and t.outcome.counts]
        return stored

    def _score(self, check: str, agent: str, trajs: list[Trajectory]) -> None:
        r = self.report
        broken = [t for t in trajs if t.outcome is None or not t.outcome.counts]
        for t in broken[:1]:
            error = (t.outcome.error or "").strip().splitlines() if t.outcome else []
            kind = t.outcome.error_kind if t.outcome else "none"
            r.fail(check, f"{len(broken)} of {len(trajs)} {agent} episode(s) ended in a "
                   f"{kind} error; first, task {t.task.id!r}: "
                   f"{error[-1] if error else 'no outcome'}; the environment must not raise on "
                   "a well-formed action")
        counted = [t for t in trajs if t.outcome is not None and t.outcome.counts]
        if not counted:
            return
        wins = [t for t in counted if t.outcome is not None and t.outcome.success]
        rate = len(wins) / len(counted)
        if agent == "null" and rate > NULL_MAX:
            r.fail(check, f"the null agent (an empty answer) succeeds on {len(wins)}/{len(counted)} "
                   f"tasks (first {wins[0].task.id!r}), over {NULL_MAX:.0%}: the checker accepts "
                   "an answer that does nothing; make success require solving the task")
        elif agent == "reference" and rate < REFERENCE_MIN:
            lost = next(t for t in counted if t.outcome is not None and not t.outcome.success)
            evidence = (lost.outcome.evidence if lost.outcome else "").strip()[:200]
            r.fail(check, f"the reference agent fails {len(counted) - len(wins)}/{len(counted)} "
                   f"tasks (first {lost.task.id!r}: {evidence or 'no evidence'}), under "
                   f"{REFERENCE_MIN:.0%}: reference_actions/reference_solution must solve the "
                   "task, and the checker must accept a right answer")
        elif not broken:
            r.pass_(check, f"{agent} agent succeeds on {len(wins)}/{len(counted)} task(s)")

    async def _replay_one(self, t: Trajectory) -> str | None:
        """Why ``t`` does not replay on a fresh instance, or ``None`` when it does."""
        env = self.fresh()
        try:
            obs, _ = await env.reset(t.task)
            first = next((m.content for m in t.messages if m.role == "user"), None)
            if first is not None and obs != first:
                return f"task {t.task.id!r}: the reset observation differs {first_difference(first, obs)}"
            for step in t.steps:
                if step.action is None:
                    continue
                result = await env.step(step.action)
                if not isinstance(result, StepResult):
                    self.report.fail("step", f"step returned {type(result).__name__}, not StepResult; "
                                     "return sharpen.envs.base.StepResult(observation=..., ...)")
                    return None
                where = f"task {t.task.id!r} step {step.index}"
                if result.observation != (step.observation or ""):
                    return (f"{where}: the observation differs "
                            f"{first_difference(step.observation or '', result.observation)}")
                got = (result.reward, result.terminated, result.truncated)
                if got != (step.reward, step.terminated, step.truncated):
                    return (f"{where}: (reward, terminated, truncated) is {got}, stored "
                            f"{(step.reward, step.terminated, step.truncated)}")
            outcome = await env.outcome()
            if not isinstance(outcome, Outcome):
                self.report.fail("step", f"outcome() returned {type(outcome).__name__}, not Outcome")
                return None
            stored = t.outcome
            if stored is not None and (outcome.success, outcome.reward) != (stored.success, stored.reward):
                return (f"task {t.task.id!r}: the replayed outcome is success={outcome.success} "
                        f"reward={outcome.reward}, stored success={stored.success} "
                        f"reward={stored.reward}")
            return None
        finally:
            await env.close()

    async def replay(self, stored: list[Trajectory]) -> None:
        """Replay every stored trajectory's actions on a fresh instance."""
        r = self.report
        faults: list[str] = []
        for t in stored:
            try:
                why = await self._replay_one(t)
            except Exception as exc:  # noqa: BLE001
                why = f"task {t.task.id!r}: replaying raised {explain(exc)}"
            if why is not None:
                faults.append(why)
        if faults:
            r.fail("replay", f"{len(faults)} of {len(stored)} stored trajectories do not replay "
                   f"byte-identically on a fresh instance; first, {faults[0]}; observations must "
                   f"{DETERMINISM}")
        elif not r.failed("step"):
            r.pass_("replay", f"{len(stored)} stored trajectories replay byte-identically")

    def _verifier_name(self) -> str | None:
        """The name the environment's verifier is registered under, if any."""
        name: str | None = self.ref.name
        if discovery.is_reference(self.ref.name):
            # A reference names the class, not a verifier: look under the name it describes.
            name = self.described
        return name if name and name in self.registry.names(VERIFIER) else None

    async def verifier(self, stored: list[Trajectory]) -> None:
        """Re-score every stored trajectory with the registered verifier."""
        r = self.report
        name = self._verifier_name()
        if name is None:
            r.note("verifier", f"no verifier registered under {self.ref.name!r}: "
                   "stored trajectories of this environment cannot be re-scored offline")
            return
        try:
            verifier = self.registry.create(VERIFIER, PluginRef(name=name, args=self.ref.args))
        except UserError as exc:
            r.fail("verifier", f"cannot build verifier {name!r} with the environment's args: {exc}; "
                   "a verifier takes the same arguments as its environment")
            return
        faults: list[str] = []
        for t in stored:
            assert t.outcome is not None
            try:
                got = await verifier.score(t)
            except Exception as exc:  # noqa: BLE001
                faults.append(f"task {t.task.id!r}: score raised {explain(exc)}")
                continue
            if (got.success, got.reward) != (t.outcome.success, t.outcome.reward):
                faults.append(f"task {t.task.id!r}: verifier says success={got.success} "
                              f"reward={got.reward}, the environment said "
                              f"success={t.outcome.success} reward={t.outcome.reward}")
        if faults:
            r.fail("verifier", f"verifier {name!r} disagrees with the environment on "
                   f"{len(faults)} of {len(stored)} stored trajectories; first, {faults[0]}; the "
                   "verifier must compute the verdict env.outcome() gave, from the trajectory alone")
        else:
            r.pass_("verifier", f"{name!r} re-scores {len(stored)} stored trajectories to the "
                    "same outcome")


async def acheck_env(
    env: str | PluginRef | dict[str, Any], *, args: dict[str, Any] | None = None,
    registry: Registry = REGISTRY, tasks: int = 5, seed: int = 0,
) -> CheckReport:
    """Check the environment ``env`` (a registered name, ``module:Name`` / ``file.py:Name``
    reference or ``{name, args}``; ``args`` are merged over its own) on ``tasks`` tasks of
    ``list_tasks(seed=seed)``. Never raises for a failed check: see the report's
    ``problems``."""
    ref = plugin_ref(env, args)
    report = CheckReport(kind="env", name=ref.name)
    await _EnvChecker(ref, registry, report).run(tasks, seed)
    return report


def check_env(
    env: str | PluginRef | dict[str, Any], *, args: dict[str, Any] | None = None,
    registry: Registry = REGISTRY, tasks: int = 5, seed: int = 0,
) -> CheckReport:
    """:func:`acheck_env` from synchronous code (``await acheck_env(...)`` inside a running
    event loop)."""
    return asyncio.run(acheck_env(env, args=args, registry=registry, tasks=tasks, seed=seed))
