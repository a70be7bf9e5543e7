"""One user identity per live desktop on the machine, leased with a lock file.

Two desktops that share a uid can read each other's files and ptrace each other's
processes, so every desktop gets its own uid/gid from a range no login account uses. A lease
is an exclusive `flock` on ``<lock dir>/<uid>.lock`` held by an open descriptor: it lasts as
long as the owner process (any run on the machine), and the kernel drops it when the owner
dies, however it dies. A uid that still owns a live process (a leftover of a crashed run) is
skipped, never reused, and a uid is lent out only once its kernel keyrings are empty
(`clear_keyrings`): nothing of one desktop reaches the next on the same uid.
"""

from __future__ import annotations

import fcntl
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from core.protocols import EnvError

__all__ = ["FIRST_UID", "LOCK_DIR", "SLOTS", "UidLease", "clear_keyrings", "lease_uid", "uid_busy"]

#: Desktop uids are FIRST_UID + slot: above any login or system account (subuid ranges of
#: rootless containers usually start at 100000 too, but this machine runs desktops as root).
FIRST_UID = 100000
SLOTS = 1000
#: Machine-wide, root-only: every run on the machine leases from the same folder.
LOCK_DIR = Path("/run/agent-s3/uids")
_LOCAL = threading.Lock()


@dataclass
class UidLease:
    """A uid (and gid of the same number) that no other live desktop holds."""

    uid: int
    _fd: int | None

    @property
    def gid(self) -> int:
        return self.uid

    def release(self) -> None:
        """Give the uid back; safe to call twice. Call only once nothing runs as the uid."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def uid_busy(uid: int) -> bool:
    """True when a live process runs as ``uid`` (left behind by a crashed owner)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid == uid:
                return True
        except OSError:
            continue
    return False


#: Run as the uid: empty its user keyring, its user session keyring and its persistent
#: keyring (if it has one), then say how many keys are left in the first two.
_CLEAR = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
L = ctypes.c_long
KEYCTL, CLEAR, GET_PERSISTENT, READ = {keyctl}, 7, 22, 11
for ring in (-4, -5):  # the user keyring, the user session keyring
    if libc.syscall(L(KEYCTL), L(CLEAR), L(ring)) != 0:
        sys.exit(f"cannot clear keyring {{ring}}: {{os.strerror(ctypes.get_errno())}}")
persistent = libc.syscall(L(KEYCTL), L(GET_PERSISTENT), L(-1), L(0))  # 0: not linked anywhere
if persistent > 0:
    libc.syscall(L(KEYCTL), L(CLEAR), L(persistent))
left = sum(max(libc.syscall(L(KEYCTL), L(READ), L(ring), None, L(0)), 0) // 4 for ring in (-4, -5))
print(left)
"""
_KEYCTL = {"x86_64": 250, "amd64": 250, "aarch64": 219, "arm64": 219}


def clear_keyrings(uid: int) -> None:
    """Empty the kernel keyrings of `uid` before it is lent out again.

    A uid's user keyring lives as long as the machine, not as long as the uid's processes: a
    key one desktop added would be there for the next desktop (another run's) on that uid.
    Desktops may not touch keyrings at all (`seccomp`); this also clears what was left before
    that, or by anything else that ran as the uid. Needs root; a no-op on an unknown machine.
    """
    import platform
    import shutil
    import subprocess

    number = _KEYCTL.get(platform.machine())
    if number is None or os.geteuid() != 0:
        return
    python = shutil.which("python3", path="/usr/bin:/bin")  # one the uid may run (not root's own)
    if python is None:
        raise OSError("cannot clear a desktop uid's kernel keyrings: no /usr/bin/python3")
    done = subprocess.run(
        [python, "-I", "-S", "-c", _CLEAR.format(keyctl=number)],
        user=uid, group=uid, extra_groups=[], capture_output=True, text=True, timeout=30, cwd="/",
        env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    if done.returncode != 0 or done.stdout.strip() != "0":
        raise OSError(f"cannot clear the kernel keyrings of uid {uid}: {done.stderr.strip() or done.stdout.strip()}")


def lease_uid(lock_dir: Path = LOCK_DIR, *, first: int = FIRST_UID, slots: int = SLOTS) -> UidLease:
    """Lease the first free uid of ``first`` + ``slots`` (the desktops' range by default; VMs
    have their own); raises `EnvError` when all are taken."""
    lock_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(lock_dir, 0o700)
    with _LOCAL:
        for slot in range(slots):
            uid = first + slot
            fd = os.open(lock_dir / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            if uid_busy(uid):
                os.close(fd)
                continue
            try:
                clear_keyrings(uid)
            except OSError:
                os.close(fd)
                raise
            return UidLease(uid=uid, _fd=fd)
    raise EnvError(
        f"all {slots} uids from {first} are in use; close other runs' desktops or VMs "
        "(`agent-s3 env down --all`) first"
    )
