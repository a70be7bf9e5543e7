"""OSWorld's metrics run with no more privilege than they need.

A task file chooses the metric and its options, and some metrics do whatever those say:
``run_sqlite3`` runs the task's SQL (``VACUUM INTO`` writes a database anywhere, ``ATTACH``
creates one), others open the files they are given. Run by the runner (root, for desktops),
that made a task file root. So every metric of a scoring runs in one worker process
(`metric_worker`) behind bubblewrap:

- as an unprivileged uid leased from the desktops' range (as root), with no capabilities and
  ``no_new_privs``; as another user, in a user namespace of its own;
- seeing a read-only system, the project's code, and the task's cache folder read-only at its
  own path (the getters' results are there); a private /tmp; nothing else of the host;
- with no network (its own namespace), its own pid namespace, dying with its owner, under the
  desktops' seccomp filter (no user namespaces, no kernel keyrings);
- each call bounded in time (`METRIC_TIMEOUT_S`), and its answer (JSON, never a pickle) read
  with a cap.

The worker starts when scoring starts and loads the task's metric modules while the getters
fetch the desktop's files, so confinement costs little of the scoring's time.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import select
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from environments.tasks.errors import TaskRunError
from environments.tasks.metric_worker import write_frame
from environments.walls.seccomp import filter_fd, supported
from environments.walls.system import OPT, group_file, passwd_file, python_paths, sandbox_python, system_argv
from environments.walls.uids import lease_uid, uid_busy

__all__ = ["METRIC_TIMEOUT_S", "MetricSandbox", "Missing"]

#: How long one metric may run (OSWorld's slowest compare videos or OCR pages).
METRIC_TIMEOUT_S = 600.0
_ANSWER_LIMIT = 1024 * 1024
_TMP_BYTES = 1024 * 1024 * 1024
_PATH = "/usr/local/bin:/usr/bin:/bin"


class Missing(Exception):
    """The metric raised FileNotFoundError (OSWorld scores that 0)."""


def _traversable(folder: Path) -> list[str]:
    """bwrap options creating each parent of `folder`, enterable by anyone."""
    argv: list[str] = []
    for parent in reversed(folder.parents):
        if str(parent) != "/":
            argv += ["--perms", "0755", "--dir", str(parent)]
    return argv


def _readable(folder: Path) -> None:
    """The cache folder and what the getters wrote in it, readable by the worker's uid (the
    run folder above stays 0700 on the host; links are never followed)."""
    for root, dirs, files in os.walk(folder):
        for name in (*dirs, *files):
            path = os.path.join(root, name)
            with contextlib.suppress(OSError):
                st = os.lstat(path)
                if not os.path.islink(path):
                    os.chmod(path, (st.st_mode & 0o7777) | (0o555 if name in dirs else 0o444))
    with contextlib.suppress(OSError):
        os.chmod(folder, 0o755)


class MetricSandbox:
    """The confined worker of one scoring; `call` is blocking, `close` ends it."""

    def __init__(self, cache_dir: Path, *, timeout: float = METRIC_TIMEOUT_S) -> None:
        self.cache_dir = cache_dir.resolve()
        self.timeout = timeout
        self.uid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._lease: Any = None
        self._log: Any = None
        self._fds: list[int] = []
        self._pending_ready = False

    def start(self, names: Iterable[str] = ()) -> None:
        """Start the worker and have it load the modules of `names` (without waiting)."""
        if self._proc is not None:
            return
        if shutil.which("bwrap") is None or shutil.which("setpriv") is None:
            raise TaskRunError(
                "scoring runs OSWorld's metrics confined, which needs bubblewrap and setpriv: "
                "apt-get install bubblewrap util-linux"
            )
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self._log = tempfile.TemporaryFile()
        argv = self._argv()
        try:
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                env={"PATH": _PATH, "LANG": "C.UTF-8"}, pass_fds=tuple(self._fds), close_fds=True,
            )  # fmt: skip
        finally:
            for fd in self._fds:
                os.close(fd)
            self._fds = []
        self._send(("preload", sorted(set(names))))
        self._pending_ready = True

    def _argv(self) -> list[str]:
        root = os.geteuid() == 0
        argv = ["bwrap", *system_argv()]
        if root:
            self._lease = lease_uid()
            self.uid = self._lease.uid
            passwd, group = _memfd("passwd", passwd_file(self.uid, self.uid)), _memfd("group", group_file(self.uid))
            self._fds = [passwd, group]
            argv += ["--perms", "0644", "--ro-bind-data", str(passwd), "/etc/passwd"]
            argv += ["--perms", "0644", "--ro-bind-data", str(group), "/etc/group"]
        argv += ["--dev", "/dev", "--proc", "/proc", "--size", str(_TMP_BYTES), "--perms", "1777", "--tmpfs", "/tmp"]
        argv += ["--tmpfs", "/run", "--tmpfs", "/var/tmp"]
        for folder in ("/opt", OPT):
            argv += ["--perms", "0755", "--dir", folder]
        paths = python_paths()
        for host, inside in paths:
            argv += ["--ro-bind", host, inside]
        argv += [*_traversable(self.cache_dir), "--ro-bind", str(self.cache_dir), str(self.cache_dir)]
        argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try"]
        argv += ["--die-with-parent", "--new-session", "--clearenv", "--chdir", "/tmp"]
        if supported():  # no user namespaces, no keyrings, as in a desktop
            self._fds.append(filter_fd())
            argv += ["--seccomp", str(self._fds[-1])]
        env = {
            "HOME": "/tmp", "PATH": _PATH, "LANG": "C.UTF-8", "TMPDIR": "/tmp",
            "PYTHONPATH": ":".join(inside for _, inside in paths), "PYTHONDONTWRITEBYTECODE": "1",
        }  # fmt: skip
        for key, value in env.items():
            argv += ["--setenv", key, value]
        program = [sandbox_python(), f"{OPT}/src/environments/tasks/metric_worker.py"]
        if not root:
            return [*argv, "--unshare-user", "--cap-drop", "ALL", "--", *program]
        return [
            *argv, "--",
            "setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--", *program,
        ]  # fmt: skip

    def call(self, name: str, args: tuple[Any, ...], options: dict[str, Any]) -> float | None:
        """The metric's score (None if it gave none); `Missing` for FileNotFoundError,
        `TaskRunError` for any other failure, said in one line."""
        if self._proc is None:
            self.start([name])
        if self._pending_ready:
            self._pending_ready = False
            self._receive(f"loading metric {name}")
        _readable(self.cache_dir)
        try:
            self._send((name, tuple(args), dict(options)))
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            raise TaskRunError(f"metric {name!r}: its inputs cannot be handed to the scorer: {exc}") from None
        answer = self._receive(f"metric {name}")
        if "missing" in answer:
            raise Missing(str(answer["missing"]))
        if "error" in answer:
            raise TaskRunError(f"metric {name!r} failed: {answer['error']}")
        score = answer.get("score")
        if score is not None and not isinstance(score, int | float):
            raise TaskRunError(f"metric {name!r} answered {score!r}, not a number")
        return None if score is None else float(score)

    def close(self) -> None:
        """End the worker (and everything it started), give its uid back; safe twice."""
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()  # it holds nothing to save; bubblewrap's namespace dies with it
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                with contextlib.suppress(OSError):
                    if stream is not None:
                        stream.close()
        lease, self._lease = self._lease, None
        if lease is not None:  # given back once nothing runs as its uid (never while something does)
            threading.Thread(target=_release, args=(lease,), name="metric-uid", daemon=True).start()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> MetricSandbox:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _send(self, request: object) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            write_frame(self._proc.stdin, pickle.dumps(request))  # type: ignore[arg-type]
        except BrokenPipeError:
            raise TaskRunError(f"the confined scorer ended: {self._log_tail()}") from None

    def _receive(self, what: str) -> dict[str, Any]:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + self.timeout
        data = b""
        need = 8
        while len(data) < need:
            left = deadline - time.monotonic()
            if left <= 0:
                self._proc.kill()
                raise TaskRunError(f"{what} did not finish within {self.timeout:.0f} s")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, min(65536, need - len(data)))
            if not chunk:
                hint = "" if os.geteuid() == 0 else (
                    " (as a user, confining the metrics needs unprivileged user namespaces for bubblewrap)")
                raise TaskRunError(f"the confined scorer ended during {what}: {self._log_tail()}{hint}")
            data += chunk
            if need == 8 and len(data) == 8:
                size = int.from_bytes(data, "big")
                if size > _ANSWER_LIMIT:
                    self._proc.kill()
                    raise TaskRunError(f"{what}: the scorer's answer of {size} bytes is over the limit")
                need = 8 + size
        try:
            answer = json.loads(data[8:])
        except ValueError:
            raise TaskRunError(f"{what}: the scorer's answer is not JSON") from None
        if not isinstance(answer, dict):
            raise TaskRunError(f"{what}: the scorer's answer is not an object")
        return answer

    def _log_tail(self) -> str:
        if self._log is None:
            return "(no log)"
        with contextlib.suppress(OSError):
            self._log.seek(0)
            lines = self._log.read()[-4000:].decode(errors="replace").strip().splitlines()
            return " | ".join(lines[-3:]) or "(no output)"
        return "(no log)"


def _release(lease: Any) -> None:
    for _ in range(500):
        if not uid_busy(lease.uid):
            lease.release()
            return
        time.sleep(0.01)


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
