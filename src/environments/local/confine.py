"""The bubblewrap command line that confines one desktop like a VM.

The mount namespace is an allowlist: an empty tmpfs root with read-only binds of the system
(/usr and its links, /etc with a generated passwd/group naming the desktop's account
``user``), the project's sources and libraries under the neutral /opt/agent-s3, the
desktop's own home at /home/user (the path OSWorld tasks expect) and private /tmp, /dev/shm,
/dev and /proc. Run folders, checkouts, other desktops, token files and the host's homes do
not exist inside. The sandbox has its own pid, IPC and UTS namespaces and always a network
namespace of its own: loopback only, or (for a task that needs the internet) one prepared by
`netns` behind a user-mode NAT, never the host's. Everything in it runs as the desktop's own
uid with no capabilities and no way to gain any (``no_new_privs``), under a seccomp filter
that refuses new user namespaces and the kernel's keyrings (`seccomp`). The task suites'
answers (`ANSWER_PACKAGES`) are not shown with the project's sources.

The sandbox lives in a user namespace of its own (`userns`) where two ids exist: the
desktop's account and its root, an unprivileged host uid leased for the desktop alone. The
first process inside is that root (`rootd`, a container's capability set, no
``CAP_SYS_ADMIN``): it starts the session as the account and answers ``sudo``
(`sudo_client`), so root of the desktop reaches the desktop's own files and processes and
nothing of the host. ``/usr/local`` is the desktop's own, as on OSWorld's image: ``python``
(the system interpreter with OSWorld's in-VM packages, `desktop_site`), ``sudo``,
``google-chrome`` (Debian's Chromium with Chrome's profile folder, where OSWorld's getters
read it), and room for what root installs there.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.protocols import EnvError
from environments.walls.system import (
    DESKTOP_PATH,
    HOME,
    OPT,
    desktop_site,
    hide_answers,
    python_paths,
    sandbox_python,
    system_argv,
)

__all__ = ["Confinement"]

#: Extra read-only system data some apps need, bound when present.
_OPTIONAL_RO = ("/var/cache/fontconfig", "/var/lib/dbus")
#: The caps bubblewrap leaves to the desktop's root (`rootd.ROOT_CAPS`; rootd cuts the
#: bounding set to the same).
_ROOT_CAPS = ("CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID",
              "CAP_SETUID", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT")
_HERE = Path(__file__).resolve().parent
_LOCAL_MIB = 256
#: `userns.STAGE`: where the launcher shows the host paths bubblewrap binds.
_STAGE = "/tmp"


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
    #: The host uid that is root inside the desktop (and its gid); None runs no root at all.
    root_uid: int | None = None
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
        password_fd: int | None = None,
        keep_fds: Sequence[int] = (),
        seccomp_fd: int | None = None,
    ) -> list[str]:
        """The command that runs ``program`` inside, as the desktop's uid.

        With ``root_uid``, the sandbox is made in the desktop's user namespace and its first
        process is the desktop's root (`rootd`, which reads the sudo password from
        ``password_fd`` and hands ``keep_fds`` on to ``program``). Host folders are then bound
        from descriptors the launcher opens as the host's root (`_Sources`): the desktop's
        root may not even traverse the root-only folders they live in. With ``seccomp_fd``,
        bubblewrap puts everything it runs under that filter (`seccomp.desktop_filter`: no
        user namespaces, no kernel keyrings), the desktop's root and what ``sudo`` runs included."""
        if bool(self.netns) != (self.resolv_conf is not None):
            raise EnvError("a desktop's network namespace and its resolv.conf go together")
        if self.root_uid is not None and password_fd is None:
            raise EnvError("a desktop with a root needs its sudo password on a descriptor")
        python = sandbox_python()
        src = _Sources(staged=self.root_uid is not None)
        argv = ["bwrap", *system_argv()]
        argv += ["--perms", "0644", "--ro-bind-data", str(passwd_fd), "/etc/passwd"]
        argv += ["--perms", "0644", "--ro-bind-data", str(group_fd), "/etc/group"]
        if self.resolv_conf is not None:  # the NAT's resolver, not the host's
            argv += src.bind(self.resolv_conf, "/etc/resolv.conf")
        # bwrap makes missing parents of a mount 0700 root: make them enterable first.
        for folder in ("/var", "/var/cache", "/var/lib", "/opt", OPT):
            argv += ["--perms", "0755", "--dir", folder]
        for folder in _OPTIONAL_RO:
            argv += ["--ro-bind-try", folder, folder]
        argv += self._usr_local(python, src)
        argv += ["--dev", "/dev", "--proc", "/proc"]
        argv += ["--size", str(self.shm_bytes), "--tmpfs", "/dev/shm"]
        argv += ["--size", str(self.tmp_bytes), "--perms", "1777", "--tmpfs", "/tmp"]
        argv += ["--tmpfs", "/run", "--tmpfs", "/var/tmp", "--perms", "0700", "--dir", "/root"]
        paths = self.python_paths()
        for host, inside in paths:
            argv += [*src.bind(host, inside), *hide_answers(host, inside, src.bind)]
        argv += ["--perms", "0755", "--dir", "/home", *src.bind(self.home, HOME, writable=True), "--chdir", HOME]
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
            "PATH": DESKTOP_PATH,
            "LANG": "C.UTF-8",
            "TMPDIR": "/tmp",
            "PYTHONPATH": ":".join(inside for _, inside in paths),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        for key, value in env.items():
            argv += ["--setenv", key, value]
        drop = [
            "setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs",
            "--",
        ]  # fmt: skip
        if self.root_uid is None:
            return [*self.netns, *argv, "--", *drop, *program]
        argv += ["--cap-drop", "ALL"]
        for cap in _ROOT_CAPS:
            argv += ["--cap-add", cap]
        launcher = [python, "-I", "-S", str(_HERE / "userns.py"), *src.stage_args(), str(self.root_uid), str(self.uid)]
        rootd = f"{OPT}/src/environments/local/rootd.py"
        return [
            *self.netns, *launcher, "--", *argv, "--",
            python, "-I", "-S", rootd, "--password-fd", str(password_fd), "--user-uid", str(self.uid),
            "--keep-fds", ",".join(str(fd) for fd in keep_fds), "--",
            *drop, *program,
        ]  # fmt: skip

    def _usr_local(self, python: str, src: _Sources) -> list[str]:
        """The desktop's own /usr/local: ``python`` (with `desktop_site`) and ``sudo``; the rest
        of the tmpfs is root's to fill (``sudo pip install``), gone at revert."""
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        argv = ["--size", str(_LOCAL_MIB * 1024 * 1024), "--perms", "0755", "--tmpfs", "/usr/local"]
        for folder in ("bin", "sbin", "lib", f"lib/{version}", "share"):
            argv += ["--perms", "0755", "--dir", f"/usr/local/{folder}"]
        argv += src.bind(desktop_site(), f"/usr/local/lib/{version}/dist-packages")
        argv += ["--symlink", python, "/usr/local/bin/python", "--symlink", python, "/usr/local/bin/python3"]
        if self.root_uid is not None:
            argv += src.bind(_HERE / "sudo_client.py", "/usr/local/bin/sudo")
        if os.path.exists("/usr/bin/chromium") and not os.path.exists("/usr/bin/google-chrome"):
            for name in ("google-chrome", "chromium"):  # see the scripts in ./bin
                argv += src.bind(_HERE / "bin" / name, f"/usr/local/bin/{name}")
        return argv


class _Sources:
    """Host paths bound into the sandbox: by path while bubblewrap runs as the host's root;
    in the desktop's user namespace, from where the launcher stages them (`userns.STAGE`),
    since the desktop's root may not traverse the root-only folders they live in."""

    def __init__(self, *, staged: bool) -> None:
        self.staged = staged
        self._paths: list[str] = []

    def bind(self, host: str | os.PathLike[str], inside: str, *, writable: bool = False) -> list[str]:
        kind = "--bind" if writable else "--ro-bind"
        if not self.staged:
            return [kind, str(host), inside]
        self._paths.append(str(host))
        return [kind, f"{_STAGE}/s{len(self._paths)}", inside]

    def stage_args(self) -> list[str]:
        return [arg for i, path in enumerate(self._paths, 1) for arg in ("--stage", f"s{i}={path}")]
