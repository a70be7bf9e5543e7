"""One local desktop: Xvfb, openbox, a D-Bus session, a private home, apps and a server.

All of a desktop's processes share one process group (led by Xvfb) and carry the desktop's
marker, and each was started with a parent-death signal, so the desktop can be killed as a
whole and dies with its owner. Methods here block; `LocalProvider` calls them from its
long-lived spawner threads (a parent-death signal fires when the *thread* that forked exits).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from core.protocols import EnvError, EnvironmentLost

from .interpreter import server_python
from .procs import (
    DESKTOP_MARKER,
    POOL_MARKER,
    ProcInfo,
    alive,
    cmdline,
    kill_pids,
    marked_processes,
    pss_kib,
    reap,
    spawn,
    wait_until,
)
from .snapshot import SnapshotSpec, ensure_template, restore_home, snapshot_spec
from .sweep import HOME_PREFIX, RUN_PREFIX
from .x11 import center_pointer, wait_for_window, wait_for_wm
from .xserver import start_xvfb

__all__ = ["DesktopConfig", "DesktopInfo", "LocalDesktop"]

_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True, slots=True)
class DesktopConfig:
    """How desktops are made. ``uid``/``gid`` run the apps and own the home.

    ``sandbox_hide`` lists host folders (run folders, the repository) that sandboxed code must
    not see; the desktops' base folder is always hidden too. Homes live directly in
    ``home_root`` (not under the base folder): the sandbox puts an empty tmpfs over /tmp and
    binds the home back, and bubblewrap makes missing parent folders of a bind 0700 root,
    which would lock the unprivileged user out of a deeper home.
    """

    width: int = 1920
    height: int = 1080
    depth: int = 24
    uid: int = 65534
    gid: int = 65534
    snapshot: str | SnapshotSpec = "blank"
    server: bool = True
    sandbox: bool = True
    accessibility: bool = True
    sandbox_hide: tuple[str, ...] = ()
    home_root: str = "/tmp"
    start_timeout: float = 30.0


@dataclass(frozen=True, slots=True)
class DesktopInfo:
    """What a client needs to reach a desktop, and what `env ls` shows."""

    name: str
    display: str
    pid: int
    port: int | None
    token_file: str | None
    home: str
    marker: str
    pool: str
    width: int
    height: int

    @property
    def base_url(self) -> str | None:
        return None if self.port is None else f"http://127.0.0.1:{self.port}"

    def token(self) -> str | None:
        return None if self.token_file is None else Path(self.token_file).read_text().strip()


@dataclass
class _Procs:
    xvfb: subprocess.Popen[bytes]
    infra: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    apps: list[subprocess.Popen[bytes]] = field(default_factory=list)


class LocalDesktop:
    """A desktop under ``base_dir/desktops/<name>``; snapshots cached in ``base_dir/snapshots``."""

    def __init__(self, name: str, base_dir: Path, config: DesktopConfig, *, pool: str) -> None:
        self.name = name
        self.config = config
        self.pool = pool
        self.marker = f"{name}-{uuid.uuid4().hex[:8]}"
        self.base_dir = Path(base_dir)
        self.dir = self.base_dir / "desktops" / name
        self.home = Path(config.home_root) / f"{HOME_PREFIX}{self.marker}"
        self.run_dir = Path(config.home_root) / f"{RUN_PREFIX}{self.marker}"
        self.spec = snapshot_spec(config.snapshot)
        self._template: Path | None = None
        self._procs: _Procs | None = None
        self._display = ""
        self._xauthority = ""
        self._port: int | None = None
        self._token_file: Path | None = None
        self.start_seconds = 0.0
        self.last_revert_seconds = 0.0

    # -- life cycle ---------------------------------------------------------------------

    def start(self) -> DesktopInfo:
        """Build the home, start display, D-Bus, window manager, server and snapshot apps."""
        t0 = time.monotonic()
        cfg = self.config
        try:
            self._template = ensure_template(self.spec, self.base_dir / "snapshots", uid=cfg.uid, gid=cfg.gid)
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir.mkdir(parents=True)
            self.dir.chmod(0o711)
            (self.dir / "pool").write_text(self.pool)
            (self.dir / "home").write_text(str(self.home))
            (self.dir / "run").write_text(str(self.run_dir))
            self.home.mkdir(mode=0o700)
            self.run_dir.mkdir(mode=0o700)
            os.chown(self.run_dir, cfg.uid, cfg.gid)
            restore_home(self._template, self.home)
            xs = start_xvfb(
                self.dir,
                client_dir=self.run_dir,
                width=cfg.width,
                height=cfg.height,
                depth=cfg.depth,
                env=self._base_env(),
                client_uid=cfg.uid,
                client_gid=cfg.gid,
            )
            self._procs = _Procs(xvfb=xs.proc)
            self._display, self._xauthority = xs.display, str(xs.xauthority)
            self._start_dbus()
            self._procs.infra["wm"] = self._spawn_app(["openbox"], "openbox")
            wait_for_wm(self.app_env(), timeout=cfg.start_timeout)
            if cfg.server:
                self._start_server()
            self._launch_snapshot_apps()
        except EnvError as exc:
            logs = {p.stem: _tail(p, 2) for p in sorted(self.dir.glob("*.log"))}
            self.close()
            detail = "; ".join(f"{k}: {v}" for k, v in logs.items() if v)
            raise EnvError(
                f"desktop {self.name} did not start: {exc}" + (f" ({detail})" if detail else "")
            ) from exc
        except BaseException:
            self.close()
            raise
        self.start_seconds = time.monotonic() - t0
        return self.info()

    def close(self) -> None:
        """Kill every process of the desktop and delete its folder; safe to call twice."""
        procs, self._procs = self._procs, None
        pgids = [procs.xvfb.pid] if procs is not None else []
        for _ in range(3):
            found = marked_processes(desktop=self.marker, pgids=pgids)
            if not found:
                break
            kill_pids([p.pid for p in found])
        if procs is not None:
            for p in [procs.xvfb, *procs.infra.values(), *procs.apps]:
                reap(p)
        shutil.rmtree(self.home, ignore_errors=True)
        shutil.rmtree(self.run_dir, ignore_errors=True)
        shutil.rmtree(self.dir, ignore_errors=True)

    def revert(self, snapshot: str | SnapshotSpec | None = None) -> float:
        """Kill apps, restore the home, restart the snapshot's apps; returns the seconds taken.

        Display, window manager, D-Bus and server stay up. A dead desktop raises
        `EnvironmentLost` instead (the pool replaces it).
        """
        t0 = time.monotonic()
        problem = self.problem()
        if problem is not None:
            raise EnvironmentLost(f"desktop {self.name} is gone: {problem}")
        if snapshot is not None:
            self.spec = snapshot_spec(snapshot)
            self._template = ensure_template(
                self.spec, self.base_dir / "snapshots", uid=self.config.uid, gid=self.config.gid
            )
        self.kill_apps()
        assert self._template is not None
        restore_home(self._template, self.home)
        center_pointer(self.app_env(), self.config.width, self.config.height)
        self._launch_snapshot_apps()
        self.last_revert_seconds = time.monotonic() - t0
        return self.last_revert_seconds

    def kill_apps(self) -> None:
        """Kill every desktop process except display, D-Bus, window manager and server."""
        keep = set(self._infra_pids())
        server = self._procs.infra.get("server") if self._procs is not None else None
        for _ in range(3):
            procs = self.processes()
            if server is not None:
                # The server's warm action executor is part of the server, not an app.
                keep |= {p.pid for p in procs if p.ppid == server.pid and _is_executor(p.pid)}
            apps = [p.pid for p in procs if p.pid not in keep]
            if not apps:
                break
            kill_pids(apps)
        if self._procs is not None:
            for proc in self._procs.apps:
                reap(proc)
            self._procs.apps.clear()

    # -- queries ------------------------------------------------------------------------

    def problem(self) -> str | None:
        """None when display, window manager and server are alive, else what died."""
        if self._procs is None:
            return "not started or closed"
        if not alive(self._procs.xvfb.pid):
            return "the X server exited"
        for role, proc in self._procs.infra.items():
            if not alive(proc.pid):
                return f"the {role} process exited"
        return None

    def processes(self) -> list[ProcInfo]:
        """Live processes of this desktop (by marker or process group)."""
        pgids = [self._procs.xvfb.pid] if self._procs is not None else []
        return marked_processes(desktop=self.marker, pgids=pgids)

    def memory_kib(self) -> int:
        """PSS summed over every process of the desktop (KiB)."""
        return pss_kib(p.pid for p in self.processes())

    def info(self) -> DesktopInfo:
        if self._procs is None:
            raise EnvError(f"desktop {self.name} is not running")
        return DesktopInfo(
            name=self.name,
            display=self._display,
            pid=self._procs.xvfb.pid,
            port=self._port,
            token_file=None if self._token_file is None else str(self._token_file),
            home=str(self.home),
            marker=self.marker,
            pool=self.pool,
            width=self.config.width,
            height=self.config.height,
        )

    def app_env(self) -> dict[str, str]:
        """The environment apps see: this desktop's display, bus and home, and nothing of the runner's."""
        env = self._base_env()
        env.update(
            DISPLAY=self._display,
            XAUTHORITY=self._xauthority,
            HOME=str(self.home),
            USER="user",
            LOGNAME="user",
            SHELL="/bin/bash",
            XDG_RUNTIME_DIR=str(self.run_dir),
            DBUS_SESSION_BUS_ADDRESS=f"unix:path={self.run_dir / 'bus'}",
            GSETTINGS_BACKEND="keyfile",
            XDG_SESSION_TYPE="x11",
            XDG_CURRENT_DESKTOP="openbox",
        )
        if not self.config.accessibility:
            env["NO_AT_BRIDGE"] = "1"
        return env

    # -- internals ----------------------------------------------------------------------

    def _base_env(self) -> dict[str, str]:
        return {"PATH": _PATH, "LANG": "C.UTF-8", DESKTOP_MARKER: self.marker, POOL_MARKER: self.pool}

    def _infra_pids(self) -> list[int]:
        if self._procs is None:
            return []
        return [self._procs.xvfb.pid, *(p.pid for p in self._procs.infra.values())]

    def _spawn_app(self, argv: list[str], log: str) -> subprocess.Popen[bytes]:
        assert self._procs is not None
        return spawn(
            argv,
            env=self.app_env(),
            process_group=self._procs.xvfb.pid,
            uid=self.config.uid,
            gid=self.config.gid,
            cwd=self.home,
            log=self.dir / f"{log}.log",
        )

    def _start_dbus(self) -> None:
        assert self._procs is not None
        bus = self.run_dir / "bus"
        self._procs.infra["dbus"] = self._spawn_app(
            ["dbus-daemon", "--session", "--nofork", "--nopidfile", f"--address=unix:path={bus}"], "dbus"
        )
        wait_until(
            lambda: bus.exists(),
            self.config.start_timeout,
            "the D-Bus session did not start; install dbus-daemon",
        )

    def _start_server(self) -> None:
        assert self._procs is not None
        token = self.dir / "token"
        token.touch(mode=0o600)
        token.write_text(secrets.token_urlsafe(32))
        port_file = self.dir / "port"
        port_file.unlink(missing_ok=True)
        python, pythonpath = server_python(self.config.uid, self.config.gid)
        argv = [
            python,
            "-m",
            "environments.server",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--port-file",
            str(port_file),
            "--token-file",
            str(token),
            "--platform",
            "ubuntu",
            "--run-as",
            str(self.config.uid),
        ]
        if self.config.sandbox:
            argv += ["--sandbox", "bwrap", "--sandbox-home", str(self.home)]
            for path in self._hidden_from_sandbox():
                argv += ["--sandbox-hide", path]
        env = self.app_env()
        env["PYTHONPATH"] = pythonpath
        proc = spawn(
            argv, env=env, process_group=self._procs.xvfb.pid, cwd=self.home, log=self.dir / "server.log"
        )
        self._procs.infra["server"] = proc

        def listening() -> bool:
            if proc.poll() is not None:
                tail = _tail(self.dir / "server.log")
                raise EnvError(f"the controller server exited with code {proc.returncode}: {tail}")
            return port_file.exists() and port_file.read_text().strip().isdigit()

        wait_until(listening, self.config.start_timeout, "the controller server did not start listening")
        self._port = int(port_file.read_text().strip())
        self._token_file = token

    def _hidden_from_sandbox(self) -> list[str]:
        """The base folder, the configured folders and the runner's working folder (where
        run folders and the repository usually are), unless that would hide the home."""
        hidden = [str(self.base_dir), *self.config.sandbox_hide]
        cwd = Path.cwd().resolve()
        if cwd != Path("/") and not self.home.resolve().is_relative_to(cwd):
            hidden.append(str(cwd))
        return list(dict.fromkeys(hidden))

    def _launch_snapshot_apps(self) -> None:
        env = self.app_env()
        for app in self.spec.launch:
            argv = [a.replace("~", str(self.home), 1) if a.startswith("~") else a for a in app.argv]
            proc = self._spawn_app(argv, "apps")
            if self._procs is not None:
                self._procs.apps.append(proc)
        for app in self.spec.launch:
            if app.window:
                wait_for_window(env, app.window, timeout=self.config.start_timeout)


def _tail(path: Path, lines: int = 3) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _is_executor(pid: int) -> bool:
    return any(arg.endswith("executor_child.py") for arg in cmdline(pid))
