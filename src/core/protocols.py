"""The interfaces `environments` implements and the rest of the project consumes.

Policies, guides, judges and critics never see an environment class: they see screenshots
and, for the coding agent, a `Sandbox`. The runner sees `Environment` and tells a dead
environment (`EnvironmentLost`, retry the rollout elsewhere) from a failed action
(`ExecResult.status != "ok"`, feed it back to the agent).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from core.platforms import Platform

if TYPE_CHECKING:
    from core.trajectory.task import Task

__all__ = [
    "Checkpoint",
    "EnvError",
    "Environment",
    "EnvironmentLost",
    "ExecResult",
    "Platform",
    "Sandbox",
    "SandboxLanguage",
    "WorkerFacts",
]

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


@dataclass(frozen=True, slots=True)
class WorkerFacts:
    """What an environment tells the worker about itself; None leaves the run's setting.

    The environment knows its account, home and sudo rule and how apps are opened on it, so
    the runner never asks which kind of environment it holds.
    """

    user_name: str | None = None
    home: str | None = None
    sudo: Literal["unavailable", "passwordless", "with_password"] | None = None
    #: The account's password where the image documents one (OSWorld's VMs); the worker shows
    #: it to the model only inside a sudo rule.
    password: str | None = None
    #: Apps are started as programs (no desktop launcher to search).
    open_by_exec: bool = False
    #: Whether the coding agent can run programs here at all.
    code_agent: bool = True
    #: Why scores from here are not comparable with OSWorld's leaderboard (other app builds);
    #: None where they are (OSWorld's own images). Results are labelled with it.
    leaderboard_note: str | None = None
    #: Whether scores from here stand beside the leaderboard's; None reads it from the note
    #: (comparable without one). An environment that is comparable but differs on purpose
    #: (an EC2 fleet's tags, say) says True and keeps its note for readers.
    leaderboard_comparable: bool | None = None
    #: Whether the environment reaches the internet now (None: it does not say).
    network: bool | None = None


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A running environment saved mid-rollout (memory, devices and disk), restorable by any
    environment of the same pool: branching continues a rollout from it as several forks,
    and a step guide may look ahead from it and come back."""

    id: str
    #: What was saved, e.g. ``step 5 of rollout 0``.
    label: str
    #: The environment that took it.
    source: str


class Environment(ABC):
    """One place a rollout runs: a desktop, a VM or a phone, revertible to a snapshot.

    Besides acting, an environment owns its task handling: how it reverts to a task's start
    state, how it runs the task's setup steps and scores its evaluator (its task client),
    how it labels itself, and the facts a worker needs. The defaults suit an environment
    that can only revert; one that can run tasks overrides `prepare_task` and `score_task`.
    """

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

    async def prepare_task(self, task: Task, cache_dir: Path) -> None:
        """Revert to `task`'s start state and run its setup steps (files go under `cache_dir`)."""
        await self.revert()
        if task.config or task.evaluator:
            raise EnvError(f"{type(self).__name__} {self.name} cannot run task setup or evaluation steps")

    async def score_task(self, task: Task, cache_dir: Path, *, last_action: str | None) -> float | None:
        """The evaluator's score of the final state; None when the task has no evaluator.

        `last_action` is ``"fail"`` when the agent gave up (OSWorld's FAIL).
        """
        if not task.evaluator:
            return None
        raise EnvError(f"{type(self).__name__} {self.name} cannot score tasks")

    async def worker_facts(self) -> WorkerFacts:
        """What the worker should be told about this environment."""
        return WorkerFacts()

    async def start_recording(self) -> bool:
        """Start an mp4 recording of the screen; False where this environment cannot record."""
        return False

    async def end_recording(self) -> bytes:
        """Stop the recording `start_recording` began and return the mp4's bytes."""
        raise EnvError(f"{type(self).__name__} {self.name} records no video")

    def address(self) -> str | None:
        """Where a client outside reaches this environment's server (a VM's forwarded URL),
        or None where nothing listens outside it (a local desktop's socket is private)."""
        return None

    def can_checkpoint(self) -> bool:
        """Whether `checkpoint` and `restore` work here (a VM with live snapshots)."""
        return False

    async def checkpoint(self, label: str) -> Checkpoint:
        """Save this environment as it is now and go on from the saved state."""
        raise EnvError(f"{type(self).__name__} {self.name} cannot checkpoint a running rollout")

    async def restore(self, checkpoint: Checkpoint) -> None:
        """Become the state `checkpoint` saved (a fork of it, when another environment took it)."""
        raise EnvError(f"{type(self).__name__} {self.name} cannot restore a checkpoint")

    async def accessibility_tree(self) -> str | None:
        """The platform's own element tree as text (OSWorld's AT-SPI XML on desktops,
        uiautomator's XML on Android), or None where the platform serves none."""
        return None

