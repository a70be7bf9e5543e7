"""Executors: where a run's rollouts execute.

``asyncio`` (the default) runs every rollout in this process on environments of this
machine. ``ray`` keeps the agent loops, narration and judging in this process and borrows
environments from one long-lived actor per host of a Ray cluster (`runner.executors.ray_pool`),
so one run folder and one ledger are written by this process alone. `open_environments`
is the one place that chooses; the Ray modules are imported only when Ray is asked for.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from environments.kinds import get_kind

from ..config import RunConfig
from ..environments import EnvironmentPool, open_pool

__all__ = ["EXECUTORS", "check_executor", "open_environments"]

#: The executor names ``executor.kind`` (``--executor``) accepts.
EXECUTORS = ("asyncio", "ray")


_ADDRESS = re.compile(r"^(local|auto|ray://[\w.\-\[\]:]+|[\w.\-]+:\d+)$")


def check_executor(cfg: RunConfig) -> None:
    """Raise ValueError (one line) when the executor settings cannot run."""
    if cfg.executor.kind != "ray":
        return
    spec = get_kind(cfg.environment.kind).clock_for(cfg.environment)
    if spec is not None and spec.mode == "virtual":
        raise ValueError("a virtual clock runs in one process and Ray's hosts are others: run the simulation "
                         "with -c environment.clock=scaled (and environment.speed) on --executor ray")
    if importlib.util.find_spec("ray") is None:
        raise ValueError("--executor ray needs Ray: pip install 'ray[default]' (the project's `ray` extra)")
    if not _ADDRESS.match(cfg.executor.ray_address):
        raise ValueError(f"--ray-address {cfg.executor.ray_address!r} is not local, auto, ray://HOST:PORT or HOST:PORT")


@asynccontextmanager
async def open_environments(cfg: RunConfig, *, size: int = 1, hide: tuple[str, ...] = (),
                            run_id: str | None = None) -> AsyncIterator[EnvironmentPool]:
    """The run's environments under its executor, closed (and Ray left) afterwards; the
    arguments are `runner.environments.open_pool`'s."""
    if cfg.executor.kind == "ray":
        from .ray_pool import open_ray_pool  # Ray is heavy and optional

        async with open_ray_pool(cfg, size=size, hide=hide, run_id=run_id) as pool:
            yield pool
        return
    async with open_pool(cfg.environment, size=size, hide=hide, run_id=run_id) as pool:
        yield pool
