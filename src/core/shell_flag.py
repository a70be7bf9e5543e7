"""`shell` in OSWorld's task files and requests, read as OSWorld's server reads it.

OSWorld's server hands the JSON value of ``shell`` to ``subprocess.run(shell=...)``, so a
string counts by Python truthiness. Its task files spell it as a boolean or as the strings
``"true"`` and ``"false"``; both strings are non-empty, so both run through a shell there,
and so here. Any other value is refused with one line: no task file uses one, and a lenient
reading would turn a mistake into its opposite.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SHELL_SPELLINGS", "osworld_shell"]

#: Every value of ``shell`` that is read (None: absent).
SHELL_SPELLINGS: tuple[object, ...] = (True, False, None, "true", "false")


def osworld_shell(value: Any) -> bool:
    """Whether OSWorld's server runs the command through a shell; ValueError for other spellings."""
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, str) and value in ("true", "false"):
        return True
    raise ValueError(
        f'shell must be true or false (or the strings "true"/"false" of OSWorld\'s task files), not {str(value)[:40]!r}'
    )
