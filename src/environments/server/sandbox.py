"""Bubblewrap confinement for model-written code (the coding agent's python and bash).

The code sees a read-only system, one writable home (bound at its own path and set as HOME),
no host homes, no run or environment folders, no network but loopback, a fresh pid
namespace, an empty environment except a few safe variables, and an unprivileged uid. The
X socket folder is bound so code may use the screen. A timeout kills the whole tree: bwrap
dies with its process group, and its pid namespace dies with it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from core.protocols import ExecResult, SandboxLanguage

from .processes import ProcessRegistry, run_captured

__all__ = ["CODE_PATH", "DEFAULT_HIDDEN", "XAUTH_PATH", "BwrapSandbox", "SandboxUnavailable"]

#: Host folders that are always invisible inside the sandbox.
DEFAULT_HIDDEN: tuple[str, ...] = ("/root", "/home")
_SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
_X11_DIR = "/tmp/.X11-unix"
#: Where the code to run appears inside the sandbox (read-only).
CODE_PATH = "/run/sandbox/code"
#: Where a copy of the display's Xauthority cookie appears inside the sandbox.
XAUTH_PATH = "/run/sandbox/Xauthority"


class SandboxUnavailable(RuntimeError):
    """bubblewrap or setpriv is missing on this machine."""


class BwrapSandbox:
    """Runs python or bash code under bubblewrap as an unprivileged user.

    `home` must exist and be writable by `uid` (chown it when preparing the environment).
    `hidden` lists extra host folders to cover with an empty tmpfs (the runs and
    environments base folders); the home itself is bound back even if it lies beneath one.
    """

    def __init__(
        self,
        home: str | os.PathLike[str],
        *,
        uid: int = 65534,
        gid: int = 65534,
        hidden: Iterable[str | os.PathLike[str]] = (),
        display: str | None = None,
        xauthority: str | None = None,
        python: str = "/usr/bin/python3",
        output_limit: int = 256 * 1024,
        registry: ProcessRegistry | None = None,
        nested: bool | None = None,
    ) -> None:
        self.home = Path(home).resolve()
        #: Inside a desktop's own confinement the caller is already unprivileged: the sandbox
        #: then drops nothing itself and builds its walls in a user namespace instead.
        self.nested = os.geteuid() != 0 if nested is None else nested
        self.uid = uid
        self.gid = gid
        self.hidden = tuple(dict.fromkeys([*DEFAULT_HIDDEN, *(str(Path(p).resolve()) for p in hidden)]))
        self.display = display if display is not None else os.environ.get("DISPLAY")
        self.xauthority = xauthority if xauthority is not None else os.environ.get("XAUTHORITY")
        self.python = python
        self.output_limit = output_limit
        self._registry = registry
        self._bwrap = shutil.which("bwrap")
        self._setpriv = shutil.which("setpriv")

    def command(
        self, program: Sequence[str], *, code_fd: int | None = None, xauth_fd: int | None = None
    ) -> list[str]:
        """The bwrap command line that runs `program`; `code_fd` and `xauth_fd` are copied in."""
        if self._bwrap is None or self._setpriv is None:
            raise SandboxUnavailable(
                "bubblewrap and setpriv are required: apt-get install bubblewrap util-linux"
            )
        home = str(self.home)
        # A nested sandbox may not mount a fresh /proc (the outer one is partly covered), so it
        # shows the outer one: the desktop's own processes, nothing of the host.
        devices = ["--dev-bind", "/dev", "/dev", "--ro-bind", "/proc", "/proc"] if self.nested else [
            "--dev", "/dev", "--proc", "/proc"]
        argv = [
            self._bwrap,
            "--ro-bind", "/", "/",
            *devices,
            "--tmpfs", "/tmp",
            "--tmpfs", "/run",
        ]  # fmt: skip
        if code_fd is not None:
            argv += ["--perms", "0444", "--ro-bind-data", str(code_fd), CODE_PATH]
        if xauth_fd is not None:
            argv += ["--perms", "0444", "--ro-bind-data", str(xauth_fd), XAUTH_PATH]
        if os.path.isdir(_X11_DIR):
            argv += ["--ro-bind", _X11_DIR, _X11_DIR]
        covered = ["/tmp", "/run"]
        for folder in self.hidden:
            if os.path.isdir(folder):
                argv += ["--tmpfs", folder]
                covered.append(folder)
        argv += _traversable_parents(home, covered)
        argv += ["--bind", home, home, "--chdir", home]
        argv += [
            "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--die-with-parent", "--new-session", "--clearenv",
            "--setenv", "HOME", home,
            "--setenv", "PATH", _SAFE_PATH,
            "--setenv", "LANG", "C.UTF-8",
            "--setenv", "TMPDIR", "/tmp",
            "--setenv", "XAUTHORITY", XAUTH_PATH if xauth_fd is not None else "/dev/null",
        ]  # fmt: skip
        if self.display:
            argv += ["--setenv", "DISPLAY", self.display]
        if self.nested:
            return [*argv, "--unshare-user", "--cap-drop", "ALL", "--", *program]
        argv += [
            "--",
            self._setpriv, f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs",
            *program,
        ]  # fmt: skip
        return argv

    async def run(self, language: SandboxLanguage, code: str, *, timeout: float = 60.0) -> ExecResult:
        """Run `code` and report status, return code, stdout and stderr (head and tail)."""
        if language == "python":
            program = [self.python, "-I", CODE_PATH]
        elif language == "bash":
            program = ["/bin/bash", CODE_PATH]
        else:
            return ExecResult("error", -1, "", f"{language} is not available in a Linux sandbox")
        if not self.home.is_dir():
            return ExecResult("error", -1, "", f"sandbox home {self.home} does not exist")
        fds = [_memfd("sandbox-code", code.encode("utf-8"))]
        cookie = _read_cookie(self.xauthority)
        if cookie is not None:
            fds.append(_memfd("sandbox-xauth", cookie))
        try:
            done = await run_captured(
                self.command(program, code_fd=fds[0], xauth_fd=fds[1] if len(fds) > 1 else None),
                timeout=timeout,
                env={"PATH": _SAFE_PATH},
                output_limit=self.output_limit,
                registry=self._registry,
                pass_fds=fds,
            )
        except SandboxUnavailable as exc:
            return ExecResult("error", -1, "", str(exc))
        finally:
            for fd in fds:
                os.close(fd)
        if done.timed_out:
            return ExecResult("timeout", -1, done.stdout, done.stderr + f"\n[killed after {timeout:g} s]")
        return ExecResult(
            "ok" if done.returncode == 0 else "error", done.returncode, done.stdout, done.stderr
        )


def _memfd(name: str, data: bytes) -> int:
    """An in-memory file holding `data`, rewound for bwrap to copy into the sandbox."""
    fd = os.memfd_create(name)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _read_cookie(path: str | None) -> bytes | None:
    """The display's Xauthority file, if there is a readable, non-empty one."""
    if not path:
        return None
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    return data or None


def _traversable_parents(path: str, covered: Sequence[str]) -> list[str]:
    """`--dir` entries that make the folders above `path` enterable inside the sandbox.

    A folder that lies under a tmpfs (the sandbox's own /tmp, /run or a hidden folder) does not
    exist there until bwrap makes it, and bwrap makes missing parents of a bind mode 0700 as
    root, which would lock the unprivileged user out of its own home.
    """
    roots = [os.path.normpath(c) for c in covered]
    argv: list[str] = []
    parent = os.path.dirname(os.path.normpath(path))
    chain: list[str] = []
    while parent not in ("/", ""):
        if any(parent != root and parent.startswith(root + "/") for root in roots):
            chain.append(parent)
        parent = os.path.dirname(parent)
    for folder in reversed(chain):
        argv += ["--perms", "0755", "--dir", folder]
    return argv
