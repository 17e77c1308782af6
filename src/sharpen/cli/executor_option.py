"""``--executor`` and ``--ray-address``: where ``sharpen run`` and ``sharpen improve`` play
their episodes (:mod:`sharpen.runner.executor`). Not part of any run's identity: a run started
under one executor resumes under another."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Annotated, Any, TypeVar

import typer

from sharpen.cli.options import parse_kv
from sharpen.core.errors import UserError
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.runner.executor import EXECUTOR, Executor

T = TypeVar("T")

ExecutorOpt = Annotated[str, typer.Option(
    "--executor", help="Where episodes run: local (asyncio in this process) or ray (a Ray "
    "cluster; pip install 'sharpen[ray]'), or any registered executor (docs/scale.md).")]
RayAddressOpt = Annotated[str | None, typer.Option(
    "--ray-address", help="--executor ray: auto (the cluster this machine belongs to) or "
    "HOST:PORT of its head node (default: a Ray instance started in this process).")]
ExecutorArgOpt = Annotated[list[str] | None, typer.Option(
    "--executor-arg", help="KEY=VALUE passed to the executor (repeatable), e.g. "
    "--executor-arg chunk=8 or cpus_per_episode=2 for ray.")]


def build_executor(name: str, ray_address: str | None,
                   executor_args: list[str] | None = None) -> Executor:
    """The executor ``--executor NAME`` names, with ``--ray-address`` as its ``address`` and
    ``--executor-arg KEY=VALUE`` as its other arguments."""
    args: dict[str, Any] = parse_kv(executor_args, "--executor-arg")
    if ray_address is not None:
        if name != "ray":
            raise UserError(f"--ray-address is for --executor ray, not {name!r}",
                            "add --executor ray, or drop --ray-address")
        args["address"] = ray_address
    return REGISTRY.create(EXECUTOR, PluginRef(name=name, args=args))


async def closing(executor: Executor, work: Coroutine[Any, Any, T]) -> T:
    """Await ``work``, then release ``executor`` (whatever happened)."""
    try:
        return await work
    finally:
        await executor.aclose()
