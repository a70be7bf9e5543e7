"""Environments of any kind kept running by a detached host process (``agent-s3 env up --env KIND``).

The host opens the kind's pool from its settings, borrows every environment of it, writes
a record (``<base>/hosted/<pid>.json``: the kind, its pid, each environment's name and
address) and waits; SIGTERM closes the pool (VMs are killed, their overlays deleted) and
removes the record. A record whose host is gone is stale and is dropped when read.

Run as ``python -m environments.hosting --settings JSON --count N --base DIR``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .kinds import PoolRequest, get_kind, settings_from

__all__ = ["Hosted", "hosted_dir", "hosted_records", "stop_hosted"]


def hosted_dir(base: Path) -> Path:
    return base / "hosted"


@dataclass(frozen=True)
class Hosted:
    """One host's record: its kind, pid and environments (name, address)."""

    path: Path
    kind: str
    pid: int
    environments: list[dict[str, Any]]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def hosted_records(base: Path) -> list[Hosted]:
    """The records of live hosts (stale ones are deleted)."""
    found = []
    folder = hosted_dir(base)
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not _alive(int(data.get("pid", 0))):
            path.unlink(missing_ok=True)
            continue
        found.append(Hosted(path, str(data["kind"]), int(data["pid"]), list(data["environments"])))
    return found


def stop_hosted(record: Hosted, timeout: float = 60.0) -> bool:
    """Ask the host to close its pool; True once it has exited."""
    import time

    try:
        os.kill(record.pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(record.pid):
            record.path.unlink(missing_ok=True)
            return True
        time.sleep(0.1)
    return False


async def _host(settings: dict[str, Any], count: int, base: Path) -> None:
    cfg = settings_from(settings)
    cfg.check()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    folder = hosted_dir(base)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    record = folder / f"{os.getpid()}.json"
    async with get_kind(cfg.kind).open_pool(cfg, PoolRequest(size=count)) as pool:
        envs = [await pool.acquire() for _ in range(count)]
        listed = [{"name": e.name, "platform": e.platform, "address": e.address()} for e in envs]
        temp = record.with_suffix(".tmp")
        temp.write_text(json.dumps({"kind": cfg.kind, "pid": os.getpid(), "environments": listed}))
        os.replace(temp, record)
        try:
            await stop.wait()
        finally:
            record.unlink(missing_ok=True)
            for env in envs:
                pool.release(env)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m environments.hosting")
    parser.add_argument("--settings", required=True, help="the environment section as JSON")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--base", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        asyncio.run(_host(json.loads(args.settings), args.count, args.base))
    except Exception as e:  # the `env up` that started it reports this line
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
