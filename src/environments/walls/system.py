"""What every sandbox of this project shows of the host, and who it runs as: the walls a
desktop (`environments.local.confine`) and the metric worker (`environments.tasks.metric_sandbox`)
share.

The system read-only (`system_argv`), the project's sources and libraries under the neutral
`OPT` with the task suites' answers hidden (`python_paths`, `hide_answers`), a generated
passwd/group naming the account ``user`` (`passwd_file`, `group_file`), the system Python
of the running version (`sandbox_python`) and the desktops' own site-packages
(`desktop_site`). The leased uids are `uids`, the seccomp filter `seccomp`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from core.protocols import EnvError

__all__ = [
    "ANSWER_PACKAGES",
    "DESKTOP_PATH",
    "HOME",
    "OPT",
    "SITE_ENV",
    "SYSTEM_DIRS",
    "desktop_site",
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
#: The account's PATH (Ubuntu's default for a user, as on OSWorld's image).
DESKTOP_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/games:/usr/local/games"
#: Names a folder of the desktops' Python packages other than ``<venv>/desktop-site``.
SITE_ENV = "AGENT_S3_DESKTOP_SITE"


def passwd_file(uid: int, gid: int) -> bytes:
    """An /etc/passwd with root, nobody and the desktop's ``user`` (so ``ps``, ``id`` and
    LibreOffice name the account, and ``~user`` resolves)."""
    return (
        "root:x:0:0:root:/root:/bin/bash\n"
        f"user:x:{uid}:{gid}:Desktop user:{HOME}:/bin/bash\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    ).encode()


def group_file(gid: int) -> bytes:
    return f"root:x:0:\nuser:x:{gid}:\nnogroup:x:65534:\n".encode()


def sandbox_python() -> str:
    """The system interpreter of the running Python's version (a virtualenv's base interpreter
    may live in a private folder such as /root/.pyenv, which the sandbox does not show; the
    host's /usr/local is not shown either: the desktop has its own)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    python = f"/usr/bin/python{version}"
    if os.path.exists(python):
        return python
    raise EnvError(
        f"desktops need a system Python {version} (with tkinter) for their controller; "
        f"install python{version} and python3-tk (apt-get install python3-tk)"
    )


def desktop_site() -> Path:
    """The desktops' own site-packages: what OSWorld's image has for its ``python`` (pyautogui
    and the packages its setup steps and getters import), kept apart from the project's
    (OpenCV, aiohttp ...) so ``python -c "import pyautogui"`` starts as fast as there."""
    chosen = os.environ.get(SITE_ENV)
    site = Path(chosen) if chosen else Path(sys.prefix) / "desktop-site"
    if not (site / "pyautogui").is_dir():
        raise EnvError(
            f"desktops need their own Python packages at {site} (pyautogui and what OSWorld's tasks "
            f"import); run scripts/setup.sh, or point {SITE_ENV} at such a folder"
        )
    return site.resolve()


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


def hide_answers(host: str, inside: str, bind: Callable[[str, str], list[str]] | None = None) -> list[str]:
    """bubblewrap options, after binding ``host`` at ``inside``, that cover each answer package
    with an empty folder holding only its ``__init__.py`` (the package still imports);
    ``bind(host_path, inside)`` gives the options binding one file (default: by path)."""
    bind = bind or (lambda source, target: ["--ro-bind", source, target])
    argv: list[str] = []
    for package in ANSWER_PACKAGES:
        folder = os.path.join(host, package)
        if not os.path.isdir(folder):
            continue
        argv += ["--tmpfs", f"{inside}/{package}"]
        init = os.path.join(folder, "__init__.py")
        if os.path.isfile(init):
            argv += bind(init, f"{inside}/{package}/__init__.py")
    return argv


def system_argv() -> list[str]:
    """bubblewrap options that show the system read-only: /usr and its links, /etc."""
    argv: list[str] = []
    for folder in SYSTEM_DIRS:
        if os.path.islink(folder):
            argv += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            argv += ["--ro-bind", folder, folder]
    return argv
