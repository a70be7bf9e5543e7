"""Start one Xvfb display with its own cookie, on a display number it picks itself.

Xvfb's ``-displayfd`` lets the server claim the first free number atomically, so parallel
desktops (and other users of Xvfb on the machine) never race for ``:N``. A per-desktop
MIT-MAGIC-COOKIE keeps one desktop's clients off another desktop's screen.
"""

from __future__ import annotations

import os
import secrets
import select
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from core.protocols import EnvError

from .procs import spawn

__all__ = ["XServer", "start_xvfb", "xvfb_log"]


@dataclass(frozen=True, slots=True)
class XServer:
    """A running Xvfb: its process, display string and the client cookie file."""

    proc: subprocess.Popen[bytes]
    display: str
    xauthority: Path


def start_xvfb(
    rundir: Path,
    *,
    client_dir: Path,
    width: int,
    height: int,
    depth: int,
    env: Mapping[str, str],
    client_uid: int,
    client_gid: int,
    timeout: float = 10.0,
) -> XServer:
    """Start Xvfb as the leader of a new process group and wait until it accepts clients.

    The server's cookie file and log stay in ``rundir``; the clients' cookie file goes to
    ``client_dir``, which the unprivileged user can reach.
    """
    cookie = secrets.token_hex(16)
    server_auth = rundir / "xserver.auth"
    client_auth = client_dir / "Xauthority"
    server_auth.touch(mode=0o600)
    # Xvfb loads every cookie in its file whatever display it names; the client file is
    # written once the real number is known.
    subprocess.run(
        ["xauth", "-q", "-f", str(server_auth), "add", ":0", ".", cookie], check=True, env=dict(env)
    )
    read_fd, write_fd = os.pipe()
    try:
        proc = spawn(
            [
                "Xvfb",
                "-displayfd",
                str(write_fd),
                "-screen",
                "0",
                f"{width}x{height}x{depth}",
                "-nolisten",
                "tcp",
                "-auth",
                str(server_auth),
            ],
            env=env,
            process_group=0,
            pass_fds=[write_fd],
            log=rundir / "xvfb.log",
        )
    finally:
        os.close(write_fd)
    try:
        number = _read_display_number(read_fd, proc, timeout)
    finally:
        os.close(read_fd)
    display = f":{number}"
    client_auth.touch(mode=0o600)
    subprocess.run(
        ["xauth", "-q", "-f", str(client_auth), "add", display, ".", cookie], check=True, env=dict(env)
    )
    os.chown(client_auth, client_uid, client_gid)
    return XServer(proc=proc, display=display, xauthority=client_auth)


def _read_display_number(fd: int, proc: subprocess.Popen[bytes], timeout: float) -> int:
    deadline = time.monotonic() + timeout
    buf = b""
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or proc.poll() is not None:
            proc.kill()
            raise EnvError("Xvfb did not start; check that the xvfb package is installed")
        ready, _, _ = select.select([fd], [], [], min(left, 0.1))
        if ready:
            chunk = os.read(fd, 64)
            if not chunk and proc.poll() is not None:
                continue
            buf += chunk
    return int(buf.decode().strip())


def xvfb_log(rundir: Path) -> str:
    """The tail of the display's log, for error messages."""
    try:
        return (rundir / "xvfb.log").read_text(errors="replace")[-2000:]
    except OSError:
        return ""
