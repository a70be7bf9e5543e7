"""Key names the policy may use, per platform, and their canonical pyautogui spelling.

Models write keys in many spellings ("Control", "cmd", "Return", "Super"); accepting a
known set and normalising it here keeps the compilers simple and lets a wrong key become
precise feedback instead of a silent no-op on the desktop.
"""

from __future__ import annotations

import re
import string

from core.protocols import Platform

__all__ = ["UnknownKey", "desktop_keys", "known_keys", "normalize_key"]

_PRINTABLE = set(string.ascii_lowercase + string.digits + "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")

_NAMED_DESKTOP = {
    "alt",
    "altleft",
    "altright",
    "backspace",
    "capslock",
    "ctrl",
    "ctrlleft",
    "ctrlright",
    "delete",
    "down",
    "end",
    "enter",
    "esc",
    "home",
    "insert",
    "left",
    "menu",
    "numlock",
    "pagedown",
    "pageup",
    "pause",
    "printscreen",
    "right",
    "scrolllock",
    "shift",
    "shiftleft",
    "shiftright",
    "space",
    "tab",
    "up",
    "volumedown",
    "volumemute",
    "volumeup",
    "win",
    "winleft",
    "winright",
    "playpause",
    "nexttrack",
    "prevtrack",
    *(f"f{i}" for i in range(1, 25)),
    *(f"num{i}" for i in range(10)),
}

# Spellings models use for the same key; mapped before checking the set.
_ALIASES = {
    "control": "ctrl",
    "ctl": "ctrl",
    "return": "enter",
    "escape": "esc",
    "del": "delete",
    "pgup": "pageup",
    "pgdn": "pagedown",
    "page_up": "pageup",
    "page_down": "pagedown",
    "super": "win",
    "meta": "win",
    "windows": "win",
    "cmd_or_ctrl": "ctrl",
    "arrowup": "up",
    "arrowdown": "down",
    "arrowleft": "left",
    "arrowright": "right",
    "spacebar": "space",
    "prtsc": "printscreen",
    "prtscr": "printscreen",
    "print": "printscreen",
    "apps": "menu",
    "option": "alt",
    "caps_lock": "capslock",
    "back_space": "backspace",
}

# Keys that exist only on other systems; named so the feedback can say what to use instead.
_FOREIGN = {"command": "ctrl", "cmd": "ctrl", "fn": None}

_ANDROID = {
    "back",
    "home",
    "enter",
    "backspace",
    "delete",
    "tab",
    "space",
    "menu",
    "app_switch",
    "volumeup",
    "volumedown",
    "power",
    "search",
}


class UnknownKey(ValueError):
    """An unknown or foreign key name; the message says which names are valid."""


def desktop_keys() -> frozenset[str]:
    return frozenset(_NAMED_DESKTOP | _PRINTABLE)


def known_keys(platform: Platform) -> frozenset[str]:
    """Canonical key names accepted on `platform`."""
    if platform == "android":
        return frozenset(_ANDROID | set(string.ascii_lowercase + string.digits))
    return desktop_keys()


def normalize_key(key: str, platform: Platform) -> str:
    """The canonical name of `key` on `platform`, or `UnknownKey` saying what is valid."""
    raw = key.strip()
    if len(raw) == 1:
        low = raw.lower()
        if low in known_keys(platform):
            return low
        raise UnknownKey(f"key {key!r} cannot be pressed on {platform}; type it with agent.type instead")
    low = raw.lower().replace(" ", "").replace("-", "")
    low = _ALIASES.get(low, low)
    if platform != "android" and low in _FOREIGN:
        instead = _FOREIGN[low]
        hint = f"; use {instead!r} on {platform}" if instead else ""
        raise UnknownKey(f"key {key!r} does not exist on {platform}{hint}")
    if low in known_keys(platform):
        return low
    named = sorted(k for k in known_keys(platform) if len(k) > 1 and not re.fullmatch(r"(f|num)\d+", k))
    if platform != "android":
        named.append("f1..f24")
    raise UnknownKey(
        f"unknown key {key!r} on {platform}; use single characters or one of: {', '.join(named)}"
    )
