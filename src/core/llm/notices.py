"""Calls being retried, told to whoever shows progress.

A call that keeps failing (a server answering 500, a rate limit) can spend minutes in its
retries; a user watching the live progress must see that, and why. `ChatModel` tells each
retry and the end of a retried call to the listeners registered here (the runner's live
progress); nothing is shown by the model layer itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["RetryNotice", "notify", "watching_retries"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryNotice:
    """One retry of a call (`kind` "retry"), or the end of a call that was retried ("done")."""

    kind: Literal["retry", "done"]
    #: Identifies the call across its notices.
    call: str
    model: str
    #: The ledger module that made the call (policy, judge, critic, ...).
    module: str
    #: The classifier's reason for the last failure (server_error, rate_limit, ...).
    reason: str
    #: The failed attempt's number (1-based); for "done", the attempts made.
    attempt: int
    #: Seconds since the call started.
    elapsed: float
    #: Seconds until the next attempt (0 for "done").
    wait: float = 0.0
    status: int | None = None
    #: The last failure, one line, secrets removed.
    message: str = ""
    #: For "done": whether the call finally succeeded.
    succeeded: bool = False
    tags: dict[str, str] = field(default_factory=dict)

    def line(self) -> str:
        """``policy call (openai/gpt-6.1-sol) retrying: server_error (HTTP 500), attempt 3 failed,
        45 s so far, next in 8 s``."""
        where = f"{self.module} call ({self.model}"
        if "task" in self.tags:
            where += f", {self.tags['task']}" + (f" #{self.tags['rollout']}" if "rollout" in self.tags else "")
        where += ")"
        cause = self.reason + (f" (HTTP {self.status})" if self.status else "")
        if self.kind == "done":
            outcome = "answered" if self.succeeded else "failed for good"
            return f"{where} {outcome} after {self.attempt} attempts in {self.elapsed:.0f} s (last failure: {cause})"
        return (f"{where} retrying: {cause}, attempt {self.attempt} failed, {self.elapsed:.0f} s so far, "
                f"next in {self.wait:.0f} s")


_listeners: list[Callable[[RetryNotice], None]] = []


@contextmanager
def watching_retries(listener: Callable[[RetryNotice], None]) -> Iterator[None]:
    """Tell `listener` every retry notice while the block runs."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


def notify(notice: RetryNotice) -> None:
    """Tell every listener; a listener's failure is logged, never the call's."""
    for listener in list(_listeners):
        try:
            listener(notice)
        except Exception:  # a display must never break a model call
            _log.exception("a retry listener failed")
