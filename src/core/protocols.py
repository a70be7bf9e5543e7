"""The interfaces `environments` implements and the rest of the project consumes.

Policies, guides, judges and critics never see an environment class: they see screenshots
and, for the coding agent, a `Sandbox`. The runner sees `Environment` and tells a dead
environment (`EnvironmentLost`, retry the rollout elsewhere) from a failed action
(`ExecResult.status != "ok"`, feed it back to the agent).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

__all__ = [
    "EnvError",
    "Environment",
    "EnvironmentLost",
    "ExecResult",
    "Platform",
    "Sandbox",
    "SandboxLanguage",
]

Platform = Literal["ubuntu", "windows", "android"]
SandboxLanguage = Literal["python", "bash", "powershell", "cmd"]


class EnvError(Exception):
    """Base of every error an environment raises on purpose."""


class EnvironmentLost(EnvError):
    """The environment is gone (crashed VM, dead display, unreachable server).

    A rollout that sees this cannot continue; the runner may retry it on a fresh one.
    """


@dataclass(frozen=True, slots=True)
class ExecResult:
    """What running a command, an action or a code block produced."""

    status: Literal["ok", "error", "timeout"]
    returncode: int
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@runtime_checkable
class Sandbox(Protocol):
    """Runs untrusted code inside an environment, never on the host.

    Implementations confine the code (an unprivileged user, only the environment's files
    writable, no network, a timeout that kills every child) and report what happened.
    """

    async def run(self, language: SandboxLanguage, code: str, *, timeout: float = 60.0) -> ExecResult: ...


class Environment(ABC):
    """One place a rollout runs: a desktop, a VM or a phone, revertible to a snapshot."""

    #: A short identifier, unique within a pool (e.g. ``local-3``).
    name: str
    #: Which operating system the agent sees; selects prompts and key names.
    platform: Platform

    @abstractmethod
    async def screenshot(self) -> bytes:
        """A PNG of the whole screen with the pointer drawn."""

    @abstractmethod
    async def screen_size(self) -> tuple[int, int]:
        """(width, height) in the pixels that actions address."""

    @abstractmethod
    async def cursor_position(self) -> tuple[int, int]:
        """Where the pointer is now, in screen pixels."""

    @abstractmethod
    async def act(self, code: str) -> ExecResult:
        """Run one compiled action (pyautogui code on desktops) in the environment.

        Never retried on a lost reply: an action is not idempotent.
        """

    @abstractmethod
    def sandbox(self) -> Sandbox | None:
        """Where the coding agent may run code, or None if this platform cannot."""

    @abstractmethod
    async def revert(self) -> None:
        """Return to the start snapshot (files and running applications)."""

    @abstractmethod
    async def close(self) -> None:
        """Release everything the environment holds; safe to call twice."""
