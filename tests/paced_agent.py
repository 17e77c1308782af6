"""An agent plug-in for tests that must catch an episode in flight: the reference agent,
holding each episode open for ``hold_s`` seconds first, with a file in ``marks`` while it
does (named ``<pid>-<random>``, holding the task id). A test that sees the file knows which
process is inside which episode, and can kill that process's node then."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

from sharpen.agents.baselines import ReferenceAgent
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.trajectory import Trajectory
from sharpen.envs.base import Environment
from sharpen.models.base import ChatModel


class PacedReference(ReferenceAgent):
    def __init__(self, marks: str, hold_s: float = 1.0) -> None:
        self.marks, self.hold_s = Path(marks), float(hold_s)

    async def run(self, env: Environment, model: ChatModel, spec: AgentSpec,
                  trajectory: Trajectory) -> None:
        mark = self.marks / f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        mark.write_text(trajectory.task.id)
        try:
            await asyncio.sleep(self.hold_s)
            await super().run(env, model, spec, trajectory)
        finally:
            mark.unlink(missing_ok=True)


def in_flight(marks: Path, pids: set[int]) -> list[str]:
    """Task ids of the episodes the processes ``pids`` are inside now."""
    found = []
    for mark in marks.iterdir():
        if int(mark.name.split("-")[0]) in pids:
            try:
                found.append(mark.read_text())
            except FileNotFoundError:  # that episode ended meanwhile
                continue
    return [task for task in found if task]
