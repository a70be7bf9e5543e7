"""The desktop's root: the first process of its sandbox, it starts the session and serves `sudo`.

OSWorld's image gives its user ``sudo`` with a known password, and its tasks (``echo PASSWORD
| sudo -S mkdir ...``) and the paper's prompts rely on it. Desktops run with
``no_new_privs`` and without user namespaces of their own, so a setuid ``sudo`` cannot work
inside; this broker does its job instead. It runs as uid 0 of the desktop's own user
namespace (`userns`: an unprivileged uid of the host), with a container's root capability
set (`ROOT_CAPS`, no ``CAP_SYS_ADMIN``, ``CAP_NET_ADMIN``, ``CAP_SYS_PTRACE``; the bounding
set cut to match, ``no_new_privs`` on), undumpable, and listens on `SOCKET` (any desktop
process may connect; peers are identified by ``SO_PEERCRED``).

A request (`sudo_client`, installed as ``/usr/local/bin/sudo``) carries the command, the
caller's environment, working folder and umask, and its stdin, stdout and stderr as file
descriptors, so the command reads and writes exactly where the caller's would. The
password is checked here, never in the client; a success is remembered for 15 minutes per
terminal (per parent process without one), as sudo's default ``timestamp_timeout``. The
command runs in a session of its own as root (or ``-u user``), with sudo's reset
environment (``secure_path``, ``HOME``, ``SUDO_USER`` ...); the client relays its signals,
and a client that vanishes takes its command with it.

Run as ``rootd.py --password-fd N --user-uid U [--keep-fds A,B] -- SESSION...`` (standard
library only). When the session ends, so does this process, and with it the sandbox.
"""

import argparse
import contextlib
import ctypes
import hmac
import json
import os
import shlex
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

#: Where `sudo` finds the broker inside the desktop.
SOCKET = "/run/sudo/broker.sock"
#: A container's root: Docker's default set without MKNOD, NET_RAW, SETFCAP and AUDIT_WRITE.
ROOT_CAPS = {
    "CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_FOWNER": 3, "CAP_FSETID": 4, "CAP_KILL": 5,
    "CAP_SETGID": 6, "CAP_SETUID": 7, "CAP_SETPCAP": 8, "CAP_NET_BIND_SERVICE": 10, "CAP_SYS_CHROOT": 18,
}  # fmt: skip
#: Debian's and Ubuntu's ``Defaults secure_path``.
SECURE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: Variables sudo keeps through ``env_reset`` (its built-in env_keep list, abridged).
_KEEP = {"DISPLAY", "XAUTHORITY", "TERM", "COLORTERM", "LANG", "LANGUAGE", "TZ", "COLORS", "LS_COLORS",
         "PS1", "PS2", "HOSTNAME", "XDG_CURRENT_DESKTOP", "XAUTHORIZATION"}
TIMESTAMP_S = 15 * 60
_TRIES = 3
_PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT = 4, 24, 38, 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_HEAD = struct.Struct(">I")
_MAX_MESSAGE = 4 * 1024 * 1024


