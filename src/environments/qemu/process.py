"""One running QEMU: started confined, talked to over its monitor, saved, killed.

QEMU runs as the VM's own leased uid with no groups, no capabilities, ``no_new_privs`` and
a parent-death signal (started from the long-lived spawner threads, so it dies with its
owner however the owner dies), in a new session (Ctrl-C at a terminal reaches the runner,
which stops it in order). It opens nothing by path: its disks, serial log, monitor, saved state and the kernel of a
directly booted image are descriptors (`machine`).

Saving is QEMU's migration to a file: the VM is paused, its memory and device state are
written through a descriptor the monitor receives (``getfd``), and the process then quits;
its top overlay, no longer written by anyone, is the snapshot's disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.protocols import EnvError, EnvironmentLost

from ..local.spawner import run_blocking
from .machine import DiskLayer, MachineSpec, NetSpec, qemu_argv
from .qmp import QMP

__all__ = ["DiskFile", "QemuProcess"]

#: Migration speed cap (bytes/s): QEMU's default (32 MiB/s) would make saving a 1 GiB guest take 30 s.
_MAX_BANDWIDTH = 64 * 1024**3


@dataclass(frozen=True, slots=True)
class DiskFile:
    """One layer of a VM's disk chain on the host, bottom first."""

    path: Path
    format: str = "qcow2"
    writable: bool = False


class QemuProcess:
    """A started QEMU; `start` it, then use `qmp`; `kill` is safe to call twice."""

    def __init__(self, popen: subprocess.Popen[bytes], qmp: QMP, serial: Path, name: str) -> None:
        """Use `start`."""
        self.popen = popen
        self.qmp = qmp
        self.serial = serial
        self.name = name
        self.started = time.monotonic()

    @property
    def pid(self) -> int:
        return self.popen.pid

    @classmethod
    async def start(cls, spec: MachineSpec, *, name: str, uid: int, disk: Sequence[DiskFile], net: NetSpec,
                    serial: Path, incoming: Path | None = None, binary: str = "qemu-system-x86_64") -> QemuProcess:
        """Start QEMU for `spec` (restoring `incoming` when given) and open its monitor."""
        fds: list[int] = []
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            layers = []
            for layer in disk:
                fd = os.open(layer.path, os.O_RDWR if layer.writable else os.O_RDONLY)
                fds.append(fd)
                layers.append(DiskLayer(fd=fd, format="raw" if layer.format == "raw" else "qcow2",
                                        writable=layer.writable))
            serial_fd = os.open(serial, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            fds.append(serial_fd)
            log_fd = os.open(serial.with_name("qemu.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            fds.append(log_fd)
            boot_fds: tuple[int, int | None] | None = None
            if spec.boot is not None:
                kernel_fd = os.open(spec.boot.kernel, os.O_RDONLY)
                fds.append(kernel_fd)
                initrd_fd = None
                if spec.boot.initrd:
                    initrd_fd = os.open(spec.boot.initrd, os.O_RDONLY)
                    fds.append(initrd_fd)
                boot_fds = (kernel_fd, initrd_fd)
            incoming_fd = None
            if incoming is not None:
                incoming_fd = os.open(incoming, os.O_RDONLY)
                fds.append(incoming_fd)
            argv = qemu_argv(spec, name=name, disk=layers, net=net, serial_fd=serial_fd,
                             monitor_fd=theirs.fileno(), incoming_fd=incoming_fd, boot_fds=boot_fds,
                             binary=binary)
            confined = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
                        "--inh-caps=-all", "--bounding-set=-all", "--pdeathsig=KILL", "--", *argv]
            inherit = (*fds, theirs.fileno())

            def spawn() -> subprocess.Popen[bytes]:
                return subprocess.Popen(confined, pass_fds=inherit, cwd="/", stdin=subprocess.DEVNULL,
                                        stdout=log_fd, stderr=log_fd, start_new_session=True,
                                        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})

            popen = await run_blocking(spawn)
        finally:
            for fd in fds:
                os.close(fd)
            theirs.close()
        process = cls(popen, QMP(ours), serial, name)
        try:
            await process.qmp.start(timeout=60.0)
        except (EnvError, TimeoutError, OSError, EOFError, ValueError) as e:
            why = process.stderr_tail() or str(e) or type(e).__name__
            await process.kill()
            raise EnvironmentLost(f"QEMU for {name} did not start: {why}") from None
        return process

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stderr_tail(self, limit: int = 600) -> str:
        """The last lines QEMU wrote to its log (errors, warnings)."""
        try:
            text = self.serial.with_name("qemu.log").read_text(errors="replace").strip()
        except OSError:
            return ""
        return " | ".join(text.splitlines()[-4:])[-limit:]

    def serial_text(self) -> str:
        try:
            return self.serial.read_text(errors="replace")
        except OSError:
            return ""

    async def status(self) -> str:
        reply = await self.qmp.execute("query-status")
        return str(reply.get("status"))

    async def wait_incoming(self, timeout: float) -> None:
        """Wait until a restore has loaded its state (the VM is then paused: ``cont`` runs it)."""
        deadline = time.monotonic() + timeout
        while True:
            state = await self.status()
            if state not in ("inmigrate", "restore-vm"):
                if state not in ("paused", "running", "postmigrate"):
                    raise EnvironmentLost(f"{self.name} did not restore its snapshot (QEMU status {state})")
                return
            if time.monotonic() > deadline:
                raise EnvironmentLost(f"{self.name} did not restore its snapshot within {timeout:g} s")
            await asyncio.sleep(0.05)

    async def save(self, state: Path, timeout: float = 600.0) -> int:
        """Pause the VM and write its memory and device state to `state`; returns its bytes.

        The VM stays paused (its disk must not change any more); kill it afterwards.
        """
        await self.qmp.execute("stop")
        await self.qmp.execute("migrate-set-parameters", {"max-bandwidth": _MAX_BANDWIDTH})
        fd = os.open(state, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            await self.qmp.execute("getfd", {"fdname": "snapshot"}, fds=[fd])
        finally:
            os.close(fd)
        await self.qmp.execute("migrate", {"uri": "fd:snapshot"})
        deadline = time.monotonic() + timeout
        while True:
            info = await self.qmp.execute("query-migrate")
            status = info.get("status")
            if status == "completed":
                return (await asyncio.to_thread(os.stat, state)).st_size
            if status in ("failed", "cancelled"):
                raise EnvError(f"saving {self.name} failed: {info.get('error-desc', status)}")
            if time.monotonic() > deadline:
                raise EnvError(f"saving {self.name} took more than {timeout:g} s")
            await asyncio.sleep(0.05)

    async def kill(self) -> None:
        """Kill QEMU (SIGKILL: nothing of the guest is kept) and reap it; safe to call twice."""
        self.qmp.close()
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
        await run_blocking(self.popen.wait)
