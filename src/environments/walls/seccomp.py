"""The system calls a desktop may not make, as a seccomp filter bubblewrap installs.

Two things a VM's guest cannot reach and a desktop's processes could, through the host's
kernel:

- **user namespaces** (``unshare -Ur`` gives full capabilities in a new namespace: nf_tables,
  veth devices, mounts — kernel surface a VM does not expose): ``unshare``, ``clone`` and
  ``setns`` with ``CLONE_NEWUSER`` are refused, ``clone3`` (whose flags sit in memory a
  filter cannot read) answers ``ENOSYS`` so the C library falls back to ``clone``;
- **kernel keyrings** (a uid's user keyring outlives its processes, so a note left by one
  rollout would be read by the next task on that uid, another run's included): ``add_key``,
  ``request_key`` and ``keyctl`` are refused.

The filter is what bubblewrap applies to the sandbox's first process after it has built the
sandbox (its namespaces, and the desktop's own user namespace that `userns` makes before
bubblewrap runs, come first), so it binds every process of the desktop, its root (`rootd`)
and what ``sudo`` runs included, and nothing of the set-up. It is a classic BPF program
built here (no libseccomp): for each architecture the machine may run (x86-64 with its i386
and x32 ABIs, arm64) the refused numbers; a call of any other ABI is refused outright.
"""

from __future__ import annotations

import errno
import os
import platform
import struct
from dataclasses import dataclass

__all__ = ["REFUSED", "desktop_filter", "filter_fd", "supported"]

# BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_CLONE_NEWUSER = 0x10000000
_X32_BIT = 0x40000000
#: seccomp_data: nr at 0, arch at 4, args[i] at 16 + 8 i (low word first on these machines).
_NR, _ARCH = 0, 4


def _arg_low(i: int) -> int:
    return 16 + 8 * i


@dataclass(frozen=True)
class _Abi:
    arch: int
    keys: tuple[int, ...]  # add_key, request_key, keyctl
    unshare: int
    clone: int  # flags in arg 0 on every ABI here
    setns: int
    clone3: int = 435


_ABIS = {
    "x86_64": _Abi(0xC000003E, (248, 249, 250), 272, 56, 308),
    "i386": _Abi(0x40000003, (286, 287, 288), 310, 120, 346),
    "aarch64": _Abi(0xC00000B7, (217, 218, 219), 97, 220, 268),
}
#: What the filter refuses, for the record and the tests.
REFUSED = ("add_key", "request_key", "keyctl", "unshare(CLONE_NEWUSER)", "clone(CLONE_NEWUSER)",
           "setns(user namespace)", "clone3")  # fmt: skip


class _Program:
    """A tiny assembler: instructions with symbolic forward jumps."""

    def __init__(self) -> None:
        self.code: list[tuple[int, int | str, int | str, int]] = []
        self.labels: dict[str, int] = {}

    def op(self, code: int, k: int, jt: int | str = 0, jf: int | str = 0) -> None:
        self.code.append((code, jt, jf, k))

    def label(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def assemble(self) -> bytes:
        out = b""
        for i, (code, jt, jf, k) in enumerate(self.code):
            offsets = []
            for target in (jt, jf):
                if isinstance(target, str):
                    target = self.labels[target] - i - 1
                if not 0 <= target <= 255:
                    raise ValueError("a seccomp jump out of range")
                offsets.append(target)
            out += struct.pack("=HBBI", code, offsets[0], offsets[1], k & 0xFFFFFFFF)
        return out


def desktop_filter() -> bytes:
    """The compiled filter (an array of ``struct sock_filter``)."""
    p = _Program()
    p.op(_LD_W_ABS, _ARCH)
    names = list(_ABIS)
    for name in names:
        p.op(_JEQ_K, _ABIS[name].arch, f"abi-{name}", 0)
    p.op(_RET_K, _ERRNO | errno.ENOSYS)  # an ABI this filter does not know: nothing at all
    for name in names:
        abi = _ABIS[name]
        p.label(f"abi-{name}")
        p.op(_LD_W_ABS, _NR)
        if name == "x86_64":  # the x32 ABI shares this arch value, with a bit set in the number
            p.op(_JGE_K, _X32_BIT, "nosys", 0)
        for number in abi.keys:
            p.op(_JEQ_K, number, "eperm", 0)
        p.op(_JEQ_K, abi.clone3, "nosys", 0)
        p.op(_JEQ_K, abi.unshare, "flags-arg0", 0)
        p.op(_JEQ_K, abi.clone, "flags-arg0", 0)
        p.op(_JEQ_K, abi.setns, "setns", 0)
        p.op(_RET_K, _ALLOW)
    p.label("flags-arg0")
    p.op(_LD_W_ABS, _arg_low(0))
    p.op(_JSET_K, _CLONE_NEWUSER, "eperm", 0)
    p.op(_RET_K, _ALLOW)
    p.label("setns")  # nstype 0 means "whatever the descriptor is", a user namespace included
    p.op(_LD_W_ABS, _arg_low(1))
    p.op(_JEQ_K, 0, "eperm", 0)
    p.op(_JSET_K, _CLONE_NEWUSER, "eperm", 0)
    p.op(_RET_K, _ALLOW)
    p.label("eperm")
    p.op(_RET_K, _ERRNO | errno.EPERM)
    p.label("nosys")
    p.op(_RET_K, _ERRNO | errno.ENOSYS)
    return p.assemble()


def supported() -> bool:
    """Whether this machine's architecture is one the filter knows."""
    machine = platform.machine()
    return machine in _ABIS or machine in ("amd64", "arm64")


def filter_fd() -> int:
    """A readable descriptor holding the filter, for ``bwrap --seccomp FD`` (the caller
    passes it to the child and closes it)."""
    fd = os.memfd_create("agent-s3-seccomp", 0)
    os.write(fd, desktop_filter())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