def _prctl(*args: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(*args) != 0:
        raise OSError(ctypes.get_errno(), f"prctl{args} failed")


def confine_self() -> None:
    """Undumpable, no new privileges, and no capability outside `ROOT_CAPS`, ever."""
    _prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    keep = set(ROOT_CAPS.values())
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last + 1):
        if cap not in keep:
            _prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    with contextlib.suppress(OSError):
        _prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    _prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def send(sock: socket.socket, message: dict, fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode()
    frame = _HEAD.pack(len(data)) + data
    if fds:
        socket.send_fds(sock, [frame], fds)
    else:
        sock.sendall(frame)


def _exactly(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 65536))
        if not chunk:
            raise EOFError("the peer closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive(sock: socket.socket, max_fds: int = 0) -> tuple[dict, list[int]]:
    """One framed message and the descriptors sent with its first bytes."""
    fds: list[int] = []
    if max_fds:
        head, fds, _, _ = socket.recv_fds(sock, _HEAD.size, max_fds)
        if not head:
            raise EOFError("the peer closed the connection")
        if len(head) < _HEAD.size:
            head += _exactly(sock, _HEAD.size - len(head))
    else:
        head = _exactly(sock, _HEAD.size)
    (size,) = _HEAD.unpack(head)
    if size > _MAX_MESSAGE:
        raise ValueError("message too large")
    message = json.loads(_exactly(sock, size))
    if not isinstance(message, dict):
        raise ValueError("a message must be a JSON object")
    return message, fds


class Broker:
    """Checks passwords, remembers successes per terminal, runs commands as root."""

    def __init__(self, password: str, user_uid: int) -> None:
        self._password = password.encode()
        self.user_uid = user_uid
        self._stamps: dict[tuple[str, int], float] = {}
        self._lock = threading.Lock()
        self._running: set[int] = set()

    # -- accounts ------------------------------------------------------------------------

    def account(self, name: str) -> tuple[int, str, str, str] | None:
        """(uid, name, home, shell) of a target user the desktop knows."""
        if name in ("root", "0", "#0"):
            return 0, "root", "/root", "/bin/bash"
        if name in ("user", str(self.user_uid), f"#{self.user_uid}"):
            return self.user_uid, "user", "/home/user", "/bin/bash"
        return None

    # -- timestamps ----------------------------------------------------------------------

    @staticmethod
    def ticket(pid: int) -> tuple[str, int]:
        """sudo's default ``timestamp_type=tty``: the caller's terminal, else its parent process."""
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            tty, ppid = int(fields[4]), int(fields[1])
        except (OSError, ValueError, IndexError):
            return "pid", pid
        return ("tty", tty) if tty else ("ppid", ppid)

    def fresh(self, key: tuple[str, int]) -> bool:
        with self._lock:
            stamp = self._stamps.get(key)
            return stamp is not None and time.monotonic() - stamp < TIMESTAMP_S

    def stamp(self, key: tuple[str, int]) -> None:
        with self._lock:
            self._stamps[key] = time.monotonic()

    def forget(self, key: tuple[str, int] | None = None) -> None:
        with self._lock:
            if key is None:
                self._stamps.clear()
            else:
                self._stamps.pop(key, None)

    def password_ok(self, given: object) -> bool:
        return isinstance(given, str) and hmac.compare_digest(given.encode(), self._password)

    # -- one connection ------------------------------------------------------------------

    def serve(self, conn: socket.socket) -> None:
        fds: list[int] = []
        try:
            pid, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
            if uid not in (0, self.user_uid):
                send(conn, {"error": "sudo: you are not allowed to use sudo here", "status": 1})
                return
            request, fds = receive(conn, max_fds=3)
            self._handle(conn, request, fds, pid, uid)
        except (OSError, EOFError, ValueError):
            pass
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            with contextlib.suppress(OSError):
                conn.close()

    def _handle(self, conn: socket.socket, request: dict, fds: list[int], pid: int, uid: int) -> None:
        key = self.ticket(pid)
        if request.get("remove"):
            self.forget(key)
            send(conn, {"exit": 0})
            return
        if request.get("reset"):
            self.forget(key)
            if not request.get("argv") and not request.get("validate"):
                send(conn, {"exit": 0})
                return
        if uid != 0 and not self.fresh(key) and not self._authenticate(conn, request):
            return
        self.stamp(key)
        if request.get("validate") and not request.get("argv") and not request.get("login") and not request.get(
            "shell"
        ):
            send(conn, {"exit": 0})
            return
        if len(fds) != 3:
            send(conn, {"error": "sudo: the client sent no standard streams", "status": 1})
            return
        self._run(conn, request, fds)

    def _authenticate(self, conn: socket.socket, request: dict) -> bool:
        if request.get("noninteractive"):
            send(conn, {"error": "sudo: a password is required", "status": 1})
            return False
        for attempt in range(_TRIES):
            send(conn, {"need": "password", "retry": attempt > 0})
            reply, _ = receive(conn)
            given = reply.get("password")
            if given is None:
                wrong = f"\nsudo: {attempt} incorrect password attempt{'s' if attempt != 1 else ''}" if attempt else ""
                send(conn, {"error": "sudo: no password was provided" + wrong, "status": 1})
                return False
            if self.password_ok(given):
                return True
        send(conn, {"error": f"sudo: {_TRIES} incorrect password attempts", "status": 1})
        return False

    def _command(self, request: dict, account: tuple[int, str, str, str]) -> list[str] | str:
        """The argv to run, or an error line."""
        argv = [str(a) for a in request.get("argv") or []]
        _, _, _, shell = account
        if request.get("login"):
            return [shell, "-l", *(["-c", shlex.join(argv)] if argv else [])]
        if request.get("shell"):
            user_shell = str((request.get("env") or {}).get("SHELL") or shell)
            return [user_shell, *(["-c", shlex.join(argv)] if argv else [])]
        if not argv:
            return "usage: sudo [-AbEHknPS] [-u user] [-D directory] [-p prompt] command [arg ...]"
        if "/" not in argv[0]:
            for folder in SECURE_PATH.split(":"):
                candidate = os.path.join(folder, argv[0])
                if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                    return [candidate, *argv[1:]]
            return f"sudo: {argv[0]}: command not found"
        return argv

    def _environment(self, request: dict, account: tuple[int, str, str, str], argv: list[str]) -> dict[str, str]:
        given = {str(k): str(v) for k, v in (request.get("env") or {}).items()}
        preserve = request.get("preserve_env")
        if preserve is True:
            env = dict(given)
        else:
            names = set(preserve) if isinstance(preserve, list) else set()
            env = {k: v for k, v in given.items() if k in _KEEP or k in names or k.startswith("LC_")}
        _, name, home, shell = account
        env.update(
            PATH=SECURE_PATH, HOME=home, USER=name, LOGNAME=name, SHELL=shell, MAIL=f"/var/mail/{name}",
            SUDO_USER="user", SUDO_UID=str(self.user_uid), SUDO_GID=str(self.user_uid),
            SUDO_COMMAND=" ".join(argv)[:4096],
        )  # fmt: skip
        settings = request.get("settings")
        if isinstance(settings, dict):  # sudo VAR=value command (SETENV, implied by ALL)
            env.update({str(k): str(v) for k, v in settings.items()})
        return env

    def _run(self, conn: socket.socket, request: dict, fds: list[int]) -> None:
        account = self.account(str(request.get("user") or "root"))
        if account is None:
            send(conn, {"error": f"sudo: unknown user {request.get('user')}", "status": 1})
            return
        command = self._command(request, account)
        if isinstance(command, str):
            send(conn, {"error": command, "status": 1})
            return
        uid, _, home, _ = account
        cwd = str(request.get("cwd") or "/")
        if request.get("login"):
            cwd = home
        elif request.get("chdir"):
            cwd = str(request["chdir"])
        umask = request.get("umask")
        try:
            proc = subprocess.Popen(
                command,
                stdin=fds[0], stdout=fds[1], stderr=fds[2],
                cwd=cwd if os.path.isdir(cwd) else "/",
                env=self._environment(request, account, command),
                user=uid, group=uid, extra_groups=[],
                umask=(int(umask) | 0o022) if isinstance(umask, int) else 0o022,
                start_new_session=True, close_fds=True,
            )  # fmt: skip
        except OSError as exc:
            send(conn, {"error": f"sudo: unable to execute {command[0]}: {exc.strerror}", "status": 1})
            return
        for fd in fds:
            os.close(fd)
        fds.clear()
        with self._lock:
            self._running.add(proc.pid)
        try:
            if request.get("background"):
                send(conn, {"exit": 0})
                threading.Thread(target=proc.wait, daemon=True).start()
                return
            send(conn, {"started": proc.pid})
            self._supervise(conn, proc)
        finally:
            with self._lock:
                self._running.discard(proc.pid)

    def _supervise(self, conn: socket.socket, proc: subprocess.Popen) -> None:
        """Relay the client's signals until the command exits; a client that goes away
        (killed, timed out) takes the command's session with it."""
        done = threading.Event()

        def watch() -> None:
            code = proc.wait()
            done.set()
            status = code if code >= 0 else 128 - code
            with contextlib.suppress(OSError):
                send(conn, {"exit": status})
                conn.shutdown(socket.SHUT_WR)

        threading.Thread(target=watch, daemon=True).start()
        while not done.is_set():
            try:
                message, _ = receive(conn)
            except (OSError, EOFError, ValueError):
                if not done.is_set():
                    _kill_group(proc.pid, signal.SIGKILL)
                break
            sig = message.get("signal")
            if isinstance(sig, int) and 0 < sig < 65:
                _kill_group(proc.pid, sig)
        done.wait(timeout=5)

    def kill_all(self) -> None:
        with self._lock:
            running = list(self._running)
        for pid in running:
            _kill_group(pid, signal.SIGKILL)


def _kill_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _listen(path: str) -> socket.socket:
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o755, exist_ok=True)
    os.chmod(folder, 0o755)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chmod(path, 0o666)
    server.listen(64)
    return server


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="rootd.py")
    parser.add_argument("--password-fd", type=int, required=True)
    parser.add_argument("--user-uid", type=int, required=True)
    parser.add_argument("--keep-fds", default="", help="descriptors the session inherits, comma-separated")
    parser.add_argument("--socket", default=SOCKET)
    parser.add_argument("session", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    session = args.session[1:] if args.session[:1] == ["--"] else args.session
    if not session:
        print("error: rootd.py needs the session's command after --", file=sys.stderr)
        return 2
    with os.fdopen(args.password_fd, "rb") as pipe:
        password = pipe.read().decode().rstrip("\n")
    if not password:
        print("error: no password on --password-fd", file=sys.stderr)
        return 2
    confine_self()
    os.makedirs("/root", mode=0o700, exist_ok=True)
    broker = Broker(password, args.user_uid)
    server = _listen(args.socket)
    keep = tuple(int(fd) for fd in args.keep_fds.split(",") if fd)
    proc = subprocess.Popen(session, pass_fds=keep, close_fds=True)
    for fd in keep:
        os.close(fd)

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=broker.serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: proc.terminate())
    code = proc.wait()
    broker.kill_all()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
