"""One VM slot of a pool: its uid, host ports, MAC and folder, and the QEMU process that
currently runs in it, restored from a snapshot.

Reverting is restoring again: the running QEMU is killed (nothing of it is kept), its
overlay deleted, and a new process restores the snapshot on a fresh overlay, then the
server is asked until it answers. A checkpoint pauses the VM, saves it as a new snapshot
(its overlay becomes the snapshot's disk) and restores the VM from it, so the rollout goes
on from exactly that state, as any number of other VMs can.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import socket
import time
from pathlib import Path

from core.protocols import EnvError, EnvironmentLost

from ..walls.uids import UidLease
from .machine import GUEST_PORTS, NetSpec
from .process import DiskFile, QemuProcess
from .snapshot import Snapshot, freeze, new_overlay, new_snapshot_folder

__all__ = ["QemuVM", "free_port", "mac_for"]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (QEMU binds it; a lost race is retried by the caller)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def mac_for(name: str) -> str:
    """A locally administered MAC in QEMU's range, unique per VM name."""
    digest = hashlib.sha256(name.encode()).digest()
    return "52:54:00:" + ":".join(f"{b:02x}" for b in digest[:3])


class QemuVM:
    """A slot that runs one QEMU at a time; `restore` starts (or replaces) it."""

    def __init__(self, name: str, folder: Path, uid: UidLease, *, binary: str = "qemu-system-x86_64") -> None:
        self.name = name
        self.folder = folder
        self.uid = uid
        self.binary = binary
        self.mac = mac_for(name)
        self.ports = {what: free_port() for what in GUEST_PORTS}
        self.process: QemuProcess | None = None
        self.snapshot: Snapshot | None = None
        self.internet = False
        self._generation = 0
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.ports['server']}"

    def alive(self) -> bool:
        return self.process is not None and self.process.alive()

    async def stop(self) -> None:
        """Kill the running QEMU, if any, and drop its overlay."""
        process, self.process = self.process, None
        if process is not None:
            await process.kill()
        for old in self.folder.glob("overlay-*.qcow2"):
            old.unlink(missing_ok=True)

    async def restore(self, snapshot: Snapshot, *, internet: bool, timeout: float = 120.0) -> float:
        """Run `snapshot` in this slot (replacing what runs); returns the seconds it took
        until QEMU had loaded it and the VM was running again."""
        started = time.monotonic()
        await self.stop()
        self._generation += 1
        overlay = new_overlay(self.folder / f"overlay-{self._generation}.qcow2", snapshot.layers[-1])
        os.chown(overlay.path, 0, 0)
        serial = self.folder / "serial.log"
        for attempt in range(3):
            net = NetSpec(mac=self.mac, ports=dict(self.ports), internet=internet)
            try:
                process = await QemuProcess.start(snapshot.spec, name=self.name, uid=self.uid.uid,
                                                  disk=[*snapshot.layers, overlay], net=net, serial=serial,
                                                  incoming=snapshot.state, binary=self.binary)
            except EnvironmentLost as e:
                if "forwarding" not in str(e) or attempt == 2:
                    raise
                self.ports = {what: free_port() for what in GUEST_PORTS}  # a port was taken meanwhile
                continue
            break
        self.process = process
        self.snapshot, self.internet = snapshot, internet
        try:
            await process.wait_incoming(timeout)
            await process.qmp.execute("cont")
        except BaseException:
            await self.stop()
            raise
        return time.monotonic() - started

    async def checkpoint(self, root: Path, label: str) -> Snapshot:
        """Save the running VM as a new snapshot under `root`, then continue from it."""
        process, base = self.process, self.snapshot
        if process is None or base is None or not process.alive():
            raise EnvironmentLost(f"{self.name} is not running: nothing to checkpoint")
        overlays = sorted(self.folder.glob(f"overlay-{self._generation}.qcow2"))
        if not overlays:
            raise EnvError(f"{self.name} has no overlay to checkpoint")
        folder = new_snapshot_folder(root)
        try:
            await process.save(folder / "state")
            disk = folder / "disk.qcow2"
            shutil.move(overlays[0], disk)  # QEMU is paused and about to die: nothing writes it
            await process.kill()
            self.process = None
            freeze(disk)
            snapshot = Snapshot(folder, base.spec, (*base.layers, DiskFile(disk)), label, parent=base.id,
                                created=time.time())
            snapshot.write()
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            await self.stop()
            raise
        await self.restore(snapshot, internet=self.internet)
        return snapshot

    async def close(self) -> None:
        """Kill QEMU, delete the slot's folder and give the uid back; safe to call twice."""
        await self.stop()
        await asyncio.to_thread(shutil.rmtree, self.folder, True)
        self.uid.release()
