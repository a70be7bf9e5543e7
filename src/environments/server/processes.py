"""Child processes the server starts: own process groups, hard timeouts, bounded output.

Every child gets a new session (so its whole tree shares one process group), is recorded in a
`ProcessRegistry` and is killed with its group on timeout and when the server exits. Output
is kept to a byte budget (head and tail) so a chatty command cannot exhaust memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Completed", "ProcessRegistry", "RunAs", "kill_group", "run_captured"]

_READ_CHUNK = 65536
#: After a kill, how long to wait for pipes to close (a child that escaped its group may
#: still hold them).
_DRAIN_GRACE_S = 1.0


@dataclass(frozen=True, slots=True)
class RunAs:
    """An unprivileged identity for children (requires the server to run as root)."""

    uid: int
    gid: int

    @classmethod
    def parse(cls, text: str) -> RunAs:
        """``UID`` or ``UID:GID`` (a bare uid uses the same number as gid)."""
        uid_text, _, gid_text = text.partition(":")
        uid = int(uid_text)
        return cls(uid=uid, gid=int(gid_text) if gid_text else uid)

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """`argv` run through setpriv as this identity, with no supplementary groups.

        setpriv switches ids just before exec, so an interpreter whose path only root may
        traverse still starts; every capability is gone once the program runs.
        """
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", "--", *argv]


@dataclass(frozen=True, slots=True)
class Completed:
    """What a finished (or killed) child produced."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    duration: float


def kill_group(pgid: int) -> None:
    """SIGKILL a whole process group; a group that is already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class ProcessRegistry:
    """The process groups this server started, so they can all be killed on exit."""

    def __init__(self) -> None:
        self._groups: set[int] = set()

    def add(self, pgid: int) -> None:
        self._prune()
        self._groups.add(pgid)

    def discard(self, pgid: int) -> None:
        self._groups.discard(pgid)

    def live(self) -> list[int]:
        self._prune()
        return sorted(self._groups)

    def kill_all(self) -> None:
        for pgid in list(self._groups):
            kill_group(pgid)
        self._groups.clear()

    def _prune(self) -> None:
        for pgid in list(self._groups):
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                self._groups.discard(pgid)
            except PermissionError:
                pass


class _Capped:
    """Keeps the first and last `limit // 2` bytes of a stream and counts what it dropped."""

    def __init__(self, limit: int) -> None:
        self._half = max(limit // 2, 1)
        self._head = bytearray()
        self._tail = bytearray()
        self._dropped = 0

    def feed(self, data: bytes) -> None:
        room = self._half - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if not data:
            return
        self._tail += data
        excess = len(self._tail) - self._half
        if excess > 0:
            del self._tail[:excess]
            self._dropped += excess

    def text(self) -> str:
        head = self._head.decode("utf-8", errors="replace")
        tail = self._tail.decode("utf-8", errors="replace")
        if self._dropped:
            return f"{head}\n[... {self._dropped} bytes omitted ...]\n{tail}"
        return head + tail


async def _pump(stream: asyncio.StreamReader | None, sink: _Capped) -> None:
    if stream is None:
        return
    while chunk := await stream.read(_READ_CHUNK):
        sink.feed(chunk)


async def run_captured(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    run_as: RunAs | None = None,
    merge_stderr: bool = False,
    output_limit: int = 8 * 1024 * 1024,
    registry: ProcessRegistry | None = None,
    pass_fds: Sequence[int] = (),
) -> Completed:
    """Run a child to completion (or its timeout) and return its bounded output.

    Like `subprocess.run(capture_output=True)`, it waits for the child to exit *and* its
    pipes to close; at the timeout the whole process group is killed. Raises `OSError`
    (e.g. `FileNotFoundError`) when the program cannot be started.
    """
    started = time.monotonic()
    kwargs: dict[str, object] = {
        "stdin": asyncio.subprocess.DEVNULL,
        "stdout": asyncio.subprocess.PIPE,
        "stderr": asyncio.subprocess.STDOUT if merge_stderr else asyncio.subprocess.PIPE,
        "env": dict(env) if env is not None else None,
        "cwd": cwd,
        "start_new_session": True,
        "pass_fds": tuple(pass_fds),
    }
    command = list(argv)
    if run_as is not None:
        path = (env or os.environ).get("PATH", os.defpath)
        if shutil.which(command[0], path=path) is None:
            # The same error a direct exec gives, rather than setpriv's exit code 127.
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", command[0])
        command = run_as.wrap(command)
    proc = await asyncio.create_subprocess_exec(*command, **kwargs)  # type: ignore[arg-type]
    if registry is not None:
        registry.add(proc.pid)
    out, err = _Capped(output_limit), _Capped(output_limit)
    pumps = [asyncio.ensure_future(_pump(proc.stdout, out)), asyncio.ensure_future(_pump(proc.stderr, err))]
    timed_out = False
    try:
        waiter = asyncio.ensure_future(proc.wait())
        _, pending = await asyncio.wait([waiter, *pumps], timeout=timeout)
        if pending:
            timed_out = True
            kill_group(proc.pid)
            await waiter
            await asyncio.wait(pumps, timeout=_DRAIN_GRACE_S)
    finally:
        if timed_out and registry is not None:
            registry.discard(proc.pid)
        for pump in pumps:
            pump.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)
        if proc.returncode is None:
            kill_group(proc.pid)
            await proc.wait()
    returncode = proc.returncode if proc.returncode is not None else -signal.SIGKILL
    return Completed(
        returncode=returncode,
        stdout=out.text(),
        stderr=err.text(),
        timed_out=timed_out,
        duration=time.monotonic() - started,
    )
