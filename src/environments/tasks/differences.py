"""Where a local desktop still differs from OSWorld's image in ways that can change a score.

OSWorld's tasks were written for its Ubuntu 22.04 GNOME image; a local desktop is Debian 12
with openbox. Most of what tasks touch is the same (the account, its home, ``python``,
``sudo``, the apps' own config files), but not everything. `DIFFERENCES` lists what is
known to differ, and `task_differences` names those a task meets, read from what it does
(its apps, steps and getters): the support report prints them per task. They are warnings,
not refusals; whether a difference did change a task's outcome is what an untouched check
on a real desktop shows (a task that scores 1 before anyone acts is flagged there).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from core.trajectory import Task
from environments.tasks.network import BROWSER_APPS

__all__ = ["DIFFERENCES", "Difference", "task_differences"]


@dataclass(frozen=True)
class Difference:
    """One known way a local desktop is not OSWorld's image."""

    key: str
    #: How the local desktop differs, in one line.
    what: str
    applies: Callable[[Task], bool]


def _texts(task: Task) -> str:
    """Every command, path and getter field of the task, as one text to search."""
    parts: list[str] = []
    for step in task.all_steps():
        parts.append(repr(step.parameters))
    for call in task.metric_calls():
        for spec in (call.result, call.expected):
            if spec is not None:
                parts.append(f"{spec.type} {spec.params!r}")
    return "\n".join(parts)


def _apps(task: Task) -> set[str]:
    return {a.lower() for a in task.related_apps} | {task.snapshot.lower()}


def _getters(task: Task) -> set[str]:
    return {spec.type for call in task.metric_calls() for spec in (call.result, call.expected) if spec is not None}


def _mentions(pattern: str) -> Callable[[Task], bool]:
    compiled = re.compile(pattern)
    return lambda task: bool(compiled.search(_texts(task)))


#: Chrome run as a program (not a ``google-chrome.desktop`` name in a list of apps).
_CHROME = re.compile(r"(?<![\w.-])google-chrome(?![\w.-])")
_APP_BUILDS = {"libreoffice_calc", "libreoffice_writer", "libreoffice_impress", "gimp", "vlc", "thunderbird"}

DIFFERENCES: tuple[Difference, ...] = (
    Difference(
        "chromium",
        "Debian's Chromium stands in for Google Chrome (same DevTools protocol, Chrome's profile folder; "
        "another build and UI, run with --no-sandbox --test-type inside the desktop's own sandbox)",
        lambda t: bool(_apps(t) & BROWSER_APPS) or bool(_CHROME.search(_texts(t))),
    ),
    Difference(
        "app-builds",
        "Debian 12's builds of the apps (LibreOffice 7.4, GIMP 2.10.34, VLC 3.0, Thunderbird ESR), not Ubuntu "
        "22.04's: menus, defaults and the files they write can differ",
        lambda t: bool(_apps(t) & _APP_BUILDS),
    ),
    Difference(
        "default-apps",
        "default applications come from the desktop's mimeapps.list and Debian's desktop files (e.g. VLC is "
        "the video player; Ubuntu's is Totem)",
        lambda t: "default_video_player" in _getters(t) or any(s.type == "open" for s in t.config)
        or bool(re.search(r"xdg-(mime|open)", _texts(t))),
    ),
    Difference(
        "gnome",
        "openbox, not GNOME: no Shell, Settings, dock or Files; GNOME's gsettings keys exist (schemas installed, "
        "kept in a keyfile) but nothing acts on them, and GNOME's own dialogs cannot be used to change them",
        _mentions(r"gsettings|org\.gnome|gnome-shell|nautilus|gnome-control-center|gnome-extensions"),
    ),
    Difference(
        "system-services",
        "no systemd, sound server, NetworkManager, Bluetooth or battery: timedatectl, systemctl, pactl/"
        "pulseaudio, amixer, nmcli, bluetoothctl, upower do not work",
        _mentions(r"timedatectl|systemctl|pactl|pulseaudio|amixer|nmcli|bluetoothctl|upower|hostnamectl|loginctl"),
    ),
    Difference(
        "system-files",
        "/etc and /usr are the host's, read-only even for the desktop's root: no new accounts, packages or "
        "system settings (useradd, apt install, /etc edits)",
        _mentions(r"useradd|adduser|usermod|chpasswd|getent|/etc/|apt(-get)? |dpkg |update-alternatives"),
    ),
    Difference(
        "account",
        "the account's uid is not 1000 and its runtime folder is not /run/user/1000",
        _mentions(r"/run/user/1000|\buid\b|\bid -u\b"),
    ),
)


def task_differences(task: Task) -> list[Difference]:
    """The known differences a task meets (see the module): none of them blocks it."""
    return [d for d in DIFFERENCES if d.applies(task)]
