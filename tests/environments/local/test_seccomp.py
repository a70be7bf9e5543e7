"""The desktops' seccomp filter, on its own: under bubblewrap with it, a process cannot make a
user namespace or touch a keyring, and still starts threads, forks and execs (glibc falls
back from clone3 to clone)."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess

import pytest

from environments.walls.seccomp import desktop_filter, filter_fd, supported

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("bwrap") is None or not supported() or platform.machine() != "x86_64",
    reason="needs root, bwrap and x86-64 (the probe's system call numbers)",
)

_PROBE = """
set -u
python3 -c "
import threading, subprocess, os, ctypes
t = threading.Thread(target=lambda: None); t.start(); t.join()
assert subprocess.run(['true']).returncode == 0
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
libc = ctypes.CDLL(None, use_errno=True); libc.syscall.restype = ctypes.c_long
L = ctypes.c_long
print('add_key', libc.syscall(L(248), b'user', b'x', b'y', L(1), L(-4)), os.strerror(ctypes.get_errno()))
print('keyctl', libc.syscall(L(250), L(0), L(-4), L(0)), os.strerror(ctypes.get_errno()))
print('threads-fork-exec ok')
"
unshare -Ur true 2>/dev/null && echo USERNS-OPEN || echo userns-refused
bwrap --unshare-user --dev-bind / / true 2>/dev/null && echo NESTED-OPEN || echo nested-refused
"""


def test_no_user_namespace_no_keyring_and_the_rest_works() -> None:
    assert len(desktop_filter()) % 8 == 0
    fd = filter_fd()
    try:
        done = subprocess.run(
            ["bwrap", "--seccomp", str(fd), "--dev-bind", "/", "/", "--unshare-pid", "--",
             "setpriv", "--reuid=100999", "--regid=100999", "--clear-groups", "--no-new-privs",
             "bash", "-c", _PROBE],
            pass_fds=(fd,), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        os.close(fd)
    out = done.stdout
    assert "threads-fork-exec ok" in out, done.stderr[-1000:]
    assert "add_key -1 Operation not permitted" in out and "keyctl -1 Operation not permitted" in out
    assert "userns-refused" in out and "nested-refused" in out and "OPEN" not in out
