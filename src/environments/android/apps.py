"""Finding an installed package from the name an agent gives ("Settings", "notes", a package).

Exact package names win; then a caller's table (display name → package); then a package
whose last dotted parts match the name's words (``clock`` → ``com.google.android.deskclock``
only through the table, ``settings`` → ``com.android.settings`` directly).
"""

from __future__ import annotations

import re

__all__ = ["resolve_app"]


def _words(text: str) -> list[str]:
    return [w for w in re.split(r"[^a-z0-9]+", text.lower()) if w]


def resolve_app(name: str, installed: list[str], table: dict[str, str] | None = None) -> str | None:
    """The package to launch for `name`, or None if nothing installed matches."""
    want = name.strip()
    if want in installed:
        return want
    for label, package in (table or {}).items():
        if label.lower() == want.lower() and package in installed:
            return package
    words = _words(want)
    if not words:
        return None
    joined = "".join(words)
    best: tuple[int, str] | None = None
    for package in installed:
        parts = package.lower().split(".")
        if parts[-1] == joined or "".join(parts[-len(words) :]) == joined:
            score = 0 if parts[-1] == joined else 1
        elif joined in parts[-1] and len(joined) >= 4:
            score = 2
        else:
            continue
        if best is None or (score, len(package)) < (best[0], len(best[1])):
            best = (score, package)
    return best[1] if best else None
