"""Thousands of screenshots from one server process with flat file descriptors and memory.

OSWorld's server opens an X connection per screenshot and fails at the 251st. This serves
2,000 (a proxy for 10,000; the per-request cost is the same) and checks that the server's
open descriptors and resident memory stay flat between the 200th and the last.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

import pytest

pytestmark = [pytest.mark.desktop, pytest.mark.integration, pytest.mark.slow]

TOTAL = 2000
WARMUP = 200
CONCURRENCY = 4


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def test_two_thousand_screenshots_with_flat_fds_and_memory(
    display_factory: Callable[[int, int], Any], server_factory: Callable[..., Any]
) -> None:
    server = server_factory(on=display_factory(640, 480))
    pid = server.proc.pid
    samples: list[tuple[int, int, float]] = []
    async with server.client(timeout=20.0) as client:
        done = 0
        while done < TOTAL:
            shots = await asyncio.gather(*(client.screenshot() for _ in range(CONCURRENCY)))
            assert all(shot.startswith(b"\x89PNG") for shot in shots)
            done += CONCURRENCY
            if done % WARMUP == 0:
                samples.append((done, _fds(pid), _rss_mb(pid)))
    assert server.proc.poll() is None
    first, last = samples[0], samples[-1]
    assert last[0] == TOTAL
    assert last[1] - first[1] <= 2, samples
    assert last[2] - first[2] < 25.0, samples
