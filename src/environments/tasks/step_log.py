"""What OSWorld's setup controller logs while one step runs in one thread, read without
changing what reaches the terminal.

The controller reports some failures only as ERROR records (a launch or command the server
refused, a window call that failed) and every command it ran as an INFO record holding the
server's reply (``Command executed successfully: CMD -> REPLY``), whose ``returncode``
tells a command that ran but failed. `collect` gathers both for the calling thread. To see
INFO records the ``desktopenv.setup`` logger is lowered to INFO while any collection is
open, and a filter on it passes on only what would have passed before (the level it had,
else its parent's), so handlers and the terminal see exactly what they saw without it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LOGGER", "StepLog", "collect"]

LOGGER = "desktopenv.setup"
_SUCCESS = "Command executed successfully"


@dataclass
class StepLog:
    """ERROR messages and command replies the controller logged from one thread."""

    errors: list[str] = field(default_factory=list)
    replies: list[dict[str, Any]] = field(default_factory=list)

    def take(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            self.errors.append(record.getMessage())
        elif isinstance(record.msg, str) and record.msg.startswith(_SUCCESS) and isinstance(record.args, tuple):
            with contextlib.suppress(ValueError, TypeError, IndexError):
                reply = json.loads(str(record.args[-1]))
                if isinstance(reply, dict):
                    self.replies.append(reply)


class _Tap(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.logs: dict[int, StepLog] = {}
        self.users = 0
        self.previous = logging.NOTSET

    def floor(self) -> int:
        if self.previous != logging.NOTSET:
            return self.previous
        parent = logging.getLogger(LOGGER).parent
        return parent.getEffectiveLevel() if parent is not None else logging.WARNING

    def filter(self, record: logging.LogRecord) -> bool:
        log = self.logs.get(record.thread or 0)
        if log is not None:
            log.take(record)
        return record.levelno >= self.floor()


_TAP = _Tap()


@contextlib.contextmanager
def collect() -> Iterator[StepLog]:
    """The controller's records from this thread while the block runs."""
    logger = logging.getLogger(LOGGER)
    thread = threading.get_ident()
    log = StepLog()
    with _TAP.lock:
        if _TAP.users == 0:
            _TAP.previous = logger.level
            logger.addFilter(_TAP)
            logger.setLevel(logging.INFO)
        _TAP.users += 1
        _TAP.logs[thread] = log
    try:
        yield log
    finally:
        with _TAP.lock:
            _TAP.logs.pop(thread, None)
            _TAP.users -= 1
            if _TAP.users == 0:
                logger.removeFilter(_TAP)
                logger.setLevel(_TAP.previous)
