"""The operating systems a task or environment can be for.

A word of the project's vocabulary that both the records (`core.trajectory`) and the
interfaces (`core.protocols`) use, so it lives below them both.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["Platform"]

Platform = Literal["ubuntu", "windows", "android"]
