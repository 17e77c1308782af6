"""RunConfig: everything that defines a run, and the hash that makes it resumable."""

from __future__ import annotations

from pydantic import BaseModel, Field

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.hashing import content_hash
from sharpen.core.registry import PluginRef
from sharpen.core.task import TaskSpec
from sharpen.runner.retry import RetryPolicy


class RunConfig(BaseModel):
    """AgentSpec × tasks × epochs on one environment."""

    env: PluginRef
    """The environment, as ``{name, args}``."""
    agent: AgentSpec
    """The agent under test."""
    tasks: list[TaskSpec]
    """Tasks, in order."""
    epochs: int = 1
    """Repetitions per task."""
    concurrency: int = 4
    """Episodes in flight at once."""
    seed: int = 0
    """Base seed; each (task, epoch) derives its own."""
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    """Retries of infra errors."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Free-form labels stored in the run manifest's ``extra`` (e.g. which improvement
    experiment and split a run belongs to); not part of the config hash."""

    def config_hash(self) -> str:
        """Identity of the work (not of how it is scheduled): equal hashes resume each other."""
        return content_hash({
            "env": self.env.model_dump(mode="json"),
            "agent": self.agent.hash(),
            "tasks": [t.hash() for t in self.tasks],
            "epochs": self.epochs,
            "seed": self.seed,
        })

    def attempt_seed(self, task: TaskSpec, epoch: int) -> int:
        """The sampling seed of one (task, epoch), independent of scheduling order."""
        return int(content_hash([self.seed, task.hash(), epoch]), 16) % (2**31)
