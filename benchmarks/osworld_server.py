"""OSWorld's own in-VM server as the reference of `env_step.py`, and what it is.

OSWorld's controller server (``desktop_env/server/main.py`` with its ``pyxcursor.py``) is
not in the desktop-env wheel. Give `env_step.py` its folder (``--reference
PATH/TO/desktop_env/server/main.py``) and a Python that has its requirements (its
``requirements.txt``: PyAutoGUI 0.9.54, python3-xlib 0.15, Pillow 10.1.0, flask, requests,
numpy, lxml; and pyatspi, which Debian's python3-pyatspi gives the system Python, so a venv
made with ``--system-site-packages`` from /usr/bin/python3 does). It is run unchanged:
imported under another name (so its ``app.run(debug=True, host="0.0.0.0")`` on port 5000
does not run) and served by the same Werkzeug server Flask's ``app.run`` uses, threaded,
on a free loopback port. pyscreeze is told gnome-screenshot exists, as on OSWorld's image,
which makes it grab through Pillow there too.

`describe` names the file by its git blob hash: the copy whose sibling
``desktop_env/controllers/python.py`` is byte-identical to desktop-env 1.0.2's (the wheel
built 2025-10-23) is `PINNED_BLOB`; a later upstream copy differs from it in one error
message (`LATER_BLOB`).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

__all__ = ["LATER_BLOB", "PINNED_BLOB", "blob_hash", "describe", "launch"]

#: desktop_env/server/main.py of the OSWorld tree matching desktop-env 1.0.2 (public fork
#: limenlp/OS_Blind at 2d10a46, whose controllers/python.py equals the wheel's byte for byte).
PINNED_BLOB = "d61a51c3ec131058c69bcc1b7199e8f0d04120e9"
#: The same file upstream as of 2025-11-23 to 2026-04 (forks aditya-iyer1/osworld-agent,
#: ljxpython/OSWorldUse): one error message differs.
LATER_BLOB = "02fbf176f74fc70e05b5259e9d2d817214ae5dbd"

_LAUNCHER = """
import os, runpy, sys
main, port_file = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.dirname(main))  # its pyxcursor.py
import pyscreeze
pyscreeze.GNOMESCREENSHOT_EXISTS = True  # as on OSWorld's image: pyscreeze grabs through Pillow
server = runpy.run_path(main, run_name="osworld_server")
from werkzeug.serving import make_server
httpd = make_server("127.0.0.1", 0, server["app"], threaded=True)
with open(port_file, "w") as out:
    out.write(str(httpd.server_port))
httpd.serve_forever()
"""


def blob_hash(path: Path) -> str:
    """The file's git blob hash (what `git hash-object` prints)."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def describe(path: Path, python: str) -> str:
    """One line saying which server the reference is."""
    blob = blob_hash(path)
    if blob == PINNED_BLOB:
        what = "OSWorld's own server, the copy matching desktop-env 1.0.2"
    elif blob == LATER_BLOB:
        what = "OSWorld's own server, upstream as of 2025-11 (one error message newer than desktop-env 1.0.2's)"
    else:
        what = "a server file this benchmark does not recognise (not OSWorld's pinned copy)"
    return f"reference: {what}: {path} (git blob {blob[:12]}), run unchanged by {python}"


def launch(main: Path, python: str, port_file: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start OSWorld's server from `main` with `python` on a free loopback port (written to `port_file`)."""
    return subprocess.Popen([python, "-c", _LAUNCHER, str(main), str(port_file)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


if __name__ == "__main__":
    print(describe(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else sys.executable))
