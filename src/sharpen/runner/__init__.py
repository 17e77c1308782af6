"""Running agents on tasks: the Runner, its config, retries and summaries."""

from sharpen.runner.config import RunConfig
from sharpen.runner.retry import RetryingModel, RetryPolicy
from sharpen.runner.runner import Runner
from sharpen.runner.summary import RunSummary

__all__ = ["RetryPolicy", "RetryingModel", "RunConfig", "RunSummary", "Runner"]
