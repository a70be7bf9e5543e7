"""One started confinement of a desktop: its uid lease, control groups, home, socket, session.

A desktop runs one live sandbox and, when asked, a spare: a second, complete sandbox (fresh
home from the snapshot, display, window manager, the snapshot's apps, server ready) waiting
for the next revert. The two never share anything the desktop's apps can touch: each has
its own uid lease (a spare is started while the live sandbox holds its lease, so the uids
differ; a uid comes back only after `close` has seen every process of it dead), its own
groups, pid namespace, home and listening socket. A sandbox binds its socket under a
private name in the desktop's root-only folder; going live renames it over ``ctl.sock`` in
one step, so clients reach the new server and never a half-started one. A spare starts at a
lower CPU weight, so starting it takes little from the live desktops' steps, and gets its
owner's weight back when it goes live. Nothing reaches a spare before then: no client knows
its socket and the model has not seen it, so the home it brings is the snapshot's.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import select
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.protocols import EnvError
from environments.walls.seccomp import filter_fd
from environments.walls.system import group_file, passwd_file, sandbox_python
from environments.walls.uids import UidLease, lease_uid, uid_busy

from .cgroups import DesktopCgroup
from .confine import Confinement
from .homes import drop_home, home_setup_argv, new_home_dir
from .netns import DesktopNetwork
from .procs import ProcInfo, children, kill_pids, namespace_processes, pid_namespace
from .snapshot import SnapshotSpec

__all__ = ["Sandbox", "SandboxSettings"]

_MIB = 1024 * 1024
_log = logging.getLogger(__name__)
#: How long a killed sandbox's processes may take to leave /proc before it is logged as an error.
_GONE_S = 10.0


@dataclass(frozen=True, slots=True)
class SandboxSettings:
    """What every sandbox of one desktop is started with."""

    width: int
    height: int
    depth: int
    accessibility: bool
    memory_mib: int
    pids_max: int
    home_mib: int
    tmp_mib: int
    start_timeout: float
    #: The account's password, which ``sudo`` inside asks for (OSWorld's image: "password").
    password: str = "password"


class Sandbox:
    """A sandbox numbered ``serial`` in the desktop folder ``folder``; `start` blocks until it serves.

    `abort` may be called from another thread while `start` waits: the start then fails at once.
    """

    def __init__(
        self,
        folder: Path,
        serial: int,
        *,
        marker: str,
        spec: SnapshotSpec,
        template: Path,
        token: str,
        settings: SandboxSettings,
        net: DesktopNetwork | None = None,
        nice: int = 0,
        on_record: Callable[[], None] | None = None,
    ) -> None:
        """``nice`` > 0 starts every process of the sandbox that much lower in CPU priority than
        its owner (a spare, so its start does not slow the live desktops' steps); `go_live`
        brings them back to the owner's level, where a sandbox started live runs."""
        self.folder = folder
        self.serial = serial
        self.spec = spec
        self.template = template
        self.socket_path = folder / f"sock-{serial}"
        self.log = folder / f"session-{serial}.log"
        self.home: Path | None = None
        #: The desktop's NAT namespace this sandbox joins (None: loopback only).
        self.net = net
        self.namespace: int | None = None
        self.init_pid: int | None = None
        self.xvfb_pid: int | None = None
        self.start_seconds = 0.0
        self._marker = f"{marker}-{serial}"
        self._token = token
        self._settings = settings
        self._lease: UidLease | None = None
        #: The host uid that is root inside (see `confine`), leased like the account's.
        self._root_lease: UidLease | None = None
        self._cgroup: DesktopCgroup | None = None
        self._listener: socket.socket | None = None
        self._socket_ino: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._aborted = False
        self._nice = nice
        #: Called once the sandbox has something to reap (its groups, then its first process),
        #: so that it is on record before any process of it exists (`record`).
        self._on_record = on_record
        self._base_nice = os.getpriority(os.PRIO_PROCESS, 0)
        self._base_group_nice = _autogroup_nice()

    @property
    def network(self) -> bool:
        """Whether this sandbox reaches the internet (through its desktop's NAT)."""
        return self.net is not None

    @property
    def uid(self) -> int:
        if self._lease is None:
            raise EnvError(f"sandbox {self.socket_path} holds no uid")
        return self._lease.uid

    @property
    def root_uid(self) -> int:
        """The host uid of the desktop's root (an unprivileged uid of the desktops' range)."""
        if self._root_lease is None:
            raise EnvError(f"sandbox {self.socket_path} holds no root uid")
        return self._root_lease.uid

    @property
    def pid(self) -> int | None:
        """Host pid of the sandbox's outermost process (None before start and after close)."""
        return None if self._proc is None else self._proc.pid

    # -- life cycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Lease a uid, make groups, socket and home, start the session; wait until it serves.

        On failure the sandbox is killed but keeps its lease; the caller calls `close`.
        """
        t0 = time.monotonic()
        cfg = self._settings
        self._lease = lease_uid()
        self._root_lease = lease_uid()
        self._cgroup = DesktopCgroup(self._marker, memory_bytes=cfg.memory_mib * _MIB, pids_max=cfg.pids_max)
        if self._on_record is not None:  # on record before it is spawned: its groups can be reaped
            self._on_record()
        self.socket_path.unlink(missing_ok=True)
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self.socket_path))
        os.chmod(self.socket_path, 0o600)
        self._socket_ino = self.socket_path.stat().st_ino
        self._listener.listen(128)
        self.home = new_home_dir(self.folder / "homes")
        ready_r = self._spawn()
        try:
            self._wait_ready(ready_r)
        finally:
            os.close(ready_r)
        with self._lock:
            if self._nice:  # sessions its processes started on the way (an executor's) too
                _set_group_nice(self._members(), min(19, self._base_group_nice + self._nice))
        self.start_seconds = time.monotonic() - t0

    def go_live(self, path: Path) -> None:
        """Make this sandbox's server the one clients reach at ``path`` (an atomic rename), at
        normal CPU priority."""
        self.boost()
        os.replace(self.socket_path, path)
        self.socket_path = path

    def _nice_session(self, outer: int) -> bool:
        """Lower the CPU weight of the sandbox's session once its first process exists.

        bubblewrap starts a new session, and the scheduler weighs sessions against each other
        by their autogroup's nice level (a thread's own nice counts only inside its group), so
        the group is niced too. True once done."""
        init = children(outer)
        with self._lock:
            if not self._nice:
                return True  # boosted meanwhile
            return bool(init) and _set_group_nice(init, min(19, self._base_group_nice + self._nice)) > 0

    def boost(self) -> None:
        """Back to the owner's CPU weight now (a revert is waiting for this spare to start)."""
        with self._lock:
            if self._nice:
                self._renice()

    def _members(self) -> list[int]:
        """Host pids of every process of the sandbox: its groups', its namespace's, and the
        outermost process's descendants (while it starts, before it has joined either)."""
        pids = self._cgroup.pids() if self._cgroup is not None else set()
        with_outer = set() if self._proc is None else _descendants(self._proc.pid)
        return sorted(pids | with_outer | {p.pid for p in self.processes()})

    def _renice(self) -> None:
        """Every thread of the sandbox back to the owner's nice level.

        Passes repeat until one changes nothing: a thread forked by a still-niced parent
        during a pass is caught by the next, and once a pass sees every thread at the level,
        threads made later descend from those and start there too.
        """
        for _ in range(50):
            changed = 0
            for pid in self._members():
                try:
                    threads = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
                except OSError:
                    continue
                for tid in threads:
                    try:
                        if os.getpriority(os.PRIO_PROCESS, tid) != self._base_nice:
                            os.setpriority(os.PRIO_PROCESS, tid, self._base_nice)
                            changed += 1
                    except OSError:
                        continue  # the thread ended
            if not changed:
                _set_group_nice(self._members(), self._base_group_nice)
                self._nice = 0
                return
        raise EnvError("the spare's threads kept being made at low priority; not using it")

    def abort(self) -> None:
        """Stop a start in progress (from any thread): kill what runs, make `start` fail."""
        with self._lock:
            self._aborted = True
        self.kill()

    def kill(self) -> None:
        """SIGKILL the namespace's first process (the kernel kills every other one), then
        whatever the groups still hold, until nothing of the sandbox is left."""
        with self._lock:
            proc = self._proc
        if self.init_pid is not None and pid_namespace(self.init_pid) == self.namespace:
            _kill(self.init_pid)
            if proc is not None:
                # bubblewrap's outer process reaps its init and exits: killed first, it would
                # leave the init a zombie of the desktop's root uid until the host's init reaps it.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=1.0)
        if proc is not None:
            _kill(proc.pid)
        if self._cgroup is not None:
            self._cgroup.kill()
        if self.namespace is not None:
            self._until_namespace_empty(self.namespace)
        if proc is not None:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    @staticmethod
    def _until_namespace_empty(namespace: int) -> None:
        """Kill what the namespace still holds until none of it is left (bounded).

        A killed init exits only after the kernel has reaped the namespace's other processes,
        which takes a while on a loaded host: returning sooner would let a revert hand over a
        fresh desktop while the old one is still in /proc.
        """
        deadline = time.monotonic() + _GONE_S
        while left := namespace_processes(namespace):
            if time.monotonic() > deadline:
                named = ", ".join(f"{p.pid} {p.comm}" for p in left)
                _log.error("pid namespace %d outlived %g s of SIGKILL: %s", namespace, _GONE_S, named)
                return
            kill_pids([p.pid for p in left])
            time.sleep(0.01)

    def close(self) -> None:
        """Kill everything, then drop home, groups, socket and (once no process runs as it) the uid."""
        self.kill()
        with self._lock:
            self._proc = None
        self.init_pid = self.xvfb_pid = self.namespace = None
        if self.home is not None:
            drop_home(self.home)
            self.home = None
        if self._cgroup is not None:
            self._cgroup.remove()
            self._cgroup = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
            self._unlink_socket()
        self.log.unlink(missing_ok=True)  # its errors were read when it failed; nothing piles up
        for attr in ("_lease", "_root_lease"):
            lease = getattr(self, attr)
            if lease is None:
                continue
            setattr(self, attr, None)
            for _ in range(500):  # a killed process leaves /proc a moment after its namespace
                if not uid_busy(lease.uid):
                    break
                time.sleep(0.01)
            else:
                # Keep the lease (and so the uid) out of use for this process's life.
                _log.error("processes of uid %d outlived their sandbox; the uid is not reused", lease.uid)
                continue
            lease.release()

    # -- queries ------------------------------------------------------------------------

    def problem(self) -> str | None:
        """None while the session runs, else why not."""
        with self._lock:
            proc = self._proc
        if proc is None:
            return "not started or closed"
        code = proc.poll()
        if code is not None:
            return f"the desktop session exited with code {code}: {self.log_tail()}"
        return None

    def processes(self) -> list[ProcInfo]:
        """Live processes of the sandbox: its whole pid namespace."""
        return [] if self.namespace is None else namespace_processes(self.namespace)

    @property
    def recordable(self) -> bool:
        """Whether there is anything of this sandbox to reap (its groups exist)."""
        return self._cgroup is not None or self._proc is not None

    def record(self) -> dict[str, object]:
        """What the watchdog and `sweep` need to kill this sandbox without us: its groups from
        before it is spawned, its first process and namespace once it serves."""
        return {"pid": self.pid, "init": self.init_pid, "namespace": self.namespace, "cgroup": self._marker}

    def log_tail(self, lines: int = 3) -> str:
        try:
            text = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        errors = [line for line in text if line.startswith("error:")]
        return " | ".join((errors or text)[-lines:]) or "(no output)"

    # -- internals ----------------------------------------------------------------------

    def _spawn(self) -> int:
        """Start the session in its confinement; returns the read end of its ready pipe."""
        assert self._listener is not None and self.home is not None
        cfg = self._settings
        uid = self.uid
        home_setup = home_setup_argv(self.template, self.home, uid=uid, size_bytes=cfg.home_mib * _MIB)
        net = self.net
        confinement = Confinement(
            uid=uid, gid=uid, home=self.home, root_uid=self.root_uid, tmp_bytes=cfg.tmp_mib * _MIB,
            netns=tuple(net.enter_argv()) if net is not None else (),
            resolv_conf=net.resolv_conf if net is not None else None,
        )  # fmt: skip
        launch = [[list(a.argv), a.window] for a in self.spec.launch]
        token_r, token_w = os.pipe()
        ready_r, ready_w = os.pipe()
        password = _memfd("password", cfg.password.encode())
        passwd = _memfd("passwd", passwd_file(uid, uid))
        group = _memfd("group", group_file(uid))
        seccomp = filter_fd()
        listen_fd = self._listener.fileno()
        program = [
            sandbox_python(), "-m", "environments.local.session",
            "--listen-fd", str(listen_fd), "--token-fd", str(token_r), "--ready-fd", str(ready_w),
            "--width", str(cfg.width), "--height", str(cfg.height), "--depth", str(cfg.depth),
            "--launch", json.dumps(launch), "--start-timeout", str(cfg.start_timeout),
        ]  # fmt: skip
        if not cfg.accessibility:
            program.append("--no-accessibility")
        join = self._cgroup.join_argv() if self._cgroup is not None else []
        inside = confinement.argv(
            program, passwd_fd=passwd, group_fd=group, password_fd=password, keep_fds=(listen_fd, token_r, ready_w),
            seccomp_fd=seccomp,
        )
        argv = [*join, *home_setup, *inside]
        try:
            os.write(token_w, self._token.encode())
            os.close(token_w)
            token_w = -1
            with self._lock:
                if self._aborted:
                    raise EnvError("the sandbox was stopped while starting")
                with self.log.open("ab") as out:
                    self._proc = subprocess.Popen(
                        argv,
                        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=out,
                        pass_fds=(listen_fd, token_r, ready_w, passwd, group, password, seccomp),
                        process_group=0,
                        close_fds=True,
                        preexec_fn=_die_with(os.getpid()),
                    )
                if self._nice:
                    # Under the lock, so a `boost` comes after. The outermost pid stays the
                    # same through its execs up to bubblewrap, so everything the sandbox
                    # forks inherits this (its set-up's short-lived helpers aside).
                    _set_nice(self._proc.pid, min(19, self._base_nice + self._nice))
            if self._on_record is not None:
                self._on_record()
        except BaseException:
            os.close(ready_r)
            raise
        finally:
            for fd in (token_r, ready_w, passwd, group, password, seccomp, token_w):
                if fd >= 0:
                    os.close(fd)
        return ready_r

    def _wait_ready(self, fd: int) -> None:
        proc = self._proc
        assert proc is not None
        timeout = self._settings.start_timeout
        deadline = time.monotonic() + timeout + 10
        buf = b""
        niced = False
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if self._aborted:
                self.kill()
                raise EnvError("the sandbox was stopped while starting")
            if left <= 0:
                self.kill()
                raise EnvError(f"the desktop did not start within {timeout:g} s")
            if self._nice and not niced:
                niced = self._nice_session(proc.pid)
            ready, _, _ = select.select([fd], [], [], min(left, 0.2 if niced else 0.02))
            if ready:
                chunk = os.read(fd, 64)
                if not chunk:
                    proc.wait(timeout=10)
                    self.kill()
                    raise EnvError(f"the desktop did not start: {self.log_tail()}")
                buf += chunk
        init = children(proc.pid)
        self.init_pid = init[0] if init else None
        self.namespace = pid_namespace(self.init_pid) if self.init_pid is not None else None
        found = [p.pid for p in self.processes() if p.comm == "Xvfb"]
        self.xvfb_pid = found[0] if found else None

    def _unlink_socket(self) -> None:
        """Remove our socket file, but never one another sandbox renamed over our old name."""
        try:
            if self.socket_path.stat().st_ino == self._socket_ino:
                self.socket_path.unlink()
        except FileNotFoundError:
            pass


_PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None, use_errno=True).prctl


def _die_with(owner: int) -> Callable[[], None]:
    """What the sandbox's first process runs before its first exec: die (SIGKILL) with the
    thread that spawns it, from that moment and through every exec up to bubblewrap (whose
    own ``--die-with-parent`` comes only once it runs), and not start at all if its owner
    is already gone. Only a pre-made foreign call and `os` calls run there (it is forked
    from a threaded process)."""

    def child() -> None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != owner:
            os._exit(1)

    return child


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


def autogroup(pid: int | str = "self") -> tuple[str, int] | None:
    """The scheduler autogroup of ``pid`` and its nice level, or None when it has none.

    The kernel prints nothing for a task in the default group (a process whose session was
    never renewed since boot, like a container runner's) or without autogroup support; its
    threads then compete by their own nice alone."""
    try:
        fields = Path(f"/proc/{pid}/autogroup").read_text().split()
        return fields[0], int(fields[-1])
    except (OSError, ValueError, IndexError):
        return None


def _autogroup_nice() -> int:
    """The nice level of this process's scheduler autogroup (0 in the default group)."""
    ours = autogroup()
    return 0 if ours is None else ours[1]


def _set_group_nice(pids: list[int], level: int) -> int:
    """Set the nice level of the autogroups of ``pids``, never of our own (a process that has
    not left its owner's session yet is skipped); returns how many are settled: set, or in
    the default group, which has no level to set."""
    ours = autogroup()
    done = 0
    for pid in pids:
        group = autogroup(pid)
        if group is None:
            done += Path(f"/proc/{pid}").exists()  # else it ended
            continue
        if ours is not None and group[0] == ours[0]:
            continue
        try:
            Path(f"/proc/{pid}/autogroup").write_text(str(level))
            done += 1
        except OSError:
            continue  # it ended
    return done


def _descendants(pid: int) -> set[int]:
    """``pid`` and every process below it (children of any of their threads)."""
    found, todo = set(), [pid]
    while todo:
        current = todo.pop()
        if current in found:
            continue
        found.add(current)
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                todo += [int(c) for c in Path(f"/proc/{current}/task/{tid}/children").read_text().split()]
            except OSError:
                continue
    return found


def _set_nice(pid: int, level: int) -> None:
    try:
        os.setpriority(os.PRIO_PROCESS, pid, level)
    except OSError:
        pass  # it has already ended: its start fails on its own
