"""The bubblewrap command line that confines one desktop like a VM.

The mount namespace is an allowlist: an empty tmpfs root with read-only binds of the system
(/usr and its links, /etc with a generated passwd/group naming the desktop's account
``user``), the project's sources and libraries under the neutral /opt/agent-s3 (without the
task suites' answers: `ANSWER_PACKAGES`), the desktop's own home at /home/user (the path
OSWorld tasks expect) and private /tmp, /dev/shm, /dev and /proc. Run folders, checkouts,
other desktops, token files and the host's homes do not exist inside. The sandbox has its
own pid, IPC and UTS namespaces and always a network namespace of its own: loopback only,
or (for a task that needs the internet) one prepared by `netns` behind a user-mode NAT,
never the host's. Everything in it runs as the desktop's own uid with no capabilities and no
way to gain any (``no_new_privs``), under a seccomp filter that refuses new user namespaces
and the kernel's keyrings (`seccomp`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.protocols import EnvError

__all__ = [
    "ANSWER_PACKAGES",
    "BROWSER_FLAGS",
    "HOME",
    "OPT",
    "SYSTEM_DIRS",
    "Confinement",
    "group_file",
    "hide_answers",
    "passwd_file",
    "python_paths",
    "sandbox_python",
    "system_argv",
]

#: The account's home inside every desktop (OSWorld's tasks name paths under it).
HOME = "/home/user"
#: Where the project's Python sources and libraries appear inside (read-only).
OPT = "/opt/agent-s3"
#: Host folders bound read-only (or re-created as the same symlink, on merged-/usr systems).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
#: Extra read-only system data some apps need, bound when present.
_OPTIONAL_RO = ("/var/cache/fontconfig", "/var/lib/dbus")
_PATH = "/usr/local/bin:/usr/bin:/bin"
_CHROMIUM_D = "/etc/chromium.d"
#: Chromium's own sandbox needs user namespaces, which a desktop's processes may not make:
#: the desktop is the browser's wall. --test-type keeps the "unsupported flag" bar off the screen.
BROWSER_FLAGS = b'export CHROMIUM_FLAGS="$CHROMIUM_FLAGS --no-sandbox --test-type"\n'


def passwd_file(uid: int, gid: int) -> bytes:
    """An /etc/passwd with root, nobody and the desktop's ``user`` (so ``ps``, ``id`` and
    LibreOffice name the account, and ``~user`` resolves)."""
    return (
        "root:x:0:0:root:/root:/usr/sbin/nologin\n"
        f"user:x:{uid}:{gid}:Desktop user:{HOME}:/bin/bash\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    ).encode()


def group_file(gid: int) -> bytes:
    return f"root:x:0:\nuser:x:{gid}:\nnogroup:x:65534:\n".encode()


def sandbox_python() -> str:
    """A system interpreter of the running Python's version (a virtualenv's base interpreter
    may live in a private folder such as /root/.pyenv, which the sandbox does not show)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for python in (f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"):
        if os.path.exists(python):
            return python
    raise EnvError(
        f"desktops need a system Python {version} (with tkinter) for their controller; "
        f"install python{version} and python3-tk (apt-get install python3-tk)"
    )


def _project_paths() -> list[str]:
    """The project's source folder and the site-packages it imports from (real paths)."""
    import environments

    src = Path(environments.__file__).resolve().parent.parent
    paths = [str(src)]
    for entry in sys.path:
        if entry.endswith("site-packages") and os.path.isdir(entry):
            paths.append(os.path.realpath(entry))
    return list(dict.fromkeys(paths))


def python_paths() -> list[tuple[str, str]]:
    """(host path, path inside) of every project import folder: the sources at
    ``/opt/agent-s3/src``, each site-package at ``/opt/agent-s3/libN``."""
    inside = []
    for i, path in enumerate(_project_paths()):
        inside.append((path, f"{OPT}/src" if i == 0 else f"{OPT}/lib{i}"))
    return inside


#: Task data with answers inside the project's packages (the local and Android suites' task
#: files and gold files): never shown to a desktop, whose model could copy an expected file.
ANSWER_PACKAGES = ("environments/tasks/suite", "environments/tasks/android_suite")


def hide_answers(host: str, inside: str) -> list[str]:
    """bwrap options, after binding ``host`` at ``inside``, that cover each answer package
    with an empty folder holding only its ``__init__.py`` (the package still imports)."""
    argv: list[str] = []
    for package in ANSWER_PACKAGES:
        folder = os.path.join(host, package)
        if not os.path.isdir(folder):
            continue
        argv += ["--tmpfs", f"{inside}/{package}"]
        init = os.path.join(folder, "__init__.py")
        if os.path.isfile(init):
            argv += ["--ro-bind", init, f"{inside}/{package}/__init__.py"]
    return argv


def system_argv() -> list[str]:
    """bwrap options that show the system read-only: /usr and its links, /etc, and the
    optional data some programs read."""
    argv: list[str] = []
    for folder in SYSTEM_DIRS:
        if os.path.islink(folder):
            argv += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            argv += ["--ro-bind", folder, folder]
    return argv


@dataclass(frozen=True, slots=True)
class Confinement:
    """How one desktop's sandbox is built. ``home`` is the host folder bound at /home/user.

    ``netns`` is a command prefix that joins a network namespace prepared for the desktop
    (`netns.DesktopNetwork.enter_argv`) and ``resolv_conf`` the resolver file shown inside
    it; without them the sandbox gets a new namespace with loopback only.
    """

    uid: int
    gid: int
    home: Path
    hostname: str = "desktop"
    netns: tuple[str, ...] = ()
    resolv_conf: Path | None = None
    tmp_bytes: int = 512 * 1024 * 1024
    shm_bytes: int = 256 * 1024 * 1024

    def python_paths(self) -> list[tuple[str, str]]:
        """(host path, path inside) of every project import folder."""
        return python_paths()

    def argv(
        self,
        program: Sequence[str],
        *,
        passwd_fd: int,
        group_fd: int,
        seccomp_fd: int | None = None,
        browser_fd: int | None = None,
    ) -> list[str]:
        """The bwrap command that runs ``program`` inside, as the desktop's uid; with
        ``seccomp_fd``, under that filter (`seccomp.desktop_filter`: no user namespaces, no
        kernel keyrings); with ``browser_fd`` (`BROWSER_FLAGS`), Debian's Chromium reads it
        among its flag files."""
        if bool(self.netns) != (self.resolv_conf is not None):
            raise EnvError("a desktop's network namespace and its resolv.conf go together")
        argv = [*self.netns, "bwrap", *system_argv()]
        argv += ["--perms", "0644", "--ro-bind-data", str(passwd_fd), "/etc/passwd"]
        argv += ["--perms", "0644", "--ro-bind-data", str(group_fd), "/etc/group"]
        if browser_fd is not None and os.path.isdir(_CHROMIUM_D):
            argv += ["--tmpfs", _CHROMIUM_D]  # the host's flag files, and ours last
            for name in sorted(os.listdir(_CHROMIUM_D)):
                argv += ["--ro-bind", f"{_CHROMIUM_D}/{name}", f"{_CHROMIUM_D}/{name}"]
            argv += ["--perms", "0644", "--ro-bind-data", str(browser_fd), f"{_CHROMIUM_D}/zz-agent-s3-desktop"]
        if self.resolv_conf is not None:  # the NAT's resolver, not the host's
            argv += ["--ro-bind", str(self.resolv_conf), "/etc/resolv.conf"]
        # bwrap makes missing parents of a mount 0700 root: make them enterable first.
        for folder in ("/var", "/var/cache", "/var/lib", "/opt", OPT):
            argv += ["--perms", "0755", "--dir", folder]
        for folder in _OPTIONAL_RO:
            argv += ["--ro-bind-try", folder, folder]
        argv += ["--dev", "/dev", "--proc", "/proc"]
        argv += ["--size", str(self.shm_bytes), "--tmpfs", "/dev/shm"]
        argv += ["--size", str(self.tmp_bytes), "--perms", "1777", "--tmpfs", "/tmp"]
        argv += ["--tmpfs", "/run", "--tmpfs", "/var/tmp"]
        paths = self.python_paths()
        for host, inside in paths:
            argv += ["--ro-bind", host, inside, *hide_answers(host, inside)]
        argv += ["--perms", "0755", "--dir", "/home", "--bind", str(self.home), HOME, "--chdir", HOME]
        argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if not self.netns:
            argv += ["--unshare-net"]
        argv += ["--hostname", self.hostname, "--die-with-parent", "--new-session", "--clearenv"]
        if seccomp_fd is not None:
            argv += ["--seccomp", str(seccomp_fd)]
        env = {
            "HOME": HOME,
            "USER": "user",
            "LOGNAME": "user",
            "SHELL": "/bin/bash",
            "PATH": _PATH,
            "LANG": "C.UTF-8",
            "TMPDIR": "/tmp",
            "PYTHONPATH": ":".join(inside for _, inside in paths),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        for key, value in env.items():
            argv += ["--setenv", key, value]
        argv += [
            "--",
            "setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs",
            "--",
            *program,
        ]  # fmt: skip
        return argv
