"""The fleet's watch: every live instance's state, asked of EC2 in one call every
``watch_interval`` seconds, in use or not. An instance that is no longer ``pending`` or
``running`` (terminated, shutting down, stopped, or unknown to EC2) is reported to the fleet
(`Fleet.died`), which stops its cost and has its desktop replaced. A failing EC2 call is
logged and tried again at the next tick; it never ends the watch.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from typing import TYPE_CHECKING

from . import ec2
from .tags import InstanceRecord

if TYPE_CHECKING:
    from .fleet import Fleet

__all__ = ["Watch"]

_log = logging.getLogger("aws.watch")
_ALIVE = ("pending", "running")


class Watch:
    """Polls the fleet's live instances from a task of the fleet's event loop."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self._task: asyncio.Task[None] | None = None
        self.rounds = 0

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"watch-{self.fleet.fleet_id}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def check(self) -> list[InstanceRecord]:
        """One round (blocking): the live instances that are not alive any more, each reported."""
        fleet = self.fleet
        live = {r.id: r for r in fleet.live}
        if not live:
            return []
        found = {r.id: r for r in ec2.describe(fleet._client, fleet.region, list(live))}
        dead = []
        for one, known in live.items():
            record = found.get(one) or dataclasses.replace(known, state="gone")
            if record.state not in _ALIVE and fleet.died(record):
                dead.append(record)
        self.rounds += 1
        return dead

    async def _run(self) -> None:
        interval = self.fleet.config.watch_interval
        while True:
            await asyncio.sleep(interval)
            try:
                await self.fleet._call(self.check)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # EC2 unreachable for a moment: try at the next tick
                _log.warning("could not ask EC2 about the fleet's instances (%s); trying again in %.0f s",
                             type(exc).__name__, interval)
