"""The fleet's watch: every live instance's state, asked of EC2 in one call every
``watch_interval`` seconds, in use or not. An instance that is no longer ``pending`` or
``running`` (terminated, shutting down, stopped, or unknown to EC2) is reported to the fleet
(`Fleet.died`), which stops its cost and has its desktop replaced. A failing EC2 call is
logged and tried again at the next tick; it never ends the watch.

The watch is given what it asks of the fleet as callables, so it knows nothing of `Fleet`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable

from .tags import InstanceRecord

__all__ = ["Watch"]

_log = logging.getLogger("aws.watch")
_ALIVE = ("pending", "running")


class Watch:
    """Polls the fleet's live instances from a task of the fleet's event loop."""

    def __init__(self, name: str, interval: float, *, live: Callable[[], list[InstanceRecord]],
                 describe: Callable[[list[str]], list[InstanceRecord]], died: Callable[[InstanceRecord], bool],
                 call: Callable[[Callable[[], list[InstanceRecord]]], Awaitable[list[InstanceRecord]]]) -> None:
        """`live` lists the fleet's live instances, `describe` asks EC2 (blocking) for their
        records, `died` reports one that is not alive (True when it was news), and `call` runs
        a blocking round off the event loop."""
        self.name, self.interval = name, interval
        self._live, self._describe, self._died, self._call = live, describe, died, call
        self._task: asyncio.Task[None] | None = None
        self.rounds = 0

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"watch-{self.name}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def check(self) -> list[InstanceRecord]:
        """One round (blocking): the live instances that are not alive any more, each reported."""
        live = {r.id: r for r in self._live()}
        if not live:
            return []
        found = {r.id: r for r in self._describe(list(live))}
        dead = []
        for one, known in live.items():
            record = found.get(one) or dataclasses.replace(known, state="gone")
            if record.state not in _ALIVE and self._died(record):
                dead.append(record)
        self.rounds += 1
        return dead

    async def _run(self) -> None:
        interval = self.interval
        while True:
            await asyncio.sleep(interval)
            try:
                await self._call(self.check)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # EC2 unreachable for a moment: try at the next tick
                _log.warning("could not ask EC2 about the fleet's instances (%s); trying again in %.0f s",
                             type(exc).__name__, interval)
