"""One user identity per live desktop on the machine, leased with a lock file.

Two desktops that share a uid can read each other's files and ptrace each other's
processes, so every desktop gets its own uid/gid from a range no login account uses. A lease
is an exclusive `flock` on ``<lock dir>/<uid>.lock`` held by an open descriptor: it lasts as
long as the owner process (any run on the machine), and the kernel drops it when the owner
dies, however it dies. A uid that still owns a live process (a leftover of a crashed run) is
skipped, never reused.
"""

from __future__ import annotations

import fcntl
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from core.protocols import EnvError

__all__ = ["FIRST_UID", "LOCK_DIR", "SLOTS", "UidLease", "lease_uid", "uid_busy"]

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
            return UidLease(uid=uid, _fd=fd)
    raise EnvError(
        f"all {slots} uids from {first} are in use; close other runs' desktops or VMs "
        "(`agent-s3 env down --all`) first"
    )
