"""One local desktop, confined like a VM: a bubblewrap sandbox of its own.

Everything of the desktop (Xvfb, D-Bus, openbox, apps, the action executor and the
controller server) runs inside one sandbox (see `confine`): its own uid leased for the
desktop's life, its own pid, mount, IPC, UTS and network namespaces, memory and process
limits (`cgroups`), and a fresh size-limited home at /home/user (`homes`), a tmpfs that
exists only in the sandbox's own mount namespace. The host reaches
the desktop only through a Unix socket it created itself in the desktop's root-only host
folder and handed to the server as a descriptor; the token goes in through a pipe.

Revert replaces the sandbox: the whole pid namespace is killed (nothing an app started
survives, ``setsid`` or not) and its home with it, and a new sandbox with a new home made
from the snapshot starts on the same listening socket. Methods here block; `LocalProvider`
calls them from its long-lived spawner threads (a parent-death signal fires when the
*thread* that forked exits).
"""

from __future__ import annotations

import json
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from core.protocols import EnvError, EnvironmentLost

from .cgroups import DesktopCgroup
from .confine import HOME, Confinement, group_file, passwd_file, sandbox_python
from .forward import TcpForwarder
from .homes import drop_home, home_setup_argv, new_home_dir
from .netns import DesktopNetwork
from .procs import ProcInfo, children, kill_pids, namespace_processes, pid_namespace, pss_kib
from .snapshot import SnapshotSpec, ensure_template, snapshot_spec
from .uids import UidLease, lease_uid

__all__ = ["DesktopConfig", "DesktopInfo", "LocalDesktop", "NetworkMode"]

_MIB = 1024 * 1024
#: ``off``: loopback only, always; ``task``: the internet (user-mode NAT, see `netns`) for a
#: task that needs it, loopback only otherwise; ``on``: the NAT for every task.
NetworkMode = Literal["off", "task", "on"]


@dataclass(frozen=True, slots=True)
class DesktopConfig:
    """How desktops are made.

    ``network``: whether the desktop reaches the internet (`NetworkMode`; never the host's
    own network: a user-mode NAT that cannot reach this machine's addresses). With ``task``
    a desktop has loopback only until it is reverted for a task that needs the internet.
    ``sandbox`` runs the coding agent's code in a further
    sandbox inside the desktop (private /tmp, no view of the desktop's other files' changes
    outside the home). Limits: ``memory_mib`` (RAM of every process, home and /tmp
    included), ``pids_max`` (processes and threads), ``home_mib`` (the home's size).
    ``tcp_forward`` adds a token-checked door on the host's 127.0.0.1 for tools that need a URL.
    """

    width: int = 1920
    height: int = 1080
    depth: int = 24
    snapshot: str | SnapshotSpec = "blank"
    server: bool = True
    sandbox: bool = True
    accessibility: bool = True
    network: NetworkMode = "task"
    memory_mib: int = 4096
    pids_max: int = 1024
    home_mib: int = 1024
    tmp_mib: int = 512
    tcp_forward: bool = False
    start_timeout: float = 30.0


@dataclass(frozen=True, slots=True)
class DesktopInfo:
    """What a client needs to reach a desktop, and what `env ls` shows.

    ``pid`` is the X server's host pid (its death loses the desktop, as for any part of it);
    ``socket`` is the host-side Unix socket of the controller server; ``port`` is set only
    when a TCP forwarder on 127.0.0.1 was asked for. ``home`` and ``user`` are as seen inside.
    """

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
    socket: str | None = None
    user: str = "user"
    uid: int | None = None
    #: Whether the desktop reaches the internet (through its user-mode NAT) right now.
    network: bool = False

    @property
    def base_url(self) -> str | None:
        """An http URL for clients: the TCP forwarder's, else a placeholder host for the socket."""
        if self.port is not None:
            return f"http://127.0.0.1:{self.port}"
        return None if self.socket is None else "http://desktop"

    def token(self) -> str | None:
        return None if self.token_file is None else Path(self.token_file).read_text().strip()


