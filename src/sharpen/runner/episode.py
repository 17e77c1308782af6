"""One episode: an agent on one (task, epoch) of a run, scored, never raising for the agent.

:func:`play_episode` is what every executor runs for each episode — the ``local`` executor in
the runner's process, the ``ray`` executor on a worker — so an episode is played, scored and
classified the same way wherever it runs:

- an :class:`~sharpen.core.errors.InfraError` whose retries ran out is stored as ``infra``;
- an :class:`~sharpen.core.errors.AgentError` (the agent's own failure: an external agent
  program that crashed) as ``agent``;
- any other exception of the harness (environment or agent code) as ``env``: the agent is
  never blamed for sharpen's failures;
- a :class:`~sharpen.core.errors.UserError` and a cancellation propagate (they stop the run).
"""

from __future__ import annotations

import asyncio
import random
import traceback
from contextlib import nullcontext
from datetime import UTC, datetime

from sharpen.agents.base import AGENT
from sharpen.agents.confidence import attach as attach_confidence
from sharpen.core.episode_end import playing
from sharpen.core.errors import AgentError, InfraError, UserError
from sharpen.core.outcome import Outcome
from sharpen.core.registry import Registry
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Trajectory
from sharpen.envs.base import ENV
from sharpen.models.base import ChatModel
from sharpen.runner.config import RunConfig
from sharpen.runner.progress import RunProgress
from sharpen.runner.retry import RetryingModel


async def play_episode(
    config: RunConfig, run_id: str, model: ChatModel, task: TaskSpec, epoch: int,
    registry: Registry, bar: RunProgress | None = None,
) -> Trajectory:
    """Play epoch ``epoch`` of ``task`` with ``model`` (retried per ``config.retry``), the
    agent and environment built from ``registry``; the finished trajectory, outcome set.
    ``bar`` shows the episode in flight (steps, tokens, activity) when given."""
    seed = config.attempt_seed(task, epoch)
    traj = Trajectory(run_id=run_id, task=task, agent_hash=config.agent.hash(), epoch=epoch,
                      seed=seed)

    def count_retry(_: InfraError) -> None:
        traj.infra_retries += 1

    retrying: ChatModel = RetryingModel(model, config.retry, random.Random(seed),
                                        on_retry=count_retry)
    agent = registry.create(AGENT, config.agent.agent)
    env = registry.create(ENV, config.env)
    try:
        # Steps, tokens and activity on the bar (when shown).
        with nullcontext() if bar is None else bar.episode(traj):
            # What the model keeps for the agent's next call (a server's place) goes on as
            # soon as the agent is done, not after scoring.
            with playing():
                await agent.run(env, retrying if bar is None else bar.metered(retrying),
                                config.agent, traj)
            # The agent's stated confidence, if it gave one, for calibration.
            traj.outcome = attach_confidence(await env.outcome(), traj)
    except InfraError as exc:
        traj.outcome = Outcome(success=False, error_kind="infra", error=str(exc)[:2000])
    except AgentError as exc:  # the agent's own failure (an external program crashed)
        traj.outcome = Outcome(success=False, error_kind="agent", error=str(exc)[:2000])
    except (UserError, asyncio.CancelledError):
        raise
    except Exception as exc:  # noqa: BLE001 — a harness bug must not be the agent's fault
        tb = "".join(traceback.format_exception(exc, limit=-3))
        traj.outcome = Outcome(success=False, error_kind="env", error=tb[-2000:])
    finally:
        await env.close()
    if traj.ended_at is None:
        traj.ended_at = datetime.now(UTC)
    return traj
