"""One local desktop, confined like a VM: a bubblewrap sandbox of its own.

Everything of the desktop (Xvfb, D-Bus, openbox, apps, the action executor and the
controller server) runs inside one sandbox (see `confine`): its own uid leased for the
desktop's life, its own pid, mount, IPC, UTS and network namespaces, memory and process
limits (`cgroups`), and a fresh size-limited home at /home/user (`homes`), a tmpfs that
exists only in the sandbox's own mount namespace. The host reaches
the desktop only through a Unix socket it created itself in the desktop's root-only host
folder and handed to the server as a descriptor; the token goes in through a pipe.

Revert replaces the sandbox: the whole pid namespace is killed (nothing an app started
survives, ``setsid`` or not) and its home and uid with it, and a new sandbox with a new home
made from the snapshot takes its place. With ``spare`` on, that new sandbox was started in the
background while the old one was in use (see `sandbox`), so revert is a kill and a socket
rename; without it, or when the spare failed or was made for another snapshot, revert starts
one on the spot. Methods here block; `LocalProvider` calls them from its long-lived spawner
threads (a parent-death signal fires when the *thread* that forked exits).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import threading
import time
import uuid
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from core.protocols import EnvError, EnvironmentLost
from environments.doors.forward import TcpForwarder
from environments.walls.system import HOME

from .homes import drop_home
from .netns import DesktopNetwork
from .procs import ProcInfo, pss_kib
from .sandbox import Sandbox, SandboxSettings
from .snapshot import SnapshotSpec, ensure_template, snapshot_spec
from .spawner import start_in_background

__all__ = ["DesktopConfig", "DesktopInfo", "LocalDesktop", "NetworkMode"]

_log = logging.getLogger(__name__)
#: ``off``: loopback only, always; ``task``: the internet (user-mode NAT, see `netns`) for a
#: task that needs it, loopback only otherwise; ``on``: the NAT for every task.
NetworkMode = Literal["off", "task", "on"]
#: A spare starts at this nice level (back to 0 when it goes live), so while it starts the
#: live desktops' steps keep the CPU; it still finishes in seconds on an idle core.
SPARE_NICE = 10


@dataclass(frozen=True, slots=True)
class DesktopConfig:
    """How desktops are made.

    ``network``: whether the desktop reaches the internet (`NetworkMode`; never the host's
    own network: a user-mode NAT that cannot reach this machine's addresses). With ``task``
    a desktop has loopback only until it is reverted for a task that needs the internet.
    ``sandbox`` offers the coding agent (its code runs in the desktop's session, as
    its account: the desktop is its confinement). ``password`` is the account's, which
    ``sudo`` inside asks for (OSWorld's image: "password"). Limits: ``memory_mib`` (RAM of every process, home and /tmp
    included), ``pids_max`` (processes and threads), ``home_mib`` (the home's size).
    ``tcp_forward`` adds a token-checked door on the host's 127.0.0.1 for tools that need a URL.
    ``spare`` keeps a second sandbox started and waiting, so revert only swaps it in; it costs
    a second desktop's memory (the runner turns it off when the machine has no room for it).
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
    spare: bool = True
    password: str = "password"


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
        self.spec = snapshot_spec(config.snapshot)
        self._template: Path | None = None
        self._settings = SandboxSettings(
            width=config.width,
            height=config.height,
            depth=config.depth,
            accessibility=config.accessibility,
            memory_mib=config.memory_mib,
            pids_max=config.pids_max,
            home_mib=config.home_mib,
            tmp_mib=config.tmp_mib,
            start_timeout=config.start_timeout,
            password=config.password,
        )
        self._forwarder: TcpForwarder | None = None
        self._token = ""
        self._live: Sandbox | None = None
        self._spare: Sandbox | None = None
        self._spare_started: Future[None] | None = None
        self._lock = threading.Lock()  # guards the spare, the serial and the record
        self._serial = 0
        self._closed = False
        self._net: DesktopNetwork | None = None
        self.start_seconds = 0.0
        self.last_revert_seconds = 0.0
        self.last_revert_used_spare = False

    # -- life cycle ---------------------------------------------------------------------

    @property
    def uid(self) -> int:
        if self._live is None:
            raise EnvError(f"desktop {self.name} is not running")
        return self._live.uid

    @property
    def home(self) -> Path | None:
        """The live sandbox's home mount point on the host (empty in the host's namespace)."""
        return None if self._live is None else self._live.home

    @property
    def _namespace(self) -> int | None:
        return None if self._live is None else self._live.namespace

    @property
    def socket_path(self) -> Path:
        return self.dir / "ctl.sock"

    def start(self) -> DesktopInfo:
        """Make the host folder and token, start the sandbox, then a spare in the background."""
        t0 = time.monotonic()
        try:
            _private_dir(self.base_dir)
            _private_dir(self.base_dir / "desktops")
            self._template = ensure_template(self.spec, self.base_dir / "snapshots", uid=0, gid=0)
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir.mkdir(mode=0o700)
            (self.dir / "pool").write_text(self.pool)
            self._token = secrets.token_urlsafe(32)
            token = self.dir / "token"
            token.touch(mode=0o600)
            token.write_text(self._token)
            if self.config.tcp_forward:
                self._forwarder = TcpForwarder(str(self.socket_path))
            self._closed = False
            self._start_live(self.config.network == "on")
        except BaseException:
            self.close()
            raise
        self._start_spare()
        self.start_seconds = time.monotonic() - t0
        return self.info()

    def close(self) -> None:
        """Kill every process of the desktop and its spare, drop homes, uids and folder; safe
        to call twice."""
        with self._lock:
            self._closed = True
        spare = self._take_spare(wait=False)
        if spare is not None:
            spare.close()
        live, self._live = self._live, None
        if live is not None:
            live.close()
        if self._net is not None:
            self._net.close()
            self._net = None
        if self._forwarder is not None:
            self._forwarder.close()
            self._forwarder = None
        if self.dir.is_dir():
            for home in (self.dir / "homes").glob("*") if (self.dir / "homes").is_dir() else []:
                drop_home(home)
            shutil.rmtree(self.dir, ignore_errors=True)

    def revert(
        self, snapshot: str | SnapshotSpec | None = None, *, needs_network: bool | None = None
    ) -> float:
        """Kill the whole sandbox and swap in the spare (else start a new sandbox); returns the
        seconds taken. Either way the desktop comes back on a fresh home and a new pid namespace.

        ``needs_network`` says whether the task about to run needs the internet (None keeps
        the current setting); the `DesktopConfig.network` mode decides what it gets. A spare
        started with the other setting is dropped and a new sandbox started.

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
        spare = self._take_spare(wait=True, network=network)
        old, self._live = self._live, None
        if old is not None:
            old.close()  # every process of the old sandbox dead, its home and uid dropped
        try:
            if spare is not None:
                self._live = spare
                spare.go_live(self.socket_path)
                self._record()
            else:
                self._start_live(network)
        except EnvError as exc:
            raise EnvironmentLost(f"desktop {self.name} did not come back after revert: {exc}") from exc
        self.last_revert_used_spare = spare is not None
        self._start_spare()
        self.last_revert_seconds = time.monotonic() - t0
        return self.last_revert_seconds

    def wait_spare(self, timeout: float) -> bool:
        """Block until the spare serves (True), or fails, is off or ``timeout`` passes (False)."""
        with self._lock:
            started, spare = self._spare_started, self._spare
        if started is None or spare is None:
            return False
        try:
            started.result(timeout=timeout)
        except (FutureTimeout, EnvError):
            return False
        return spare.problem() is None

    # -- queries ------------------------------------------------------------------------

    def problem(self) -> str | None:
        """None while the sandbox (and so display, bus, window manager, server) runs, else why not."""
        if self._live is None:
            return "not started or closed"
        return self._live.problem()

    def processes(self) -> list[ProcInfo]:
        """Live processes of this desktop: its whole pid namespace (the spare's not included)."""
        return [] if self._live is None else self._live.processes()

    def spare_processes(self) -> list[ProcInfo]:
        """Processes of the spare sandbox (none while it is off or not started)."""
        with self._lock:
            spare = self._spare
        return [] if spare is None else spare.processes()

    @property
    def spare_namespace(self) -> int | None:
        """The spare's pid namespace (None until it serves, and without a spare)."""
        with self._lock:
            spare = self._spare
        return None if spare is None else spare.namespace

    @property
    def spare_uid(self) -> int | None:
        """The uid the spare holds (None without a spare)."""
        with self._lock:
            spare = self._spare
        try:
            return None if spare is None else spare.uid
        except EnvError:
            return None

    def memory_kib(self) -> int:
        """PSS summed over every process of the desktop (KiB)."""
        return pss_kib(p.pid for p in self.processes())

    def spare_memory_kib(self) -> int:
        """PSS summed over every process of the spare (KiB): what keeping a spare costs."""
        return pss_kib(p.pid for p in self.spare_processes())

    def infra_pids(self) -> dict[str, int]:
        """Host pids of the display, bus, window manager, server (the session) and the
        desktop's root broker (for fault injection)."""
        roles = {"Xvfb": "xvfb", "dbus-daemon": "dbus", "openbox": "wm"}
        found: dict[str, int] = {}
        live = self._live
        init = None if live is None else live.init_pid
        processes = self.processes()
        root = [p.pid for p in processes if p.ppid == init]
        for p in processes:
            if p.comm in roles:
                found.setdefault(roles[p.comm], p.pid)
            elif p.ppid == init:
                found.setdefault("root", p.pid)
            elif p.ppid in root and live is not None and p.uid == live.uid:
                found.setdefault("server", p.pid)
        return found

    def info(self) -> DesktopInfo:
        live = self._live
        if live is None or live.pid is None:
            raise EnvError(f"desktop {self.name} is not running")
        return DesktopInfo(
            name=self.name,
            display=":0",
            pid=live.xvfb_pid if live.xvfb_pid is not None else live.pid,
            port=None if self._forwarder is None else self._forwarder.port,
            token_file=str(self.dir / "token"),
            home=HOME,
            marker=self.marker,
            pool=self.pool,
            width=self.config.width,
            height=self.config.height,
            socket=str(self.socket_path),
            user="user",
            uid=live.uid,
            network=live.network,
        )

    @property
    def network(self) -> bool:
        """Whether the live sandbox reaches the internet (through the desktop's NAT)."""
        live = self._live
        return live is not None and live.network

    # -- internals ----------------------------------------------------------------------

    def _new_sandbox(self, network: bool, *, nice: int = 0) -> Sandbox:
        assert self._template is not None
        net = self._ensure_network() if network else None
        with self._lock:
            self._serial += 1
            serial = self._serial
        return Sandbox(
            self.dir,
            serial,
            marker=self.marker,
            spec=self.spec,
            template=self._template,
            token=self._token,
            settings=self._settings,
            net=net,
            nice=nice,
            on_record=self._record,
        )

    def _start_live(self, network: bool) -> None:
        """A new sandbox started here (in the desktop's NAT namespace when ``network``) and made
        the one clients reach."""
        sandbox = self._new_sandbox(network)
        self._live = sandbox
        try:
            sandbox.start()
        except EnvError as exc:
            raise EnvError(f"desktop {self.name}: {exc}") from exc
        sandbox.go_live(self.socket_path)
        self._record()

    def _start_spare(self) -> None:
        """Start the next sandbox in the background (when spares are on and none is held)."""
        if not self.config.spare:
            return
        # The next task most likely wants what this one had (a bench runs a domain's tasks in a
        # row); a revert that wants the other setting drops the spare.
        spare = self._new_sandbox(self.network, nice=SPARE_NICE)
        with self._lock:
            if self._closed or self._spare is not None:
                return
            self._spare = spare
            self._spare_started = start_in_background(spare.start)
        self._spare_started.add_done_callback(lambda _: self._record())

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

    def _take_spare(self, *, wait: bool, network: bool = False) -> Sandbox | None:
        """Hand the spare over (waiting for it to serve when ``wait``), or None when there is
        none or it failed or was made for another snapshot or network setting (those are
        closed here)."""
        with self._lock:
            spare, started = self._spare, self._spare_started
            self._spare, self._spare_started = None, None
        if spare is None or started is None:
            return None
        keep = (
            wait
            and spare.spec == self.spec
            and spare.template == self._template
            and spare.net is (self._net if network else None)
        )
        if not keep:
            spare.abort()  # a start still under way ends now rather than being waited for
        try:
            if keep and not started.done():
                spare.boost()  # the revert waits for it: no longer in the background
            started.result()
        except Exception as exc:  # any failure to start: the spare is dropped, revert starts anew
            if keep:
                _log.warning("desktop %s: the spare did not start (%s); starting a new sandbox", self.name, exc)
            spare.close()
            return None
        problem = spare.problem()
        if keep and problem is not None:
            _log.warning("desktop %s: the spare died (%s); starting a new sandbox", self.name, problem)
        if not keep or problem is not None:
            spare.close()
            return None
        return spare

    def _record(self) -> None:
        """What the watchdog and `sweep` need to kill this desktop's sandboxes without us."""
        with self._lock:
            sandboxes = [s.record() for s in (self._live, self._spare) if s is not None and s.recordable]
            temp = self.dir / ".sandbox.json.tmp"
            try:
                temp.write_text(json.dumps({"sandboxes": sandboxes}))
                os.replace(temp, self.dir / "sandbox.json")
            except FileNotFoundError:
                pass  # the desktop was closed meanwhile and its folder is gone


def _private_dir(path: Path) -> None:
    """A root-owned 0700 folder (made if missing, tightened if it existed)."""
    path.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():
        raise EnvError(f"{path} is a symlink; remove it and start again")
    os.chmod(path, 0o700)
