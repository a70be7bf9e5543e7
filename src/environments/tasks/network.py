"""Whether a task needs the internet, read from the task file alone.

OSWorld's task files carry no such flag (its VMs are always online), so it is read from what
the task does; a task file of this project's own suite can say it outright with
``"requires_network": true`` (or ``"network"``), which wins over everything else. A task
needs the internet, to be set up or to be solved, when it

- says so (``requires_network`` / ``network``) or asks for OSWorld's proxy (``proxy: true``);
- is a browser task (``chrome`` among its related apps, or, for a task that names none, its
  snapshot): the model browses;
- opens or launches a remote URL in a setup step (``open_tabs``, ``chrome_open_tabs``, a
  command line holding one);
- fetches inside the desktop in a setup or postconfig step (``apt-get install``, ``pip
  install``, ``wget``, ``curl``, ``git clone`` ...);
- unless it is ``infeasible``, asks in its instruction for a remote URL (a file from a model
  hub, a stream) or to install software without naming a local file to install from.

``download`` steps and ``cloud_file`` getters do not count: the host serves those files
from its cache (`environments.tasks.context`), the desktop never fetches them. Local
desktops use this to give a task user-mode internet (`environments.local.netns`).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlparse

from core.trajectory import Task

__all__ = ["BROWSER_APPS", "needs_network", "network_reason"]

#: Related apps (or snapshots) whose tasks are done on the web.
BROWSER_APPS = frozenset({"chrome", "chromium", "google-chrome", "firefox"})
_FLAGS = ("requires_network", "network")
#: Steps whose URLs the host resolves from its cache, never the desktop.
_HOST_SERVED = frozenset({"download"})
#: Commands that reach the internet from inside the desktop (package managers, fetchers).
_FETCHES = re.compile(
    r"\b(?:(?:apt|apt-get|aptitude|snap|flatpak|conda|npm)\s+(?:-\S+\s+)*(?:install|update|upgrade)"
    r"|pip3?\s+(?:-\S+\s+)*install|wget|curl|git\s+(?:clone|pull|fetch|push))\b"
)
_INSTALL = re.compile(r"\binstall(?:s|ed|ing)?\b", re.IGNORECASE)
#: An instruction that names where a local installer is (then installing needs no internet).
_LOCAL_SOURCE = re.compile(
    r"/home/|~/|\blocal\b|\blocated in\b|\.(?:vsix|zip|deb|tar|gz|crx|oxt|whl)\b", re.IGNORECASE
)


def _remote(url: str) -> bool:
    return urlparse(url.strip()).scheme in ("http", "https", "ftp")


def _strings(value: Any) -> list[str]:
    """Every string inside a step's parameters (command lines, URL lists, nested dicts)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def _flag(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def network_reason(task: Task) -> str | None:
    """Why ``task`` needs the internet (one short phrase), or None when it needs none."""
    for name in _FLAGS:
        if name in task.extra:
            said = _flag(task.extra[name])
            if said is not None:
                return f"the task file sets {name}" if said else None
    if task.proxy:
        return "the task asks for OSWorld's proxy"
    # An OSWorld task file names its apps in related_apps; its snapshot is a loose label that
    # OSWorld itself never reads (five VLC tasks say "chrome"), so it counts only without them.
    apps = {app.lower() for app in task.related_apps} or {task.snapshot.lower()}
    browser = sorted(apps & BROWSER_APPS)
    if browser:
        return f"a {browser[0]} task"
    for step in task.all_steps():
        if step.type in _HOST_SERVED:
            continue
        texts = _strings(step.parameters)
        words = [word for s in texts for word in s.split() if "://" in word]
        if any(_remote(word) for word in words):
            return f"its {step.type} step names a remote URL"
        fetch = next((m.group(0) for s in texts if (m := _FETCHES.search(s))), None)
        if fetch is not None:
            return f"its {step.type} step fetches from the internet ({fetch})"
    if task.evaluator is not None and task.evaluator.func == "infeasible":
        return None  # answered FAIL: nothing to fetch
    instruction = task.instruction
    if any(_remote(word.strip("\"'()<>.,;")) for word in instruction.split() if "://" in word):
        return "its instruction names a remote URL"
    if _INSTALL.search(instruction) and not _LOCAL_SOURCE.search(instruction):
        return "its instruction asks to install software from the internet"
    return None


def needs_network(task: Task) -> bool:
    """True when ``task`` needs the internet (see the module's rules)."""
    return network_reason(task) is not None
