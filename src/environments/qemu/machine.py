"""QEMU's command line for one VM: a spec that a snapshot and its restores share, the disk
chain and network of one process, all handed over as descriptors.

Everything QEMU reads or writes it gets as an inherited descriptor (`-add-fd`): the
disk layers (read-only but the VM's own top overlay), the serial log, the monitor's end of
a socket pair and, for a restore, the saved state (``-incoming fd:N``). So QEMU, running as
an unprivileged uid of its own, needs no path into the host at all (the kernel and initrd of
a directly booted image are read through ``/proc/self/fd``).
Each layer is its own block node with an explicit backing, so no path written in an
overlay's header is ever opened. ``-sandbox on`` forbids it to spawn, to raise privileges
or to use obsolete syscalls.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Literal

__all__ = ["BootSpec", "DiskLayer", "MachineSpec", "NetSpec", "qemu_argv"]

Accel = Literal["kvm", "tcg"]

#: Guest ports forwarded to the host: OSWorld's server, Chrome's DevTools (its getters) and VLC's
#: HTTP interface (its metrics), as OSWorld's Docker provider forwards them.
GUEST_PORTS = {"server": 5000, "chromium": 9222, "vlc": 8080}


@dataclass(frozen=True, slots=True)
class BootSpec:
    """A directly booted kernel (an image's ``.boot.json``); None boots the disk's firmware path."""

    kernel: str
    initrd: str | None
    append: str


@dataclass(frozen=True, slots=True)
class MachineSpec:
    """What a snapshot's machine and every machine restored from it must share."""

    memory_mib: int
    cpus: int
    accel: Accel
    boot: BootSpec | None = None
    machine: str = "pc"

    def cpu(self) -> str:
        return "host" if self.accel == "kvm" else "max"

    def key(self) -> str:
        """Stable text of the spec (part of a cached snapshot's key)."""
        return json.dumps(asdict(self), sort_keys=True)


@dataclass(frozen=True, slots=True)
class DiskLayer:
    """One layer of the disk chain, bottom first, as the descriptor QEMU inherits."""

    fd: int
    format: Literal["qcow2", "raw"]
    writable: bool = False


@dataclass(frozen=True, slots=True)
class NetSpec:
    """One VM's network: its MAC, the host ports on 127.0.0.1 forwarded to its guest ports,
    and whether it may reach the internet (never this machine: see `environments.qemu.network`)."""

    mac: str
    ports: dict[str, int] = field(default_factory=dict)
    internet: bool = False


def qemu_argv(spec: MachineSpec, *, name: str, disk: list[DiskLayer], net: NetSpec, serial_fd: int,
              monitor_fd: int, incoming_fd: int | None = None, boot_fds: tuple[int, int | None] | None = None,
              binary: str = "qemu-system-x86_64") -> list[str]:
    """The command line; the descriptors named here must be inherited by the process.

    `boot_fds` are the kernel's and initrd's descriptors of a directly booted spec: QEMU
    reads them as ``/proc/self/fd/N`` (its loader takes only paths), so it needs no way
    into the folders that hold them."""
    argv = [
        binary, "-name", f"guest={name}", "-nodefaults", "-no-user-config", "-display", "none",
        "-machine", spec.machine, "-accel", "kvm" if spec.accel == "kvm" else "tcg,thread=multi",
        "-cpu", spec.cpu(), "-m", str(spec.memory_mib), "-smp", str(spec.cpus),
        "-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
        "-msg", "timestamp=on",
    ]  # fmt: skip
    if spec.boot is not None:
        if boot_fds is None:
            raise ValueError("a directly booted spec needs the kernel's descriptor")
        kernel_fd, initrd_fd = boot_fds
        argv += ["-kernel", f"/proc/self/fd/{kernel_fd}", "-append", spec.boot.append]
        if initrd_fd is not None:
            argv += ["-initrd", f"/proc/self/fd/{initrd_fd}"]
    fdset = 0
    below: str | None = None
    for n, layer in enumerate(disk):
        fdset += 1
        top = n == len(disk) - 1
        argv += ["-add-fd", f"fd={layer.fd},set={fdset}"]
        file_node = {"driver": "file", "node-name": f"file{n}", "filename": f"/dev/fdset/{fdset}",
                     "read-only": not layer.writable}
        node: dict[str, object] = {"driver": layer.format, "node-name": "disk" if top else f"layer{n}",
                                   "file": f"file{n}", "read-only": not layer.writable}
        if layer.format == "qcow2":
            node["backing"] = below
        argv += ["-blockdev", json.dumps(file_node), "-blockdev", json.dumps(node)]
        below = str(node["node-name"])
    argv += ["-device", "virtio-blk-pci,drive=disk,id=disk0,bootindex=1"]
    forwards = "".join(f",hostfwd=tcp:127.0.0.1:{host}-:{GUEST_PORTS[what]}" for what, host in net.ports.items())
    argv += ["-netdev", f"user,id=net0,restrict={'off' if net.internet else 'on'}{forwards}",
             "-device", f"virtio-net-pci,netdev=net0,mac={net.mac},id=nic0"]
    fdset += 1
    argv += ["-add-fd", f"fd={serial_fd},set={fdset}", "-chardev", f"file,id=serial0,path=/dev/fdset/{fdset}",
             "-serial", "chardev:serial0"]
    argv += ["-chardev", f"socket,id=monitor,fd={monitor_fd}", "-mon", "chardev=monitor,mode=control"]
    if incoming_fd is not None:
        argv += ["-incoming", f"fd:{incoming_fd}"]
    return argv
