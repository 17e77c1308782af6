"""Running agents on tasks: the Runner, its config, retries and summaries."""

from sharpen.run.config import RunConfig
from sharpen.run.retry import RetryingModel, RetryPolicy
from sharpen.run.runner import Runner
from sharpen.run.summary import RunSummary

__all__ = ["RetryPolicy", "RetryingModel", "RunConfig", "RunSummary", "Runner"]
