"""The first observation waits until the desktop is ready, not a fixed time.

OSWorld's harness sleeps 60 s after a reset before the agent's first look. Taken right after
setup instead, the first screenshot shows GIMP's or VLC's black window or Impress's splash.
`wait_ready` waits, with a cap (OSWorld's 60 s), until

1. the task's windows are up: a window of each app its ``launch`` steps start (by window
   class) and, for each ``open`` step, a window titled with the file's name or stem (what
   OSWorld's ``open_file`` waits for); and no splash window is mapped;
2. the screen has stopped changing: successive screenshots (four a second) differ in no
   more than `STILL_FRACTION` of their pixels for `QUIET_S` (a blinking caret is still).

Windows are listed inside the desktop by its own ``python`` with python-xlib (as OSWorld's
image has it): title, class and window type of each client the window manager manages.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Protocol

from PIL import Image, ImageChops

from core.trajectory import SetupStep, Task

__all__ = ["CAP_S", "QUIET_S", "STILL_FRACTION", "Readiness", "expected_windows", "wait_ready"]

_log = logging.getLogger(__name__)
#: OSWorld's fixed wait after a reset: never wait longer than it does.
CAP_S = 60.0
#: How long the screen must stay still.
QUIET_S = 1.0
#: Changed pixels (of a quarter-size grey frame, by more than 16 levels) that still count as still.
STILL_FRACTION = 0.001
_INTERVAL_S = 0.25
#: Window classes of the apps OSWorld's tasks launch (a program's window shows it is up).
APP_CLASSES = {
    "gimp": ("gimp",),
    "vlc": ("vlc",),
    "thunderbird": ("thunderbird",),
    "google-chrome": ("chromium", "google-chrome"),
    "chromium": ("chromium",),
    "libreoffice": ("libreoffice", "soffice"),
    "soffice": ("libreoffice", "soffice"),
    "code": ("code",),
    "nautilus": ("nautilus", "org.gnome.nautilus"),
    "gnome-terminal": ("gnome-terminal",),
    "mousepad": ("mousepad",),
}
#: Lists the managed windows as JSON lines (title, class, type); runs inside the desktop.
_LIST = """
import json
from Xlib import X, display
d = display.Display()
root = d.screen().root
atom = d.intern_atom
clients = root.get_full_property(atom('_NET_CLIENT_LIST'), X.AnyPropertyType)
for wid in (clients.value if clients else []):
    w = d.create_resource_object('window', wid)
    try:
        name = w.get_full_property(atom('_NET_WM_NAME'), atom('UTF8_STRING'))
        title = name.value.decode('utf-8', 'replace') if name else (w.get_wm_name() or '')
        kinds = w.get_full_property(atom('_NET_WM_WINDOW_TYPE'), X.AnyPropertyType)
        types = [d.get_atom_name(t) for t in (kinds.value if kinds else [])]
        print(json.dumps({'title': str(title), 'class': list(w.get_wm_class() or ()), 'types': types}))
    except Exception:
        pass
"""


class ReadinessClient(Protocol):
    """What `wait_ready` needs of a desktop's controller."""

    async def execute(self, command: list[str], *, timeout: float | None = None) -> Any: ...

    async def screenshot(self) -> bytes: ...


@dataclass
class Readiness:
    """How the wait ended: seconds waited, what was still missing when the cap hit (empty when ready)."""

    seconds: float = 0.0
    missing: list[str] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return not self.missing


def _launch_program(step: SetupStep) -> str | None:
    raw = step.parameters.get("command")
    words = shlex.split(raw) if isinstance(raw, str) else [str(w) for w in raw or []]
    while words and "=" in words[0] and not words[0].startswith("="):
        words.pop(0)  # VAR=value before the program
    return PurePosixPath(words[0]).name if words else None


def expected_windows(task: Task) -> list[tuple[str, tuple[str, ...]]]:
    """(what, window matchers) the task's setup leaves on screen: ``class:`` app window classes
    for its launched apps, ``title:`` file names and stems for its opened files."""
    wanted: list[tuple[str, tuple[str, ...]]] = []
    for step in task.config:
        if step.type == "launch":
            program = _launch_program(step)
            if program in APP_CLASSES:
                wanted.append((f"a {program} window", tuple(f"class:{c}" for c in APP_CLASSES[program])))
        elif step.type == "open":
            name = PurePosixPath(str(step.parameters.get("path", ""))).name
            if name:
                stem = name.rsplit(".", 1)[0]
                wanted.append((f"a window titled {name!r}", (f"title:{name}", f"title:{stem}")))
    return wanted


def _matches(window: dict[str, Any], matchers: Iterable[str]) -> bool:
    classes = [str(c).lower() for c in window.get("class") or []]
    title = str(window.get("title") or "")
    for matcher in matchers:
        kind, _, value = matcher.partition(":")
        if kind == "class" and any(value in c for c in classes):
            return True
        if kind == "title" and value and value in title:
            return True
    return False


async def _windows(client: ReadinessClient) -> list[dict[str, Any]] | None:
    """The managed windows, or None when the desktop cannot list them (no python-xlib)."""
    done = await client.execute(["python", "-c", _LIST], timeout=20)
    if getattr(done, "returncode", 1) != 0:
        return None
    found = []
    for line in str(getattr(done, "stdout", "")).splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return found


def _frame(png: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(png)).convert("L")
    return image.resize((max(1, image.width // 4), max(1, image.height // 4)))


def _still(before: Image.Image, after: Image.Image) -> bool:
    if before.size != after.size:
        return False
    changed = ImageChops.difference(before, after).point(lambda v: 255 if v > 16 else 0)
    histogram = changed.histogram()
    return histogram[255] <= STILL_FRACTION * before.width * before.height


async def wait_ready(client: ReadinessClient, task: Task, *, cap: float = CAP_S) -> Readiness:
    """Wait until the task's windows are up, no splash shows and the screen is still (or `cap`)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    wanted = expected_windows(task)
    windows_up = False
    missing: list[str] = []
    previous: tuple[Image.Image, float] | None = None
    still_since: float | None = None
    while True:
        now = loop.time()
        if not windows_up:
            windows = await _windows(client)
            if windows is None:
                missing = []  # the desktop cannot list its windows: the screen alone decides
            else:
                missing = [what for what, matchers in wanted if not any(_matches(w, matchers) for w in windows)]
                missing += [
                    f"the splash {w.get('title') or w.get('class')} to go"
                    for w in windows
                    if "_NET_WM_WINDOW_TYPE_SPLASH" in (w.get("types") or [])
                ]
            windows_up = not missing
        if windows_up:
            frame = _frame(await client.screenshot())
            if previous is not None and _still(previous[0], frame):
                still_since = previous[1] if still_since is None else still_since
                if now - still_since >= QUIET_S:
                    return Readiness(seconds=now - start)
            else:
                still_since = None
            previous = (frame, now)
            missing = ["the screen to stop changing"]
        if now - start >= cap:
            _log.info("task %s: the desktop was not ready after %.0f s (waiting for %s)", task.id, cap, missing)
            return Readiness(seconds=now - start, missing=missing)
        await asyncio.sleep(_INTERVAL_S)