class LocalDesktop:
    """A desktop whose host folder is ``base_dir/desktops/<name>``; snapshots in ``base_dir/snapshots``."""

    def __init__(self, name: str, base_dir: Path, config: DesktopConfig, *, pool: str) -> None:
        self.name = name
        self.config = config
        self.pool = pool
        self.marker = f"{name}-{uuid.uuid4().hex[:8]}"
        self.base_dir = Path(base_dir)
        self.dir = self.base_dir / "desktops" / name
        self.home: Path | None = None
        self.spec = snapshot_spec(config.snapshot)
        self._template: Path | None = None
        self._lease: UidLease | None = None
        self._cgroup: DesktopCgroup | None = None
        self._listener: socket.socket | None = None
        self._forwarder: TcpForwarder | None = None
        self._token = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._namespace: int | None = None
        self._init_pid: int | None = None
        self._xvfb_pid: int | None = None
        self._net: DesktopNetwork | None = None
        #: Whether the running sandbox reaches the internet (through the NAT).
        self.network = False
        self.start_seconds = 0.0
        self.last_revert_seconds = 0.0

    # -- life cycle ---------------------------------------------------------------------

    @property
    def uid(self) -> int:
        if self._lease is None:
            raise EnvError(f"desktop {self.name} is not running")
        return self._lease.uid

    @property
    def socket_path(self) -> Path:
        return self.dir / "ctl.sock"

    def start(self) -> DesktopInfo:
        """Lease a uid, make the host folder, a home and the listening socket, start the sandbox."""
        t0 = time.monotonic()
        try:
            _private_dir(self.base_dir)
            _private_dir(self.base_dir / "desktops")
            self._template = ensure_template(self.spec, self.base_dir / "snapshots", uid=0, gid=0)
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir.mkdir(mode=0o700)
            (self.dir / "pool").write_text(self.pool)
            self._lease = lease_uid()
            self._cgroup = DesktopCgroup(
                self.marker, memory_bytes=self.config.memory_mib * _MIB, pids_max=self.config.pids_max
            )
            self._token = secrets.token_urlsafe(32)
            token = self.dir / "token"
            token.touch(mode=0o600)
            token.write_text(self._token)
            self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._listener.bind(str(self.socket_path))
            os.chmod(self.socket_path, 0o600)
            self._listener.listen(128)
            if self.config.tcp_forward:
                self._forwarder = TcpForwarder(str(self.socket_path))
            self._launch(self.config.network == "on")
        except BaseException:
            self.close()
            raise
        self.start_seconds = time.monotonic() - t0
        return self.info()

    def close(self) -> None:
        """Kill every process of the desktop, drop its home, uid and folder; safe to call twice."""
        self._kill_sandbox()
        if self._net is not None:
            self._net.close()
            self._net = None
        if self._cgroup is not None:
            self._cgroup.remove()
            self._cgroup = None
        if self._forwarder is not None:
            self._forwarder.close()
            self._forwarder = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._lease is not None:
            self._lease.release()
            self._lease = None
        if self.dir.is_dir():
            for home in (self.dir / "homes").glob("*") if (self.dir / "homes").is_dir() else []:
                drop_home(home)
            shutil.rmtree(self.dir, ignore_errors=True)
        self.home = None

    def revert(
        self, snapshot: str | SnapshotSpec | None = None, *, needs_network: bool | None = None
    ) -> float:
        """Kill the whole sandbox, give it a fresh home, start it again; returns the seconds taken.

        ``needs_network`` says whether the task about to run needs the internet (None keeps
        the current setting); the `DesktopConfig.network` mode decides what it gets.
        A dead desktop raises `EnvironmentLost` instead (the pool replaces it).
        """
        t0 = time.monotonic()
        problem = self.problem()
        if problem is not None:
            raise EnvironmentLost(f"desktop {self.name} is gone: {problem}")
        if snapshot is not None:
            self.spec = snapshot_spec(snapshot)
            self._template = ensure_template(self.spec, self.base_dir / "snapshots", uid=0, gid=0)
        mode = self.config.network
        network = mode == "on" or (
            mode == "task" and (self.network if needs_network is None else needs_network)
        )
        if network:  # before the kill: a host that cannot give the NAT keeps the desktop as it was
            self._ensure_network()
        self._kill_sandbox()
        try:
            self._launch(network)
        except EnvError as exc:
            raise EnvironmentLost(f"desktop {self.name} did not come back after revert: {exc}") from exc
        self.last_revert_seconds = time.monotonic() - t0
        return self.last_revert_seconds

    # -- queries ------------------------------------------------------------------------

    def problem(self) -> str | None:
        """None while the sandbox (and so display, bus, window manager, server) runs, else why not."""
        if self._proc is None:
            return "not started or closed"
        code = self._proc.poll()
        if code is not None:
            return f"the desktop session exited with code {code}: {self._log_tail()}"
        return None

    def processes(self) -> list[ProcInfo]:
        """Live processes of this desktop: its whole pid namespace."""
        return [] if self._namespace is None else namespace_processes(self._namespace)

    def memory_kib(self) -> int:
        """PSS summed over every process of the desktop (KiB)."""
        return pss_kib(p.pid for p in self.processes())

    def infra_pids(self) -> dict[str, int]:
        """Host pids of the display, bus, window manager and server (for fault injection)."""
        roles = {"Xvfb": "xvfb", "dbus-daemon": "dbus", "openbox": "wm"}
        found: dict[str, int] = {}
        for p in self.processes():
            if p.comm in roles:
                found.setdefault(roles[p.comm], p.pid)
            elif p.ppid == self._init_pid:
                found.setdefault("server", p.pid)
        return found

    def info(self) -> DesktopInfo:
        if self._proc is None:
            raise EnvError(f"desktop {self.name} is not running")
        return DesktopInfo(
            name=self.name,
            display=":0",
            pid=self._xvfb_pid if self._xvfb_pid is not None else self._proc.pid,
            port=None if self._forwarder is None else self._forwarder.port,
            token_file=str(self.dir / "token"),
            home=HOME,
            marker=self.marker,
            pool=self.pool,
            width=self.config.width,
            height=self.config.height,
            socket=str(self.socket_path),
            user="user",
            uid=self.uid,
            network=self.network,
        )

    # -- internals ----------------------------------------------------------------------

    def _launch(self, network: bool) -> None:
        """A new home and a new sandbox on the listening socket; waits until it serves.
        With ``network`` the sandbox joins the desktop's NAT namespace (made on first use,
        kept across reverts), else it gets loopback only."""
        assert self._template is not None and self._lease is not None and self._listener is not None
        cfg = self.config
        netns = tuple(self._ensure_network().enter_argv()) if network else ()
        self.home = new_home_dir(self.dir / "homes")
        home_setup = home_setup_argv(self._template, self.home, uid=self.uid, size_bytes=cfg.home_mib * _MIB)
        confinement = Confinement(
            uid=self.uid, gid=self.uid, home=self.home, netns=netns,
            resolv_conf=self._net.resolv_conf if netns and self._net is not None else None,
            tmp_bytes=cfg.tmp_mib * _MIB,
        )  # fmt: skip
        launch = [[list(a.argv), a.window] for a in self.spec.launch]
        token_r, token_w = os.pipe()
        ready_r, ready_w = os.pipe()
        passwd = _memfd("passwd", passwd_file(self.uid, self.uid))
        group = _memfd("group", group_file(self.uid))
        listen_fd = self._listener.fileno()
        program = [
            sandbox_python(), "-m", "environments.local.session",
            "--listen-fd", str(listen_fd), "--token-fd", str(token_r), "--ready-fd", str(ready_w),
            "--width", str(cfg.width), "--height", str(cfg.height), "--depth", str(cfg.depth),
            "--launch", json.dumps(launch), "--start-timeout", str(cfg.start_timeout),
        ]  # fmt: skip
        if not cfg.accessibility:
            program.append("--no-accessibility")
        if not cfg.sandbox:
            program.append("--no-sandbox")
        join = self._cgroup.join_argv() if self._cgroup is not None else []
        argv = [*join, *home_setup, *confinement.argv(program, passwd_fd=passwd, group_fd=group)]
        log = self.dir / "session.log"
        try:
            os.write(token_w, self._token.encode())
            os.close(token_w)
            token_w = -1
            with log.open("ab") as out:
                self._proc = subprocess.Popen(
                    argv,
                    env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    pass_fds=(listen_fd, token_r, ready_w, passwd, group),
                    process_group=0,
                    close_fds=True,
                )
        finally:
            for fd in (token_r, ready_w, passwd, group, token_w):
                if fd >= 0:
                    os.close(fd)
        try:
            self._wait_ready(ready_r)
        finally:
            os.close(ready_r)
        self.network = network
        self._record()

    def _ensure_network(self) -> DesktopNetwork:
        """The desktop's NAT namespace, made on first use (or again if its helpers died)."""
        if self._net is not None and not self._net.alive():
            self._net.close()
            self._net = None
        if self._net is None:
            net = DesktopNetwork(self.dir)
            net.start()
            self._net = net
        return self._net

    def _wait_ready(self, fd: int) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.config.start_timeout + 10
        buf = b""
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self._kill_sandbox()
                raise EnvError(f"desktop {self.name} did not start within {self.config.start_timeout:g} s")
            ready, _, _ = select.select([fd], [], [], min(left, 0.2))
            if ready:
                chunk = os.read(fd, 64)
                if not chunk:
                    self._proc.wait(timeout=10)
                    tail = self._log_tail()
                    self._kill_sandbox()
                    raise EnvError(f"desktop {self.name} did not start: {tail}")
                buf += chunk
        init = children(self._proc.pid)
        self._init_pid = init[0] if init else None
        self._namespace = pid_namespace(self._init_pid) if self._init_pid is not None else None
        found = [p.pid for p in self.processes() if p.comm == "Xvfb"]
        self._xvfb_pid = found[0] if found else None

    def _record(self) -> None:
        """What the watchdog and `sweep` need to kill this desktop without us."""
        record = {
            "pid": self._proc.pid if self._proc else None,
            "init": self._init_pid,
            "namespace": self._namespace,
            "cgroup": self.marker,
        }
        temp = self.dir / ".sandbox.json.tmp"
        temp.write_text(json.dumps(record))
        os.replace(temp, self.dir / "sandbox.json")

    def _kill_sandbox(self) -> None:
        """SIGKILL the namespace's first process (the kernel kills every other one), then
        whatever the cgroup still holds; drop the home once nothing can use it."""
        proc, self._proc = self._proc, None
        if self._init_pid is not None and pid_namespace(self._init_pid) == self._namespace:
            _kill(self._init_pid)
        if proc is not None:
            _kill(proc.pid)
        if self._cgroup is not None:
            self._cgroup.kill()
        if self._namespace is not None:
            for _ in range(3):
                left = namespace_processes(self._namespace)
                if not left:
                    break
                kill_pids([p.pid for p in left])
        if proc is not None:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._init_pid = None
        self._xvfb_pid = None
        self._namespace = None
        if self.home is not None:
            drop_home(self.home)
            self.home = None

    def _log_tail(self, lines: int = 3) -> str:
        try:
            text = (self.dir / "session.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        errors = [line for line in text if line.startswith("error:")]
        return " | ".join((errors or text)[-lines:]) or "(no output)"


def _private_dir(path: Path) -> None:
    """A root-owned 0700 folder (made if missing, tightened if it existed)."""
    path.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():
        raise EnvError(f"{path} is a symlink; remove it and start again")
    os.chmod(path, 0o700)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
