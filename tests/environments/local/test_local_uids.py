"""Desktop uids: one per live desktop on the machine, across processes, freed with the owner."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from environments.walls.uids import FIRST_UID, lease_uid

_OTHER_RUN = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from environments.walls.uids import lease_uid
    lease = lease_uid(Path(sys.argv[1]))
    print(lease.uid, flush=True)
    sys.stdin.read()
    """
)


def test_leases_never_share_a_uid_within_or_across_processes(tmp_path: Path) -> None:
    first, second = lease_uid(tmp_path), lease_uid(tmp_path)
    assert first.uid >= FIRST_UID and second.uid != first.uid
    other = subprocess.Popen(
        [sys.executable, "-c", _OTHER_RUN, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert other.stdout is not None
        theirs = int(other.stdout.readline())
        assert theirs not in (first.uid, second.uid)
    finally:
        other.kill()  # however the other run ends, its uid is free again
        other.wait()
    first.release()
    again = lease_uid(tmp_path)
    assert again.uid in (first.uid, theirs)
    assert (tmp_path.stat().st_mode & 0o777) == 0o700
    second.release()
    again.release()


_NOTE = textwrap.dedent(
    """
    import ctypes, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    L = ctypes.c_long
    name = sys.argv[1].encode()
    if sys.argv[2] == "plant":
        added = libc.syscall(L(248), b"user", name, b"note", L(4), L(-4))
        print("ADDED" if added > 0 else "REFUSED " + os.strerror(ctypes.get_errno()))
    else:
        found = libc.syscall(L(250), L(10), L(-4), b"user", name, L(0))
        print("FOUND" if found > 0 else "NONE")
    """
)


#: A range of uids of this test's own, above the desktops' and the VMs' (100000-101999): in the
#: desktops' range a spare starting in the background took the released uid in every full run,
#: and the test skipped instead of proving anything.
_OWN_FIRST, _OWN_SLOTS = 102500, 20


def _as_uid(uid: int, *args: str) -> str:
    done = subprocess.run(["/usr/bin/python3", "-I", "-S", "-c", _NOTE, *args], user=uid, group=uid,
                          extra_groups=[], capture_output=True, text=True, cwd="/", check=True)  # fmt: skip
    return done.stdout.strip()


@pytest.mark.skipif(os.geteuid() != 0 or platform.machine() != "x86_64", reason="needs root on x86-64")
def test_a_uid_is_lent_again_only_with_empty_keyrings(tmp_path: Path) -> None:
    lease = lease_uid(tmp_path, first=_OWN_FIRST, slots=_OWN_SLOTS)
    name = f"agent-s3-test-note-{lease.uid}"
    assert _as_uid(lease.uid, name, "plant") == "ADDED"  # the host's processes of the uid can
    assert _as_uid(lease.uid, name, "find") == "FOUND"
    lease.release()
    held = [lease_uid(tmp_path, first=_OWN_FIRST, slots=_OWN_SLOTS)]  # the lowest free uid again
    try:
        while held[-1].uid != lease.uid and len(held) < 20 and held[-1].uid < lease.uid + 20:
            held.append(lease_uid(tmp_path, first=_OWN_FIRST, slots=_OWN_SLOTS))
        if held[-1].uid != lease.uid:
            pytest.skip(f"uid {lease.uid} was taken by another run meanwhile")
        assert _as_uid(lease.uid, name, "find") == "NONE"
    finally:
        for one in held:
            one.release()
