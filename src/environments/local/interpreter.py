"""Pick a Python the desktop's unprivileged user can run, with the project importable.

The controller server runs its action executor and scripts with its own interpreter as the
desktop's uid. A virtualenv whose base interpreter lives in a private folder (e.g. pyenv
under /root) is not executable by that uid; the system Python of the same version, pointed
at the same site-packages, is.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys

from core.protocols import EnvError

__all__ = ["server_python"]

#: pyautogui itself needs a display to import; tkinter is what it needs besides (through
#: mouseinfo, which exits the interpreter when tkinter is missing).
_PROBE = "import aiohttp, PIL, Xlib, mss, tkinter, environments.server"


def _project_paths() -> list[str]:
    """sys.path entries outside the interpreter's own installation (site-packages, sources)."""
    base = (os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix) + "/lib/python")
    paths = []
    for entry in sys.path:
        if not entry or not os.path.isdir(entry):
            continue
        real = os.path.realpath(entry)
        if real.startswith(base[0] + os.sep) and "site-packages" not in real:
            continue
        paths.append(entry)
    return paths


def _works(python: str, uid: int, gid: int, pythonpath: str) -> bool:
    try:
        # The same way the server starts its children (not through setpriv, which can
        # succeed where a plain set-uid exec is refused).
        result = subprocess.run(
            [python, "-c", _PROBE],
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": pythonpath, "HOME": "/"},
            cwd="/",
            capture_output=True,
            timeout=60,
            check=False,
            user=uid,
            group=gid,
            extra_groups=[],
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0


@functools.cache
def server_python(uid: int, gid: int) -> tuple[str, str]:
    """(interpreter, PYTHONPATH) with which ``uid`` can import the project and pyautogui."""
    pythonpath = os.pathsep.join(_project_paths())
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [sys.executable, f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"]
    for python in dict.fromkeys(candidates):
        if os.path.exists(python) and _works(python, uid, gid, pythonpath):
            return python, pythonpath
    raise EnvError(
        f"no Python {version} that uid {uid} may run can import the project; "
        f"install python{version} and python3-tk system-wide (apt-get install python3-tk) "
        "or make the virtualenv's interpreter executable by that user"
    )
