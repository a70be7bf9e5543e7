"""The threads that start and revert desktops.

A child's parent-death signal fires when the *thread* that forked it exits, not the process,
so desktops must be started from threads that live as long as the process: a dedicated
executor whose workers are never retired (unlike ad-hoc threads).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

__all__ = ["run_all", "run_blocking", "start_in_background"]

T = TypeVar("T")

_SPAWNER: ThreadPoolExecutor | None = None
_BACKGROUND: ThreadPoolExecutor | None = None
_LOCK = threading.Lock()


def _spawner() -> ThreadPoolExecutor:
    global _SPAWNER
    with _LOCK:
        if _SPAWNER is None:
            _SPAWNER = ThreadPoolExecutor(max_workers=32, thread_name_prefix="desktop-spawner")
        return _SPAWNER


def _background() -> ThreadPoolExecutor:
    global _BACKGROUND
    with _LOCK:
        if _BACKGROUND is None:
            _BACKGROUND = ThreadPoolExecutor(max_workers=32, thread_name_prefix="desktop-spare")
        return _BACKGROUND


async def run_blocking(fn: Callable[[], T]) -> T:
    """Run a blocking desktop operation on a spawner thread."""
    return await asyncio.get_running_loop().run_in_executor(_spawner(), fn)


def run_all(fns: Sequence[Callable[[], T]]) -> list[T]:
    """Run blocking operations in parallel on spawner threads and wait for all of them."""
    futures = [_spawner().submit(fn) for fn in fns]
    return [f.result() for f in futures]


def start_in_background(fn: Callable[[], T]) -> Future[T]:
    """Run a desktop start in the background on a thread of its own pool.

    A pool apart from `run_blocking`'s, so a revert waiting there for a spare can never hold
    the thread the spare needs.
    """
    return _background().submit(fn)
