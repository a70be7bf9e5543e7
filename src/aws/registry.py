"""Every fleet of this process, terminated on exit, on Ctrl-C and on SIGTERM or SIGHUP.

A fleet registers itself when it starts launching. Normal exit and Ctrl-C (which unwinds
through `Fleet.close` and then atexit) and SIGTERM/SIGHUP (a handler) all end in
`terminate_all`, which is idempotent. The handler does the EC2 calls on a helper thread so
it never re-enters a lock the interrupted main thread holds, then lets the signal kill the
process as it would have. What a SIGKILL leaves behind dies by its TTL or by `reap`.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, Protocol

__all__ = ["Closable", "install_handlers", "register", "terminate_all", "unregister"]

_log = logging.getLogger("aws.registry")
#: Seconds the signal handler gives the fleets to terminate their instances.
_HANDLER_BUDGET_S = 90.0


class Closable(Protocol):
    def terminate_everything(self) -> None:
        """Terminate every instance this fleet launched (blocking, idempotent)."""


#: Strong references: a fleet dropped without `close` still owns instances to terminate.
_FLEETS: set[Closable] = set()
_LOCK = threading.Lock()
_INSTALLED = False


def register(fleet: Closable) -> None:
    install_handlers()
    with _LOCK:
        _FLEETS.add(fleet)


def unregister(fleet: Closable) -> None:
    with _LOCK:
        _FLEETS.discard(fleet)


def terminate_all() -> None:
    """Terminate what every registered fleet launched; errors are logged, never raised."""
    # The signal handler may have interrupted a main thread that holds the lock: do not wait on it.
    locked = _LOCK.acquire(timeout=1.0)
    try:
        fleets = list(_FLEETS)
    finally:
        if locked:
            _LOCK.release()
    for fleet in fleets:
        try:
            fleet.terminate_everything()
        except Exception as exc:
            _log.error("could not terminate a fleet's instances (%s); run `agent-s3 aws reap`", type(exc).__name__)


_PREVIOUS: dict[int, Callable[[int, FrameType | None], Any]] = {}


def _on_signal(signum: int, frame: FrameType | None) -> None:
    worker = threading.Thread(target=terminate_all, name="aws-fleet-cleanup", daemon=True)
    worker.start()
    worker.join(_HANDLER_BUDGET_S)
    previous = _PREVIOUS.get(signum)
    if previous is not None:
        previous(signum, frame)
        return
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def install_handlers() -> None:
    """atexit always; SIGTERM and SIGHUP from the main thread, chained before any Python handler."""
    global _INSTALLED
    with _LOCK:
        if _INSTALLED:
            return
        _INSTALLED = True
    atexit.register(terminate_all)
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        current = signal.getsignal(sig)
        if current == signal.SIG_IGN:
            continue
        if callable(current):
            _PREVIOUS[sig] = current
        signal.signal(sig, _on_signal)
