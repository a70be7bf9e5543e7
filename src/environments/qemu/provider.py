"""A fleet of VMs on this machine, forked from one live snapshot of the image.

The pool boots the image once (or finds that boot in its snapshot cache: the same image,
QEMU and machine spec restore the same saved boot on every later run), then starts each VM
by restoring that snapshot: N rollouts fork from one snapshot, each on its own overlay over
the shared read-only chain, with its own uid, MAC and host ports on 127.0.0.1. No more VMs
start than the machine's memory and cores allow (`environments.capacity`); the other
rollouts queue. VMs die with the run (a parent-death signal, and a watchdog process for an
owner killed outright), and a VM found dead at a loan is replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

from core.protocols import Checkpoint, EnvError, EnvironmentLost

from ..capacity import machine_room, plan_fleet
from ..pool import ReplacingPool
from ..walls.uids import lease_uid
from .accel import TCG_COST, AccelChoice, choose_accel
from .environment import QemuEnvironment
from .image import boot_manifest, default_cache
from .machine import BootSpec, MachineSpec, NetSpec
from .network import install_vm_egress_rules
from .process import DiskFile, QemuProcess
from .snapshot import Snapshot, freeze, image_layers, new_overlay, new_snapshot_folder
from .vm import QemuVM, free_port, mac_for
from .watchdog import reap_pool, start_watchdog

__all__ = ["VM_FIRST_UID", "VM_SLOTS", "QemuProvider", "default_vm_dir"]

_log = logging.getLogger("environments.qemu")

#: VMs run as uids of their own range (the desktops' is 100000-100999).
VM_FIRST_UID = 101000
VM_SLOTS = 1000
#: Memory QEMU itself needs beside the guest's (budgeted in the capacity check).
QEMU_OVERHEAD_MIB = 256


def default_vm_dir() -> Path:
    """``$AGENT_S3_ENV_DIR/qemu``, else ``/tmp/agent-s3/envs/qemu``."""
    return Path(os.environ.get("AGENT_S3_ENV_DIR") or "/tmp/agent-s3/envs") / "qemu"


def _qemu_version(binary: str) -> str:
    done = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    return (done.stdout.splitlines() or ["unknown"])[0]


class QemuProvider(ReplacingPool[QemuEnvironment]):
    """``async with QemuProvider(4, image=Path("Ubuntu.qcow2")) as pool: env = await pool.acquire()``."""

    def __init__(
        self,
        size: int = 1,
        *,
        image: Path,
        memory_mib: int = 4096,
        cpus: int = 4,
        accel: str = "auto",
        network: str = "task",
        base_dir: Path | None = None,
        snapshot_cache: Path | None = None,
        boot_timeout: float = 900.0,
        restore_timeout: float = 120.0,
        snapshot_after_setup: bool = False,
        with_sandbox: bool = True,
        action_timeout: float = 30.0,
        vms_per_core: float = 2.0,
        binary: str = "qemu-system-x86_64",
        watchdog: bool = True,
    ) -> None:
        super().__init__(
            size,
            too_small="a QEMU pool needs at least one VM; pass size >= 1",
            not_started="the QEMU pool is not started; use `async with QemuProvider(...)`",
        )
        self.image = Path(image).expanduser().absolute()
        self.memory_mib, self.cpus, self.accel_wanted = memory_mib, cpus, accel
        self.network = network
        self.base_dir = Path(base_dir) if base_dir is not None else default_vm_dir()
        self.snapshot_cache = snapshot_cache or (default_cache() / "snapshots")
        self.boot_timeout, self.restore_timeout = boot_timeout, restore_timeout
        self.snapshot_after_setup = snapshot_after_setup
        self.with_sandbox, self.action_timeout = with_sandbox, action_timeout
        self.vms_per_core = vms_per_core
        self.binary = binary
        self.pool_id = uuid.uuid4().hex[:12]
        self.folder = self.base_dir / "pools" / self.pool_id
        self._want_watchdog = watchdog
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._counter = 0
        self._boot: Snapshot | None = None
        self.accel: AccelChoice | None = None
        self.leaderboard_note: str | None = None
        self._checkpoints: dict[str, Snapshot] = {}
        self._task_snapshots: dict[tuple[str, bool], Snapshot] = {}
        self._task_locks: dict[tuple[str, bool], asyncio.Lock] = {}
        self.restore_seconds: list[float] = []
        """Seconds of every restore so far (reverts and forks), for benchmarks and reports."""

    # -- starting -----------------------------------------------------------------------

    @property
    def boot(self) -> Snapshot:
        if self._boot is None:
            raise EnvError(self._not_started)
        return self._boot

    def spec(self, accel: str) -> MachineSpec:
        manifest = boot_manifest(self.image)
        boot = None
        if manifest is not None:
            boot = BootSpec(kernel=manifest["kernel"], initrd=manifest.get("initrd"), append=manifest["append"])
        cores = len(os.sched_getaffinity(0))
        return MachineSpec(memory_mib=self.memory_mib, cpus=max(1, min(self.cpus, cores)),
                           accel="kvm" if accel == "kvm" else "tcg", boot=boot)

    async def start(self) -> None:
        """Boot (or find) the image's live snapshot, then fork the pool's VMs from it."""
        sidecar = self.image.with_name(self.image.name + ".boot.json")
        if sidecar.is_file():
            self.leaderboard_note = json.loads(sidecar.read_text()).get("note")
        room = await asyncio.to_thread(machine_room)
        self.size = plan_fleet(self.size, room, memory_mib=self.memory_mib + QEMU_OVERHEAD_MIB,
                               per_core=self.vms_per_core, what="VM", lower="environment.memory_mib")
        self.folder.mkdir(parents=True, mode=0o700)
        (self.folder / "owner").write_text(str(os.getpid()))
        await asyncio.to_thread(sweep_stale_pools, self.base_dir)
        if self._want_watchdog:
            self._watchdog = start_watchdog(self.folder)
        try:
            self._boot = await self._boot_snapshot()
            await super().start()
        except BaseException:
            await self.close()
            raise

    async def _boot_snapshot(self) -> Snapshot:
        layers = await asyncio.to_thread(image_layers, self.image)
        manifest = boot_manifest(self.image)
        self.accel = await asyncio.to_thread(
            choose_accel, manifest["kernel"] if manifest else None, manifest.get("initrd") if manifest else None,
            self.snapshot_cache, want=self.accel_wanted, binary=self.binary)
        if self.accel.accel == "tcg":
            _log.warning("%s; running under %s", self.accel.reason, TCG_COST)
        spec = self.spec(self.accel.accel)
        stat = self.image.stat()
        key = hashlib.sha256(json.dumps([str(self.image), stat.st_size, stat.st_mtime_ns, spec.key(),
                                         await asyncio.to_thread(_qemu_version, self.binary)]).encode())
        folder = self.snapshot_cache / f"boot-{key.hexdigest()[:16]}"
        found = await asyncio.to_thread(Snapshot.read, folder)
        if found is not None:
            return found
        return await self._cold_boot(spec, layers, folder)

    async def _cold_boot(self, spec: MachineSpec, layers: tuple[DiskFile, ...], folder: Path) -> Snapshot:
        """Boot the image until its server answers, then save it (the boot snapshot)."""
        self.snapshot_cache.mkdir(parents=True, exist_ok=True, mode=0o700)
        work = new_snapshot_folder(self.snapshot_cache)
        uid = lease_uid(first=VM_FIRST_UID, slots=VM_SLOTS)
        started = time.monotonic()
        process: QemuProcess | None = None
        try:
            overlay = new_overlay(work / "disk.qcow2", layers[-1])
            port = free_port()
            process = await QemuProcess.start(spec, name="boot", uid=uid.uid, disk=[*layers, overlay],
                                              net=NetSpec(mac=mac_for("boot"), ports={"server": port}),
                                              serial=work / "serial.log", binary=self.binary)
            (work / "pid").write_text(str(process.pid))
            await _wait_server(process, f"http://127.0.0.1:{port}", self.boot_timeout, "boot")
            seconds = time.monotonic() - started
            await process.save(work / "state")
            await process.kill()
            freeze(work / "disk.qcow2")
            snapshot = Snapshot(folder, spec, (*layers, DiskFile(folder / "disk.qcow2")), "boot", created=time.time(),
                                boot_seconds=seconds)
            (work / "pid").unlink(missing_ok=True)
            shutil.rmtree(folder, ignore_errors=True)
            work.rename(folder)
            snapshot.write()
            _log.info("booted %s in %.0f s and saved it as a live snapshot (%s)", self.image.name, seconds, folder)
            return Snapshot.read(folder) or snapshot
        except BaseException:
            if process is not None:
                await process.kill()
            shutil.rmtree(work, ignore_errors=True)
            raise
        finally:
            uid.release()

    def _next_name(self) -> str:
        self._counter += 1
        return f"qemu-{self.pool_id[:6]}-{self._counter}"

    async def _open(self) -> QemuEnvironment:
        name = self._next_name()
        uid = lease_uid(first=VM_FIRST_UID, slots=VM_SLOTS)
        vm = QemuVM(name, self.folder / name, uid, binary=self.binary)
        env = QemuEnvironment(vm, self, with_sandbox=self.with_sandbox, action_timeout=self.action_timeout)
        try:
            await self.restore(env, self.boot, internet=self.internet_for(None))
        except BaseException:
            await env.close()
            raise
        return env

    # -- restoring ----------------------------------------------------------------------

    def internet_for(self, needs: bool | None) -> bool:
        """Whether a VM gets the NAT: ``on`` always, ``off`` never, ``task`` when the task needs it."""
        return self.network == "on" or (self.network == "task" and bool(needs))

    async def restore(self, env: QemuEnvironment, snapshot: Snapshot, *, internet: bool) -> None:
        """Run `snapshot` in `env`'s VM and wait until its server answers."""
        if internet:
            await asyncio.to_thread(install_vm_egress_rules, VM_FIRST_UID, VM_FIRST_UID + VM_SLOTS - 1)
        started = time.monotonic()
        try:
            await env.vm.restore(snapshot, internet=internet, timeout=self.restore_timeout)
            assert env.vm.process is not None
            (env.vm.folder / "pid").write_text(str(env.vm.process.pid))
            await _wait_server(env.vm.process, env.vm.url, self.restore_timeout, env.name)
        except EnvironmentLost as e:
            env.lost = str(e)
            raise
        env.lost = None
        env.reset_after_restore()
        self.restore_seconds.append(time.monotonic() - started)

    # -- snapshots of tasks and checkpoints ----------------------------------------------

    def task_snapshot(self, task_id: str, internet: bool) -> Snapshot | None:
        return self._task_snapshots.get((task_id, internet))

    @contextlib.asynccontextmanager
    async def task_setup(self, task_id: str, internet: bool) -> AsyncIterator[Snapshot | None]:
        """One VM at a time sets a task up when its set-up state is snapshotted; the others
        get that snapshot (None: set it up yourself)."""
        if not self.snapshot_after_setup:
            yield None
            return
        lock = self._task_locks.setdefault((task_id, internet), asyncio.Lock())
        async with lock:
            yield self._task_snapshots.get((task_id, internet))

    async def after_setup(self, env: QemuEnvironment, task_id: str, internet: bool) -> None:
        if self.snapshot_after_setup and (task_id, internet) not in self._task_snapshots:
            snapshot = await env.vm.checkpoint(self.folder / "snapshots", f"task {task_id}")
            self._task_snapshots[(task_id, internet)] = snapshot
            (env.vm.folder / "pid").write_text(str(env.vm.process.pid if env.vm.process else 0))
            await _wait_server(env.vm.process, env.vm.url, self.restore_timeout, env.name)  # type: ignore[arg-type]

    async def checkpoint(self, env: QemuEnvironment, label: str) -> Checkpoint:
        started = time.monotonic()
        snapshot = await env.vm.checkpoint(self.folder / "snapshots", label)
        assert env.vm.process is not None
        (env.vm.folder / "pid").write_text(str(env.vm.process.pid))
        await _wait_server(env.vm.process, env.vm.url, self.restore_timeout, env.name)
        env.reset_after_restore()
        self._checkpoints[snapshot.id] = snapshot
        _log.info("checkpoint %s of %s (%s) in %.1f s", snapshot.id, env.name, label, time.monotonic() - started)
        return Checkpoint(id=snapshot.id, label=label, source=env.name)

    def checkpoint_snapshot(self, checkpoint: Checkpoint) -> Snapshot:
        found = self._checkpoints.get(checkpoint.id)
        if found is None:
            raise EnvError(f"checkpoint {checkpoint.id} ({checkpoint.label}) is not one of this pool's")
        return found

    # -- lending ------------------------------------------------------------------------

    async def _healthy(self, env: QemuEnvironment) -> bool:
        return env.problem() is None

    # -- closing ------------------------------------------------------------------------

    async def close(self) -> None:
        """Kill every VM, delete their overlays and this pool's checkpoints; safe to call twice."""
        await super().close()
        self._checkpoints.clear()
        self._task_snapshots.clear()
        await asyncio.to_thread(shutil.rmtree, self.folder, True)
        if self._watchdog is not None:
            self._watchdog.terminate()
            await asyncio.to_thread(self._watchdog.wait)
            self._watchdog = None


async def _wait_server(process: QemuProcess, url: str, timeout: float, name: str) -> None:
    """Poll the VM's server until it answers; `EnvironmentLost` when QEMU dies or time runs out."""
    import httpx

    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(base_url=url, timeout=5.0) as http:
        while True:
            if not process.alive():
                raise EnvironmentLost(f"QEMU of {name} exited: {process.stderr_tail() or 'no message'}")
            try:
                reply = await http.get("/platform")
                if reply.status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                tail = process.serial_text().strip().splitlines()[-1:] or ["nothing on its console"]
                raise EnvironmentLost(f"the server of {name} did not answer within {timeout:g} s "
                                      f"(its console last said: {tail[0][:120]!r})")
            await asyncio.sleep(0.1)


def sweep_stale_pools(base_dir: Path) -> int:
    """Kill the VMs of pools whose owner died without cleaning up; returns how many."""
    killed = 0
    pools = base_dir / "pools"
    if not pools.is_dir():
        return 0
    for folder in pools.iterdir():
        try:
            owner = int((folder / "owner").read_text())
        except (OSError, ValueError):
            owner = 0
        if owner and _alive(owner):
            continue
        killed += reap_pool(folder)
    return killed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
