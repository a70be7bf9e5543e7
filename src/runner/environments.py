"""Environments for a run: a pool to borrow from, opened by the kind the settings name.

Every kind registers its own pool opener (`environments.kinds`); how a task is reverted
to, set up and scored is each environment's own business (`Environment.prepare_task` /
`score_task`): nothing here asks which kind it has.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from environments.kinds import EnvironmentSettings, PoolRequest, get_kind
from environments.pool import EnvironmentPool, FixedPool

__all__ = ["EnvironmentPool", "FixedPool", "open_pool"]


@asynccontextmanager
async def open_pool(cfg: EnvironmentSettings, *, size: int = 1, hide: tuple[str, ...] = (),
                    run_id: str | None = None) -> AsyncIterator[EnvironmentPool]:
    """Start (or connect to) the environments of a run and close them afterwards.

    `size` is how many the run would use at once (a kind that starts them on this machine
    starts only what fits; the rollouts beyond queue). `hide` lists host folders the coding
    agent's sandbox must not see (the run folder); `run_id` tags what a kind starts for the
    run (EC2 instances, VMs), so it can be found again.
    """
    cfg.check()
    async with get_kind(cfg.kind).open_pool(cfg, PoolRequest(size=size, hide=hide, run_id=run_id)) as pool:
        yield pool
