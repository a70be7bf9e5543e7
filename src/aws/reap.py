"""Finding this project's instances by tag and terminating the orphans among them.

An instance is an orphan when its run is named (``--run-id``), when its time to live is over,
or when it was launched from this host by a process that no longer exists (a crashed or
killed runner). `everything=True` takes every marked instance. Instances of live runs on
other hosts are left alone unless their run is named or their TTL is over.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from . import ec2
from .tags import RUN, InstanceRecord

__all__ = ["ReapResult", "find_instances", "orphan_reason", "reap"]

ClientFactory = Callable[[str], Any]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def find_instances(
    regions: Sequence[str],
    *,
    run_id: str | None = None,
    client_for: ClientFactory | None = None,
    states: Iterable[str] = ec2.LIVE_STATES,
) -> list[InstanceRecord]:
    """Every marked instance in `regions` (of one run, if given), in the given states."""
    make = client_for or ec2.ec2_client
    tags = {RUN: run_id} if run_id else None
    found: list[InstanceRecord] = []
    for region in regions:
        found += ec2.find_tagged(make(region), region, tags, states=list(states))
    return sorted(found, key=lambda r: (r.region, r.run_id, r.launched_at or 0.0, r.id))


def orphan_reason(
    record: InstanceRecord,
    *,
    now: float,
    run_id: str | None = None,
    everything: bool = False,
    host: str | None = None,
    pid_alive: Callable[[int], bool] = _pid_alive,
) -> str | None:
    """Why `record` should be terminated, or None to leave it."""
    if everything:
        return "asked for all"
    if run_id is not None and record.run_id == run_id:
        return f"run {run_id}"
    if record.expired(now):
        return "time to live over"
    launcher = record.launcher
    here = host or socket.gethostname()
    if launcher is not None and launcher[0] == here and not pid_alive(launcher[1]):
        return f"launcher pid {launcher[1]} on this host is gone"
    return None


@dataclass(frozen=True)
class ReapResult:
    """What a reap found and did; `terminated` is empty on a dry run."""

    orphans: list[tuple[InstanceRecord, str]]
    kept: list[InstanceRecord]
    terminated: list[str]


def reap(
    regions: Sequence[str],
    *,
    run_id: str | None = None,
    everything: bool = False,
    dry_run: bool = False,
    client_for: ClientFactory | None = None,
    now: float | None = None,
) -> ReapResult:
    """Terminate the orphans among the marked instances of `regions` (see the module doc)."""
    make = client_for or ec2.ec2_client
    clients = {region: make(region) for region in regions}
    when = time.time() if now is None else now
    orphans: list[tuple[InstanceRecord, str]] = []
    kept: list[InstanceRecord] = []
    for record in find_instances(regions, run_id=run_id, client_for=clients.__getitem__):
        reason = orphan_reason(record, now=when, run_id=run_id, everything=everything)
        if reason is None:
            kept.append(record)
        else:
            orphans.append((record, reason))
    terminated: list[str] = []
    if not dry_run:
        for region in regions:
            ids = [r.id for r, _ in orphans if r.region == region]
            if ids:
                terminated += ec2.terminate(clients[region], ids)
    return ReapResult(orphans, kept, terminated)
