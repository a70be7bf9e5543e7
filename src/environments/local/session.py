"""The first process inside a desktop's sandbox: display, bus, window manager, apps, server.

It runs as the desktop's uid, already confined, and makes itself non-dumpable first so the
desktop's own apps (same uid) can neither ptrace it nor read its memory (the bearer token).
The host hands it three inherited descriptors: the listening Unix socket the host created
in a folder the sandbox cannot see (the only way in), a pipe carrying the token (never in
argv or a file), and a pipe on which it reports ``ready`` once the server accepts requests.
If the X server, the bus or the window manager dies, the session ends, and the sandbox and
every process in it with it: the host sees a lost desktop.

The project's own import path (``PYTHONPATH``: its sources and libraries under /opt) is for
this process alone: everything the desktop runs (apps, commands, the coding agent's code,
``python -c`` of OSWorld's controller) gets the desktop's own Python, as on OSWorld's image.

Run by the host as ``python -m environments.local.session --listen-fd N --token-fd N
--ready-fd N --width W --height H [--launch JSON]``.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from core.protocols import EnvError
from environments.walls.system import HOME

from .procs import spawn, wait_until
from .x11 import center_pointer, wait_for_window, wait_for_wm
from .xserver import start_xvfb

__all__ = ["main", "make_undumpable"]

_log = logging.getLogger("environments.local.session")
_PR_SET_DUMPABLE = 4
_RUNTIME = Path("/tmp/runtime-user")
_PRIVATE = Path("/tmp/.agent-s3")
#: Set for this process by the sandbox; never passed on to what the desktop runs.
_PRIVATE_ENV = ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")


def make_undumpable() -> None:
    """prctl(PR_SET_DUMPABLE, 0): same-uid processes may not ptrace us or read /proc/self/mem."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 4096):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def _start_desktop(args: argparse.Namespace) -> dict[str, subprocess.Popen[bytes]]:
    """Xvfb, D-Bus and openbox up, the environment set for everything started later."""
    _RUNTIME.mkdir(mode=0o700, exist_ok=True)
    _PRIVATE.mkdir(mode=0o700, exist_ok=True)
    base = {k: os.environ[k] for k in ("PATH", "LANG", "HOME") if k in os.environ}
    xs = start_xvfb(
        _PRIVATE,
        client_dir=_RUNTIME,
        width=args.width,
        height=args.height,
        depth=args.depth,
        env=base,
        client_uid=os.getuid(),
        client_gid=os.getgid(),
    )
    bus = _RUNTIME / "bus"
    os.environ.update(
        DISPLAY=xs.display,
        XAUTHORITY=str(xs.xauthority),
        XDG_RUNTIME_DIR=str(_RUNTIME),
        DBUS_SESSION_BUS_ADDRESS=f"unix:path={bus}",
        GSETTINGS_BACKEND="keyfile",
        XDG_SESSION_TYPE="x11",
        XDG_CURRENT_DESKTOP="openbox",
    )
    if not args.accessibility:
        os.environ["NO_AT_BRIDGE"] = "1"
    env = dict(os.environ)
    infra = {"X server": xs.proc}
    infra["D-Bus session"] = spawn(
        ["dbus-daemon", "--session", "--nofork", "--nopidfile", f"--address=unix:path={bus}"],
        env=env,
        process_group=0,
        cwd=HOME,
    )
    wait_until(bus.exists, args.start_timeout, "the D-Bus session did not start; install dbus-daemon")
    infra["window manager"] = spawn(["openbox"], env=env, process_group=0, cwd=HOME)
    wait_for_wm(env, timeout=args.start_timeout)
    return infra


def _launch_apps(launch: list[tuple[list[str], str | None]], width: int, height: int) -> None:
    env = dict(os.environ)
    center_pointer(env, width, height)
    for argv, _ in launch:
        argv = [HOME + a[1:] if a.startswith("~") else a for a in argv]
        spawn(argv, env=env, process_group=0, cwd=HOME)


def _wait_windows(launch: list[tuple[list[str], str | None]], timeout: float) -> None:
    env = dict(os.environ)
    for _, window in launch:
        if window:
            wait_for_window(env, window, timeout=timeout)


async def _serve(
    args: argparse.Namespace,
    token: str,
    infra: dict[str, subprocess.Popen[bytes]],
    launch: list[tuple[list[str], str | None]],
) -> int:
    from environments.server.config import ServerConfig
    from environments.server.serve import serve

    # The coding agent's code runs in this session, as the account, with its display, bus and
    # processes (the paper's coding agent acts inside the VM); the desktop is its confinement.
    config = ServerConfig(token=token, platform="ubuntu")
    config.validate()
    listener = socket.socket(fileno=args.listen_fd)
    stop = asyncio.Event()
    died: list[str] = []

    async def watch() -> None:
        while not stop.is_set():
            for role, proc in infra.items():
                if proc.poll() is not None:
                    died.append(role)
                    stop.set()
                    return
            await asyncio.sleep(0.1)

    async def announce() -> None:
        """Ready once the server accepts requests *and* the snapshot's windows are up."""
        try:
            await asyncio.to_thread(_wait_windows, launch, args.start_timeout)
        except EnvError as exc:
            print(f"error: {exc}", file=sys.stderr, flush=True)
            died.append("snapshot's app")
            stop.set()
            return
        _log.info("serving, windows up")
        os.write(args.ready_fd, b"ready\n")
        os.close(args.ready_fd)

    tasks: list[asyncio.Future[None]] = [asyncio.ensure_future(watch())]
    try:
        await serve(
            config, stop=stop, sock=listener, on_ready=lambda: tasks.append(asyncio.ensure_future(announce()))
        )
    finally:
        for task in tasks:
            task.cancel()
    if died:
        print(f"error: the {died[0]} exited; the desktop is lost", file=sys.stderr, flush=True)
        return 3
    return 0


def _preload() -> None:
    """Import the server (aiohttp, PIL, Xlib, mss) while the display starts."""
    import environments.server.serve  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    make_undumpable()
    threading.Thread(target=_preload, daemon=True).start()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    parser = argparse.ArgumentParser(prog="python -m environments.local.session")
    parser.add_argument("--listen-fd", type=int, required=True)
    parser.add_argument("--token-fd", type=int, required=True)
    parser.add_argument("--ready-fd", type=int, required=True)
    parser.add_argument("--width", type=int, default=1920)
    parser.add_argument("--height", type=int, default=1080)
    parser.add_argument("--depth", type=int, default=24)
    parser.add_argument("--no-accessibility", dest="accessibility", action="store_false")
    parser.add_argument("--launch", default="[]", help="JSON list of [argv, window title or null]")
    parser.add_argument("--start-timeout", type=float, default=30.0)
    args = parser.parse_args(argv)
    for name in _PRIVATE_ENV:  # imports are resolved; children get the desktop's own Python
        os.environ.pop(name, None)
    token = _read_all(args.token_fd).decode().strip()
    if not token:
        print("error: no token on --token-fd; the host must write one", file=sys.stderr)
        return 2
    launch = [(list(a), w) for a, w in json.loads(args.launch)]
    t0 = time.monotonic()
    try:
        infra = _start_desktop(args)
        _launch_apps(launch, args.width, args.height)
        _log.info("display, bus and window manager up in %.2f s", time.monotonic() - t0)
    except EnvError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    return asyncio.run(_serve(args, token, infra, launch))


if __name__ == "__main__":
    raise SystemExit(main())
