"""A detached process that owns desktops started from the command line (`agent-s3 env up`).

Desktops die with their owner, so a command that returns while its desktops keep running
hands them to this host. It records them in ``<base>/hosts/<pool>.json``, stops one desktop
when ``<base>/hosts/<pool>.stop-<name>`` appears, and stops all of them (and exits) on
SIGTERM or SIGINT. Its pool watchdog cleans up if the host itself is killed.

Run as ``python -m environments.local.host --base-dir DIR --count N [--snapshot S]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
from dataclasses import asdict, dataclass
from pathlib import Path

from .desktop import DesktopConfig, DesktopInfo
from .provider import LocalProvider

__all__ = ["HostRecord", "host_records", "hosts_dir", "main", "request_stop"]


@dataclass(frozen=True, slots=True)
class HostRecord:
    """A live host process and the desktops it owns, as recorded in its state file."""

    pool: str
    host_pid: int
    state_file: Path
    desktops: list[DesktopInfo]


def hosts_dir(base_dir: Path) -> Path:
    return Path(base_dir) / "hosts"


def _write_record(path: Path, pool: LocalProvider) -> None:
    record = {
        "pool": pool.pool_id,
        "host_pid": os.getpid(),
        "desktops": [asdict(env.info) for env in pool.environments],
    }
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(json.dumps(record, indent=2))
    temp.chmod(0o600)
    os.replace(temp, path)


def host_records(base_dir: Path) -> list[HostRecord]:
    """Records of live hosts under ``base_dir``; records of dead hosts are removed."""
    folder = hosts_dir(base_dir)
    records: list[HostRecord] = []
    if not folder.is_dir():
        return records
    for path in sorted(folder.glob("*.json")):
        try:
            raw = json.loads(path.read_text())
            record = HostRecord(
                pool=str(raw["pool"]),
                host_pid=int(raw["host_pid"]),
                state_file=path,
                desktops=[DesktopInfo(**d) for d in raw["desktops"]],
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not _pid_alive(record.host_pid):
            path.unlink(missing_ok=True)
            continue
        records.append(record)
    return records


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def request_stop(base_dir: Path, pool: str, name: str) -> None:
    """Ask the host of ``pool`` to stop desktop ``name``."""
    (hosts_dir(base_dir) / f"{pool}.stop-{name}").touch()


async def _serve(base_dir: Path, count: int, config: DesktopConfig, prefix: str) -> None:
    folder = hosts_dir(base_dir)
    folder.mkdir(parents=True, exist_ok=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    async with LocalProvider(count, base_dir=base_dir, config=config, prefix=prefix) as pool:
        state = folder / f"{pool.pool_id}.json"
        _write_record(state, pool)
        try:
            while not stop.is_set() and pool.environments:
                for flag in folder.glob(f"{pool.pool_id}.stop-*"):
                    name = flag.name.split(".stop-", 1)[1]
                    for env in pool.environments:
                        if env.name == name:
                            await env.close()
                    flag.unlink(missing_ok=True)
                    _write_record(state, pool)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.2)
        finally:
            state.unlink(missing_ok=True)
            for flag in folder.glob(f"{pool.pool_id}.stop-*"):
                flag.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m environments.local.host")
    parser.add_argument("--base-dir", type=Path, required=True)
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--snapshot", default="blank")
    parser.add_argument("--prefix", default="env")
    parser.add_argument("--width", type=int, default=1920)
    parser.add_argument("--height", type=int, default=1080)
    args = parser.parse_args(argv)
    config = DesktopConfig(  # nothing reverts these desktops: a spare would only cost memory
        width=args.width, height=args.height, snapshot=args.snapshot, spare=False
    )
    asyncio.run(_serve(args.base_dir, args.count, config, args.prefix))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
